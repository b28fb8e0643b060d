"""`verimap.build`: the one place a run's settings are resolved and its components wired.

A run's effective settings come from, in order: the paper's sampling defaults and the method's
adjustable knobs (a method run), the user's config, each policy's settings where the user left
a knob unset, and the knobs that define the method. `verimap.build`, `verimap run`,
`verimap eval` and the Inspect solver all resolve here, so the same inputs give the same run.
Resolving a resolved config again changes nothing. The core loop knows no policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, overload

from verimap.base.events import EventBus
from verimap.base.model import Model
from verimap.base.protocols import Sandbox
from verimap.base.roles import Planner
from verimap.config import RunConfig, given, merge
from verimap.core.coordinator import Coordinator
from verimap.core.executor import EXECUTOR_SETTINGS, Executor
from verimap.core.run_scope import Runner
from verimap.core.verifier import Verifier
from verimap.methods.presets import (
    PAPER_DEFAULTS,
    PLAN_ANSWER_TYPES,
    REACT_INSTRUCTION,
    Method,
    get_method,
)
from verimap.planning.demos import DemoFileError, DemoPool, read_pool
from verimap.planning.planner import PLANNER_SETTINGS, LLMPlanner, PlannerOptions, shown_pool
from verimap.policies import Policy, SmallModel, fill, get_policies
from verimap.tools.registry import ToolRegistry, default_tools


def default_policies(local: bool) -> list[str]:
    """The policies a run follows when its config names none: the small-model policy on the
    local model, none on an endpoint (its own defaults apply)."""
    return [SmallModel.name] if local else []


def runs_locally(models: Mapping[str, Any]) -> bool:
    """Whether the local model serves any role of `models`."""
    return any(getattr(m, "local", False) is True for m in models.values())


@dataclass(frozen=True)
class Settings:
    """A run's effective settings: its method (None: a plain `verimap.build` run), its config
    under its policies and method, and the policies (`config.policies` names them)."""

    method: Method | None
    config: RunConfig
    policies: tuple[Policy, ...]

    def policy_records(self) -> list[dict[str, Any]]:
        """What the run's first event says of its policies."""
        return [p.record() for p in self.policies]

    def planner_options(
        self, *, demo: str | None = None, domain: str | None = None
    ) -> PlannerOptions:
        """The `LLMPlanner`'s options: the config's planning knobs, then the policies' options
        (a later policy's winning)."""
        cfg = self.config
        options: dict[str, Any] = dict(
            demo=demo,
            domain=domain,
            answer_types=PLAN_ANSWER_TYPES.get(domain or "", ()),
            settings=PLANNER_SETTINGS.replace(
                temperature=cfg.sampling.temperature, seed=cfg.sampling.seed
            ),
            write_vfs=cfg.verify.verification == "full",
            think_first=cfg.planning.plan_reasoning,
            max_repairs=cfg.planning.plan_repairs,
            max_nodes=cfg.planning.max_nodes,
        )
        for policy in self.policies:
            options.update(policy.planner_options())
        return PlannerOptions.model_validate(options)

    def demo_pool(
        self, domain: str | None = None, given: DemoPool | None = None
    ) -> DemoPool | None:
        """The pool of demonstrations the run's planner shows beside the shipped ones: the one
        `planning.demos_file` names, read and validated here (`demos.read_pool`), or `given`,
        that pool as read when the run started, which is checked but never read again. A run
        calls this once, where it starts, and hands the pool on (`build(demos=...)`): a file
        changed after that changes nothing. None when the config names no file. A
        `DemoFileError` when the file cannot be read, or the run's planner would not show it:
        the method plans without a model, its planner writes the plan whole, or the pool is of
        another domain (`planner.shown_pool`); a `ValueError` for a pool given without a file."""
        path = self.config.planning.demos_file
        if path is None:
            if given is not None:
                raise ValueError(
                    f"a pool of demonstrations ({given.pool!r}) was given to a run whose config "
                    "names no demonstrations file (planning.demos_file)"
                )
            return None
        name = f"demonstrations file {path}"
        if self.method is not None and self.method.planner != "llm":
            raise DemoFileError(
                f"{name}: method {self.method.name!r} has no planner model to show it to"
            )
        pool = given if given is not None else read_pool(path)
        return shown_pool(pool, self.planner_options(domain=domain), name)

    def record(self, *, demo: str | None = None, domain: str | None = None) -> dict[str, Any]:
        """The settings as JSON: method, config, policies and planner options."""
        return {
            "method": self.method.name if self.method else None,
            "config": self.config.model_dump(mode="json"),
            "policies": self.policy_records(),
            "planner": self.planner_options(demo=demo, domain=domain).model_dump(mode="json"),
        }


def resolve(
    config: RunConfig | Mapping[str, Any] | None = None,
    *,
    method: str | Method | None = None,
    local: bool = False,
) -> Settings:
    """The effective settings of a run with `config` (see the module docstring). A config that
    names no policies gets `default_policies(local)`."""
    m = get_method(method) if isinstance(method, str) else method
    user = given(config)
    names = user.get("policies")
    if names is None:
        names = default_policies(local)
    policies = get_policies(names)
    user = fill(user, policies)
    if m is None:
        data = user
    else:
        for policy in policies:
            user = merge(policy.for_method(m.name), user)
        data = merge(PAPER_DEFAULTS, m.defaults, user, m.fixed)
    return Settings(m, RunConfig.model_validate(merge(data, {"policies": names})), tuple(policies))


def wrap_models(models: Mapping[str, Model], policies: tuple[Policy, ...]) -> dict[str, Model]:
    """Every role's model as the policies' runs call it."""
    out = dict(models)
    for policy in policies:
        out = {role: policy.wrap(m) for role, m in out.items()}
    return out


@overload
def build(
    models: Mapping[str, Model],
    sandbox: Sandbox | None = None,
    tools: ToolRegistry | None = None,
    config: RunConfig | Mapping[str, Any] | None = None,
    demo: str | None = None,
    planner: Planner | None = None,
    *,
    method: None = None,
    domain: str | None = None,
    samples: int | None = None,
    local: bool | None = None,
    threshold: float | None = None,
    events: EventBus | None = None,
    trace_dir: str | Path | None = None,
    demos: DemoPool | None = None,
) -> Coordinator: ...
@overload
def build(
    models: Mapping[str, Model],
    sandbox: Sandbox | None = None,
    tools: ToolRegistry | None = None,
    config: RunConfig | Mapping[str, Any] | None = None,
    demo: str | None = None,
    planner: Planner | None = None,
    *,
    method: str | Method | None,
    domain: str | None = None,
    samples: int | None = None,
    local: bool | None = None,
    threshold: float | None = None,
    events: EventBus | None = None,
    trace_dir: str | Path | None = None,
    demos: DemoPool | None = None,
) -> Runner: ...
def build(
    models: Mapping[str, Model],
    sandbox: Sandbox | None = None,
    tools: ToolRegistry | None = None,
    config: RunConfig | Mapping[str, Any] | None = None,
    demo: str | None = None,
    planner: Planner | None = None,
    *,
    method: str | Method | None = None,
    domain: str | None = None,
    samples: int | None = None,
    local: bool | None = None,
    threshold: float | None = None,
    events: EventBus | None = None,
    trace_dir: str | Path | None = None,
    demos: DemoPool | None = None,
) -> Runner:
    """A runner wired from models keyed planner/executor/judge (judge defaults to executor).

    Without a `method`: a coordinator with the paper's components (`planner` replaces the LLM
    planner). With one (`verimap.methods.presets.METHODS`): what runs a task with it, a
    coordinator or a baseline on the executor's model (`samples`: sc's k). `domain` (math,
    programming, qa) types the plan's answer. `tools` defaults to `calculator` plus `python`
    when a sandbox is given. A `config` that names no policies gets the default ones, for the
    local model when `local` says so (None: when any of `models` is local; `resolve`).
    `demos`: the pool of demonstrations `planning.demos_file` names, as read when the run
    started (an eval's, once for all its tasks); None reads the file here
    (`Settings.demo_pool`).
    """
    local = runs_locally(models) if local is None else local
    settings = resolve(config, method=method, local=local)
    m, cfg = settings.method, settings.config
    needed = ["executor"] + (
        ["planner"] if planner is None and (m is None or m.planner == "llm") else []
    )
    missing = [r for r in needed if r not in models]
    if missing:
        what = f"method {m.name!r}" if m else "build()"
        raise ValueError(f"{what} needs a model for role(s): {', '.join(missing)}")
    if m is not None and planner is not None:
        raise ValueError(f"method {m.name!r} has its own planner; pass no planner with it")
    if planner is not None and cfg.planning.demos_file is not None:
        raise DemoFileError(
            f"demonstrations file {cfg.planning.demos_file}: a planner given to build() "
            "shows no demonstrations file"
        )
    pool = settings.demo_pool(domain, demos)  # refused before anything is wired
    models = wrap_models(models, settings.policies)
    tools = tools if tools is not None else default_tools(sandbox)
    if m is not None and m.planner == "baseline":
        from verimap.methods.baselines import baseline

        return baseline(
            m.name,
            models,
            sandbox,
            domain=domain,
            config=cfg,
            events=events,
            samples=samples,
            trace_dir=trace_dir,
            policies=settings.policy_records(),
            tools=tools,
        )
    if m is not None and m.planner == "react":
        planner = _react_planner(domain)
    planner = planner or LLMPlanner(
        models["planner"], tools, settings.planner_options(demo=demo, domain=domain), pool
    )
    executor = Executor(
        models["executor"],
        tools,
        max_steps=cfg.execution.executor_max_steps,
        settings=EXECUTOR_SETTINGS.replace(
            temperature=cfg.sampling.temperature, top_p=cfg.sampling.top_p, seed=cfg.sampling.seed
        ),
        retry_temperature=cfg.sampling.retry_temperature,
        structured_io=cfg.execution.structured_io,
        opening_calls=cfg.execution.opening_calls,
    )
    verifier = Verifier.from_config(
        sandbox, models.get("judge", models["executor"]), cfg, threshold, tools
    )
    return Coordinator(
        planner,
        executor,
        verifier,
        cfg,
        events,
        trace_dir=trace_dir,
        policies=settings.policy_records(),
    )


def _react_planner(domain: str | None) -> Planner:
    """The single agent's one fixed node: on a benchmark, verimap's one-node plan without its
    VFs (so the two differ only in verification); elsewhere one untyped answer."""
    from verimap.planning.fallback import whole_task_plan
    from verimap.planning.fixed_planners import TemplatePlanner

    if domain is not None:
        return TemplatePlanner(partial(whole_task_plan, domain=domain, with_vfs=False))
    return TemplatePlanner.single_node(instruction=REACT_INSTRUCTION)
