"""`verimap.build`: a coordinator wired from models, with the paper's components and the
policies the run follows (the small-model policy on the local model, as the CLI applies it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from verimap.base.events import EventBus
from verimap.base.protocols import Model, Sandbox
from verimap.config import RunConfig
from verimap.core.coordinator import Coordinator
from verimap.core.executor import EXECUTOR_SETTINGS, Executor
from verimap.core.verifier import Verifier
from verimap.planning.planner import PLANNER_SETTINGS, LLMPlanner, Planner
from verimap.policies import Policy, apply, for_models, get_policies, planner_options, wrap_models
from verimap.tools.registry import ToolRegistry, default_tools


def build(
    models: Mapping[str, Model],
    sandbox: Sandbox | None = None,
    tools: ToolRegistry | None = None,
    config: RunConfig | None = None,
    demo: str | None = None,
    planner: Planner | None = None,
    *,
    threshold: float | None = None,
    events: EventBus | None = None,
    trace_dir: str | Path | None = None,
) -> Coordinator:
    """Wire a coordinator from models keyed planner/executor/judge (judge defaults to executor).

    `tools` defaults to `calculator` plus `python` when a sandbox is given. A `config` that
    names no policies gets the endpoint's (`verimap.policies.for_models`).
    """
    config, policies, models = with_policies(config or RunConfig(), models)
    if "executor" not in models:
        raise ValueError("build() needs an 'executor' model")
    if planner is None and "planner" not in models:
        raise ValueError("build() needs a 'planner' model or a planner")
    tools = tools if tools is not None else default_tools(sandbox)
    planner = planner or LLMPlanner(
        models["planner"], tools, demo=demo,
        settings=PLANNER_SETTINGS.replace(temperature=config.sampling.temperature, seed=config.sampling.seed),
        write_vfs=config.verify.verification == "full", think_first=config.planning.plan_reasoning,
        max_repairs=config.planning.plan_repairs, max_nodes=config.planning.max_nodes, **planner_options(policies),
    )  # fmt: skip
    executor = Executor(
        models["executor"], tools, max_steps=config.execution.executor_max_steps,
        settings=EXECUTOR_SETTINGS.replace(
            temperature=config.sampling.temperature, top_p=config.sampling.top_p, seed=config.sampling.seed
        ),
        retry_temperature=config.sampling.retry_temperature,
        structured_io=config.execution.structured_io,
    )  # fmt: skip
    verifier = Verifier.from_config(
        sandbox, models.get("judge", models["executor"]), config, threshold, tools
    )
    return Coordinator(
        planner, executor, verifier, config, events, trace_dir=trace_dir,
        policies=[p.record() for p in policies],
    )  # fmt: skip


def with_policies(
    config: RunConfig, models: Mapping[str, Model]
) -> tuple[RunConfig, list[Policy], dict[str, Model]]:
    """`config` under its policies (the endpoint's when it names none), the policies, and the
    models wrapped as they say. Here, where a run is wired, and never in the core loop: the
    core knows no policy."""
    config = apply(config, for_models(models))
    policies = get_policies(config.policies)
    return config, policies, wrap_models(models, policies)
