"""verimap inside Inspect AI: a solver that runs a verimap method on a sample, and a scorer of
verified answers (extra `inspect`; docs/inspect.md).

    inspect eval inspect_evals/gsm8k --model openai/gpt-4o-mini \\
        --solver verimap/verimap_solver -S domain=math
    inspect score logs/<the log>.eval --scorer verimap/verified --action append

`verimap_solver` runs any method of `verimap.methods.presets.METHODS` (baselines included) on
`state.input_text`. Its roles' models are Inspect models, called through the adapter of
`inspect_model`: a role's argument (a model name, an Inspect `Model`, or a verimap `Model`),
else Inspect's model role of the same name (`--model-role planner=...`), else the eval's model
(for the judge: the executor's). A role left with none (no `--model`) gets the model
`verimap run` would use: the endpoint of OPENAI_BASE_URL/OPENAI_API_KEY, else verimap's local
llama.cpp model with its small-model policy (`verimap.policies`), served to
Inspect too (`inspect_served`). So every model call is an Inspect model event, and the run's
plan, nodes and verdicts are info events and spans (`inspect_events`).

The answer becomes `state.output.completion` in the form the task's scorer reads
(`completions`), and the run's summary is `state.metadata["verimap"]`, which the `verified`
scorer reports on beside the task's own scorer. A run that fails on infrastructure (a model
endpoint past its retries, the sandbox) errors the sample rather than scoring it, as a failed
`generate()` would. Python VFs run in verimap's sandbox (`sandbox`), not in the task's.

Importing this module registers the solver, the scorer and the `verimap/` model API with
Inspect; the `inspect_ai` entry point of verimap's package metadata imports it, so Inspect
finds `verimap/verimap_solver` and `verimap/verified` by name.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from verimap.base.events import EventBus
from verimap.base.model import ModelError
from verimap.base.out_files import file_name
from verimap.base.protocols import Model, Sandbox
from verimap.base.redaction import redact
from verimap.base.usage import EXECUTOR, JUDGE, PLANNER, ROLES
from verimap.config import RunConfig
from verimap.core.result import RunResult
from verimap.integrations import missing_extra
from verimap.integrations.completions import completion
from verimap.integrations.inspect_events import TranscriptRecorder
from verimap.integrations.inspect_model import InspectModel
from verimap.integrations.inspect_served import serve
from verimap.integrations.shared_models import shared_models
from verimap.tools.registry import ToolRegistry

try:
    from inspect_ai.model import ChatMessageAssistant, ModelOutput, get_model, model_roles
    from inspect_ai.model import Model as InspectModelType
    from inspect_ai.scorer import (
        CORRECT,
        INCORRECT,
        Metric,
        SampleScore,
        Score,
        Scorer,
        Target,
        metric,
        scorer,
        value_to_float,
    )
    from inspect_ai.solver import Generate, Solver, TaskState, solver
    from inspect_ai.util import span
except ModuleNotFoundError as e:
    raise missing_extra(e, "inspect_ai", "inspect") from None

__all__ = ["InspectModel", "serve", "verified", "verified_share", "verimap_solver"]

RoleModel = str | InspectModelType | Model | None
METADATA_KEY = "verimap"


@solver
def verimap_solver(
    method: str = "verimap",
    *,
    planner: RoleModel = None,
    executor: RoleModel = None,
    judge: RoleModel = None,
    sandbox: str | Sandbox = "auto",
    config: RunConfig | Mapping[str, Any] | None = None,
    domain: str | None = "auto",
    samples: int | None = None,
    trace_dir: str | None = None,
) -> Solver:
    """Run verimap's `method` on the sample (see the module docstring).

    Args:
      method: one of `verimap.methods.presets.METHODS`: verimap, map-v, map, react, the -1it
        variants, or the baselines bare, sc and program.
      planner, executor, judge: a role's model: a model name (`openai/gpt-4.1`), an Inspect
        `Model`, or a verimap `Model`; None: Inspect's model role of that name, else the eval's.
      sandbox: where Python VFs and tools run: `auto` (Docker when a daemon answers, else the
        process backend), `docker`, `process`, or a verimap `Sandbox`.
      config: `RunConfig` settings, in their parts (a dict from `-S config=...`:
        `{"loop": {"max_retries": 2}}`), over the method's preset.
      domain: `math` (a numeric answer), `programming` (code), `qa`, None (as `verimap run`),
        or `auto`: `programming` for a sample whose metadata names an `entry_point`
        (HumanEval), else None.
      samples: the `sc` baseline's number of samples.
      trace_dir: also write each run's verimap trace there (`<sample id>-<epoch>.jsonl`), for
        `verimap view`.
    """
    from verimap.methods.presets import get_method
    from verimap.wiring import resolve

    # An unknown method or a bad config fails when the eval starts, not in every sample; the
    # demonstrations file is read then, once, and every sample's planner is shown that pool.
    get_method(method)
    demos = resolve(config, method=method).demo_pool()
    roles = {PLANNER: planner, EXECUTOR: executor, JUDGE: judge}

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        from verimap.wiring import build

        entry = state.metadata.get("entry_point")
        kind = ("programming" if entry else None) if domain == "auto" else domain
        trace = trace_file(trace_dir, state.sample_id, state.epoch) if trace_dir else None
        async with span(f"verimap {method}", type="verimap"):
            recorder = TranscriptRecorder()
            events = EventBus()
            events.subscribe(recorder)
            try:
                async with _role_models(roles, recorder) as (models, local):
                    box = _sandbox(sandbox)
                    runner = build(
                        dict(models),
                        box,
                        _tools(kind, box),
                        config,
                        method=method,
                        domain=kind,
                        samples=samples,
                        local=local,
                        events=events,
                        demos=demos,
                    )
                    result: RunResult = await runner.run(state.input_text, trace_path=trace)
                    await events.drain()
            finally:
                recorder.close()
        state.metadata[METADATA_KEY] = summary(result, method)
        for m in models.values():
            if m.limit_error is not None:
                raise m.limit_error
        if result.error_kind == "infrastructure":
            raise ModelError(f"verimap run failed on infrastructure: {result.error}")
        text = completion(result.answer, kind, entry if isinstance(entry, str) else None)
        name = models[EXECUTOR].name
        state.output = ModelOutput.from_content(model=name, content=text)
        state.messages.append(ChatMessageAssistant(content=text, model=name, source="generate"))
        return state

    return solve


@contextlib.asynccontextmanager
async def _role_models(
    given: dict[str, RoleModel], recorder: TranscriptRecorder
) -> AsyncIterator[tuple[dict[str, InspectModel], bool]]:
    """Each role's model as an adapter, and whether verimap's local model serves one of them."""
    local = any(getattr(given[role], "local", False) is True for role in ROLES)
    chosen = {role: _inspect_model(role, given[role]) for role in (PLANNER, EXECUTOR)}
    if given[JUDGE] is None and JUDGE not in model_roles() and chosen[EXECUTOR] is not None:
        chosen[JUDGE] = get_model(role=JUDGE, default=chosen[EXECUTOR])  # as `verimap.build`
    else:
        chosen[JUDGE] = _inspect_model(JUDGE, given[JUDGE])
    missing = [role for role in ROLES if chosen[role] is None]
    async with contextlib.AsyncExitStack() as stack:
        if missing:
            own = await stack.enter_async_context(shared_models().use())
            served: dict[int, InspectModelType] = {}
            for role in missing:
                m = own[role]
                served.setdefault(id(m), serve(m))
                chosen[role] = get_model(role=role, default=served[id(m)])
                local = local or bool(getattr(m, "local", False))
        yield (
            {r: InspectModel(m, span_for=recorder.span_for) for r, m in chosen.items() if m},
            local,
        )


def _inspect_model(role: str, spec: RoleModel) -> InspectModelType | None:
    """A role's Inspect model (labelled with the role for its model events), None when the eval
    has no model for it (`--model none`, or none given)."""
    bound = role in model_roles()
    if spec is None:
        if bound:
            return get_model(role=role)
        try:
            spec = get_model()
        except ValueError:
            return None
        if str(spec) == "none/none":
            return None
    elif isinstance(spec, str):
        spec = get_model(spec)
    elif not isinstance(spec, InspectModelType):
        spec = serve(spec)
    # A given model wins over a role binding, and then keeps no role label.
    return spec if bound else get_model(role=role, default=spec)


def trace_file(trace_dir: str | os.PathLike[str], sample_id: object, epoch: int) -> Path:
    """Where a sample's trace goes: `<sample id>-<epoch>.jsonl` directly in `trace_dir`. An id
    is data, so it becomes one safe file name (`out_files.file_name`: no separator, no `..`,
    no control character), with a digest of the id when that changed it, so two ids never
    share a file."""
    raw = str(sample_id)
    name = file_name(raw)
    if name != raw:
        name += "-" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return Path(trace_dir) / f"{name}-{epoch}.jsonl"


def _sandbox(kind: str | Sandbox) -> Sandbox:
    if isinstance(kind, Sandbox):
        return kind
    from verimap.sandbox import get_sandbox

    return get_sandbox(kind)


def _tools(domain: str | None, sandbox: Sandbox) -> ToolRegistry:
    """The executor's tools for the domain, as `verimap eval` gives them (QA's search tool needs
    verimap's corpus index, so an Inspect QA task gets the default tools)."""
    from verimap.evals.tools import math_tools, programming_tools
    from verimap.tools.registry import default_tools

    if domain == "math":
        return math_tools(sandbox)
    if domain == "programming":
        return programming_tools(sandbox)
    return default_tools(sandbox)


def summary(result: RunResult, method: str) -> dict[str, Any]:
    """What a sample keeps of its run: JSON, for the log, secrets masked."""
    from pydantic_core import to_jsonable_python

    kept = {
        "method": method,
        "status": result.status,
        "verified": result.verified,
        "unverified_reason": result.unverified_reason,
        "answer": to_jsonable_python(result.answer, fallback=str),
        "error": result.error,
        "iterations": result.iterations,
        "retries": result.retries,
        "usage": {role: u.model_dump() for role, u in result.usage.roles.items()},
        "wall_time_s": round(result.wall_time_s, 3),
    }
    return dict(redact(kept))


@metric
def verified_share() -> Metric:
    """The share of scored samples whose answer verimap verified."""
    to_float = value_to_float()

    def compute(scores: list[SampleScore]) -> float:
        values = [to_float(s.score.value) for s in scores]
        return sum(values) / len(values) if values else 0.0

    return compute


@scorer(metrics=[verified_share()])
def verified() -> Scorer:
    """C when verimap verified the sample's answer, I otherwise, with the reason it did not as
    the explanation. It says nothing of correctness: use it beside the task's own scorer."""

    async def score(state: TaskState, target: Target) -> Score:
        run = state.metadata.get(METADATA_KEY)
        if not isinstance(run, dict):
            return Score(value=INCORRECT, explanation="no verimap run on this sample")
        why = run.get("unverified_reason") or run.get("error") or f"status {run.get('status')}"
        return Score(
            value=CORRECT if run.get("verified") else INCORRECT,
            answer=state.output.completion,
            explanation="verified" if run.get("verified") else why,
            metadata={"status": run.get("status"), "method": run.get("method")},
        )

    return score
