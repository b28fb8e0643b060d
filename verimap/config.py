"""Knobs of one run. The eval methods (react, map, map-v, verimap, *-1it) are presets of these,
and the run's policies fill the knobs a user leaves unset (applied where the run is wired).

The knobs come in a few parts, by what they steer: a knob is given, read and written out in its
part (`RunConfig(loop=Loop(max_retries=2))`, `{"loop": {"max_retries": 2}}`,
`config.loop.max_retries`). A knob given outside its part is an error that says where it belongs.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from verimap.base.accounting import Budget
from verimap.base.check_names import ARITHMETIC, BUILTIN_CHECKS, DEFAULT_BALLOT, known_ballot


class _Part(BaseModel):
    """A part of `RunConfig`: a misspelled knob is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid")


# `verimap eval`'s wall-clock budget per task, in seconds: far above a task on a hosted model (a
# minute or two), and room for the local model's many-node plans on a few CPU cores.
EVAL_TASK_TIME_LIMIT = 1800.0


class Loop(_Part):
    """How often the loop tries: attempts per node, plans per run, nodes at once."""

    max_retries: int = Field(default=3, ge=1)  # execute->verify attempts per node per iteration
    max_iterations: int = Field(default=5, ge=1)  # plans, counting the first
    max_parallel: int = Field(default=4, ge=1)
    sequential: bool = False  # the paper's one-node-at-a-time order
    reuse_verified: bool = True
    fail_accepted: bool = False  # accept a node that exhausts retries; result becomes partial
    # A failed node whose work (the node and all it depends on) comes back unchanged from the
    # replanner runs again this many times; the next unchanged return ends the run (None: no
    # limit, as the paper). On 110 stored local runs, no third run of the same work ever passed.
    max_plan_repeats: int | None = Field(default=1, ge=0)


class Sampling(_Part):
    """How every role samples its replies."""

    temperature: float | None = None
    # Attempts after the first (they carry the failure's feedback); None: `temperature`. Greedy
    # decoding repeats a wrong answer word for word whatever the feedback says; sampling a retry
    # lets a sound VF choose among different answers.
    retry_temperature: float | None = None
    top_p: float | None = None
    # The sampler's seed for every role's requests (`GenerationSettings.seed`; None: the
    # endpoint's own). It makes sampled runs repeatable where the endpoint honours it.
    seed: int | None = None


class Verify(_Part):
    """What checks an attempt, and what a run that never verified still answers."""

    # full: the plan's VFs; instruction: a generic judge whose criterion is the instruction (map-v);
    # none: no verification (map).
    verification: Literal["full", "instruction", "none"] = "full"
    vf_timeout_s: float = 10.0
    # Built-in checks (`verimap.checks`) run beside the plan's VFs wherever they apply, only
    # with verification "full" (beyond the paper; a plan may also ask for one by name). The
    # default recomputes every calculation an executor writes out: property VFs cannot see a
    # slipped sum that became the answer.
    checks: list[str] = Field(default_factory=lambda: [ARITHMETIC])
    # How `answer_agreement` confirms an answer (`verimap.base.check_names.BALLOTS`).
    ballot: str = DEFAULT_BALLOT
    # Probe Python VFs with null and absurd outputs before a plan runs; drop those that pass both.
    vacuity_check: bool = True
    # Ask the judge even after a Python VF failed the attempt (the paper runs every VF).
    full_feedback: bool = False
    # One judge exchange for all of a node's natural-language VFs (the paper: one per VF).
    batch_judge: bool = True
    # The judge checks with the executor's tools, as a ReAct agent (the paper's verifier);
    # False: it reasons in one plain reply.
    judge_tools: bool = True
    # The final node's answer, when all its outputs are numbers, integers or booleans, must come
    # out the same in this many attempts that pass its VFs, the later ones sampled afresh at
    # `retry_temperature` (1: off, as the paper). Answers that never agree end the run
    # unverified, with the most frequent answer, and without a replan: the VFs passed. Off by
    # default: sampled attempts of a small model agree on wrong answers where its greedy first
    # attempt is right, and each vote costs a whole attempt.
    agreement: int = Field(default=1, ge=1)
    # The answer a run that never verified still reports (unverified): the final node's most
    # frequent answer over its attempts, first one on a tie (plurality), or its last (last).
    unverified_answer: Literal["plurality", "last"] = "plurality"

    @field_validator("checks")
    @classmethod
    def _known_checks(cls, v: list[str]) -> list[str]:
        unknown = [c for c in v if c not in BUILTIN_CHECKS]
        if unknown:
            raise ValueError(
                f"unknown check(s) {', '.join(map(repr, unknown))}; the built-in checks are: "
                f"{', '.join(BUILTIN_CHECKS)}"
            )
        return list(dict.fromkeys(v))

    @field_validator("ballot")
    @classmethod
    def _known_ballot(cls, v: str) -> str:
        return known_ballot(v)


class Planning(_Part):
    """What the planner is asked for, and how hard it may try."""

    # The planner works the task out in free text before it writes a plan (off: as the paper).
    plan_reasoning: bool = False
    # Times the planner is shown its plan's problems and asked again before the one-node fallback
    # plan runs. Local models get 0: a repair round costs minutes there and has not made a plan
    # valid (design/decisions.md, D01).
    plan_repairs: int = Field(default=3, ge=0)
    # The most nodes a plan may have (None: no cap, as the paper); a plan with more is invalid and
    # goes back to the planner (or, with no repairs left, to the one-node fallback). Local models
    # get 3: a small model's longer plans are seldom right.
    max_nodes: int | None = Field(default=None, ge=1)
    # A pool of demonstrations (`verimap export demos`) the staged planner shows beside the
    # shipped ones; an evaluation draw leaves out the tasks whose plans it holds. Read once,
    # when the run starts (`verimap.wiring.Settings.demo_pool`).
    demos_file: str | None = None


class Execution(_Part):
    """What an executor sees and how it works a node."""

    # Executors also see raw outputs of ancestors this many generations back (map uses 2).
    context_generations: int = Field(default=1, ge=1)
    # False: the paper's MAP hand-off. An executor answers in free text, and sees its ancestors'
    # instructions and replies as written (parents included, `context_generations` back) instead
    # of named, typed input values. Python VFs read named outputs, so they need it True.
    structured_io: bool = True
    executor_max_steps: int = Field(default=20, ge=1)
    # The calls the tools make for an executor before its first reply (`ToolRegistry.opening`:
    # a search for a QA node's request); False: it makes every call itself, as the paper.
    opening_calls: bool = True
    # A node whose one output is code alternates how it retries: the first retry repairs the
    # failed code, the next starts afresh, told what failed but not shown the code, and so on
    # (False: every retry repairs, as the paper). A small model anchors on its broken code; at
    # an equal number of attempts, fresh samples did as well as self-repair or better (Olausson
    # et al. 2023, "Is Self-Repair a Silver Bullet for Code Generation?").
    fresh_code_retries: bool = False


# The parts, by the name each has in a `RunConfig`.
PARTS: dict[str, type[_Part]] = {
    "loop": Loop,
    "sampling": Sampling,
    "verify": Verify,
    "planning": Planning,
    "execution": Execution,
}
# Settings that are not in a part.
WHOLE = ("budget", "policies")
# Each knob's part, by the knob's name (a knob's name is unique over the parts).
_PART_OF: dict[str, str] = {
    name: part for part, model in PARTS.items() for name in model.model_fields
}


def part_of(name: str) -> str | None:
    """The part knob `name` belongs in (`max_retries`: `loop`); None when no knob has it."""
    return _PART_OF.get(name)


def nest(knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Settings named by knob (`{"max_retries": 2}`) in their parts (`{"loop": {"max_retries":
    2}}`): for what names knobs one at a time, a command's flags or an old file. A key that is
    no knob (a part, `budget`, `policies`, or no setting at all) stays as it is."""
    out: dict[str, Any] = {}
    for key, value in knobs.items():
        part = part_of(key)
        if part is None:
            out[key] = value
        else:
            out.setdefault(part, {})[key] = value
    return out


def unknown_settings(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Each key of `data` (settings in their parts) that names no setting where it stands,
    quoted with `prefix` before it, and with where the knob belongs when it is one (a knob given
    outside its part), else the closest name when one is close."""
    out: list[str] = []
    for key, value in data.items():
        if key in PARTS:
            if isinstance(value, BaseModel):
                continue
            if isinstance(value, Mapping):
                out += [
                    _unknown(f"{prefix}{key}.{name}", str(name), prefix, key)
                    for name in value
                    if part_of(str(name)) != key
                ]
        elif key not in WHOLE:
            out.append(_unknown(f"{prefix}{key}", str(key), prefix, None))
    return out


def _unknown(written: str, name: str, prefix: str, part: str | None) -> str:
    """`written` quoted, with where knob `name` belongs, or the closest setting's name when one
    is close (in `part`, or anywhere when `part` is None: at the top)."""
    home = part_of(name)
    if home is not None:
        return f"{written!r} (it is {'' if part else 'now '}{prefix}{home}.{name})"
    names = list(PARTS[part].model_fields) if part else [*PARTS, *WHOLE, *_PART_OF]
    close = difflib.get_close_matches(name, names, n=1)
    if not close:
        return repr(written)
    match = close[0] if part or close[0] not in _PART_OF else f"{part_of(close[0])}.{close[0]}"
    return f"{written!r} (did you mean {match!r}?)"


def check_settings(data: Mapping[str, Any]) -> None:
    """A `ValueError` naming each key of `data` that is no setting (`unknown_settings`), and
    each part given as something other than a mapping of its knobs."""
    for key in PARTS:
        if key in data and not isinstance(data[key], Mapping | BaseModel):
            raise ValueError(f"{key!r} must be a mapping of its settings, not {data[key]!r}")
    unknown = unknown_settings(data)
    if unknown:
        raise ValueError(
            f"unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; the "
            f"settings are: {', '.join(PARTS)} (each a mapping of its knobs), {', '.join(WHOLE)}"
        )


def given(config: RunConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings the user set in `config`, in their parts: what the policies and the method
    presets fill around (a `RunConfig`'s unset knobs, or a mapping's absent keys). A mapping's
    names are checked (`check_settings`), its values are not: that is for the whole config."""
    if isinstance(config, RunConfig):
        return config.model_dump(exclude_unset=True)
    data = dict(config or {})
    check_settings(data)
    for key in PARTS:
        value = data.get(key)
        if isinstance(value, BaseModel):
            data[key] = value.model_dump(exclude_unset=True)
        elif value is not None:
            data[key] = dict(value)
    return data


def merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Settings in their parts laid over each other: a later layer's knob wins over an earlier
    one's and leaves the rest of its part; `budget` and `policies` are taken whole."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if key in PARTS:
                out[key] = {**out.get(key, {}), **value}
            else:
                out[key] = value
    return out


class RunConfig(BaseModel):
    """A run's knobs, by what they steer (see the module's docstring); each part's
    `model_fields_set` is what the user set in it."""

    model_config = ConfigDict(extra="forbid")

    loop: Loop = Field(default_factory=Loop)
    sampling: Sampling = Field(default_factory=Sampling)
    verify: Verify = Field(default_factory=Verify)
    planning: Planning = Field(default_factory=Planning)
    execution: Execution = Field(default_factory=Execution)
    budget: Budget = Field(default_factory=Budget)
    # The names of the policies the run follows (bundles of rules beyond the core loop, applied
    # by `verimap.build`, which fills what is left unset here). None: the endpoint decides.
    policies: list[str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _known_settings(cls, data: Any) -> Any:
        """A key that is no setting, a knob outside its part above all, is an error that says
        where the knob belongs: config files and `-S config=...` come from outside, and a
        misspelled knob must not pass as its default."""
        if isinstance(data, Mapping):
            check_settings(data)
        return data

    @model_validator(mode="after")
    def _vfs_need_named_outputs(self) -> RunConfig:
        if not self.execution.structured_io and self.verify.verification == "full":
            raise ValueError(
                "execution.structured_io=False leaves no named outputs for the plan's Python VFs "
                "to read; use verify.verification 'instruction' or 'none' with it"
            )
        return self
