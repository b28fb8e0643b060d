"""Python VFs that no answer can fail: found before a plan runs, sent back once, then dropped.

A VF that passes on null outputs of the declared types and on absurd ones checks nothing, yet
it counts as verification. Small models write them often (a bare comparison, a check of a
constant); the planner gets one chance to make each check something, and what is still
vacuous after that is dropped and recorded, never silently kept. `vet` is where every new plan
of a run passes before it runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from verimap.base import events as ev
from verimap.base.plan import Plan, PlanError, PlanningError
from verimap.base.roles import Planner, Verifier
from verimap.base.run_context import RunContext
from verimap.config import RunConfig

Repair = Callable[[Plan, list[str]], Awaitable[Plan]]


async def without_vacuous_vfs(
    plan: Plan, task: str, verifier: Verifier, repair: Repair | None
) -> tuple[Plan, list[tuple[str, str]]]:
    """The plan to run, and the (node, VF) pairs dropped from it as vacuous."""
    found = await verifier.vacuous_vfs(plan, task)
    if found and repair is not None:
        problems = [
            f"node {nid!r}: python VF {name!r} passes on empty outputs and on absurd ones, so it "
            "checks nothing; make it check what every correct answer must satisfy"
            for nid, name in found
        ]
        try:
            repaired: Plan | None = await repair(plan, problems)
        except (PlanningError, PlanError):
            repaired = None
        if repaired is not None and repaired.fallback_reason is None:
            plan, found = repaired, await verifier.vacuous_vfs(repaired, task)
    if not found:
        return plan, []
    drop: dict[str, set[str]] = {}
    for nid, name in found:
        drop.setdefault(nid, set()).add(name)
    plan = plan.model_copy(deep=True)
    for node in plan.nodes:
        if node.id in drop:
            node.verification = [v for v in node.verification if v.name not in drop[node.id]]
    return plan, found


async def vet(
    plan: Plan,
    task: str,
    config: RunConfig,
    planner: Planner,
    verifier: Verifier,
    ctx: RunContext,
) -> tuple[Plan, list[tuple[str, str]]]:
    """The plan to run and the (node, VF) pairs dropped from it as vacuous: Python VFs that pass
    on null and on absurd outputs (they check nothing) go back to the planner once, and those
    still vacuous are dropped, each reported through `ctx`. A plan made by a rule or a fallback
    is not probed; neither is one when the config runs no vacuity check."""
    if plan.rule is not None or plan.fallback_reason is not None:
        return plan, []  # a rule's VFs are built in; a fallback is run as it is
    if config.verify.verification != "full" or not config.verify.vacuity_check:
        return plan, []
    repair = getattr(planner, "repair", None)
    if repair is not None:
        repair = partial(repair, task, ctx=ctx)
    plan, dropped = await without_vacuous_vfs(plan, task, verifier, repair)
    for nid, name in dropped:
        ctx.for_attempt(nid, None).emit(ev.VfVacuous(vf=name))
    return plan, dropped
