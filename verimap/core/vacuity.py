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
from verimap.config import RunConfig
from verimap.core.protocols import Verifier
from verimap.core.run_state import RunState
from verimap.planning.plan import Plan, PlanError
from verimap.planning.planner import Planner, PlanningError

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
    st: RunState, plan: Plan, config: RunConfig, planner: Planner, verifier: Verifier
) -> Plan:
    """Record a fallback plan; find Python VFs that pass on null and on absurd outputs (they
    check nothing), send them back to the planner once, then drop those still vacuous."""
    st.dropped.extend(f"{st.iteration}:{d}" for d in plan.dropped_vfs)
    if plan.rule is not None:
        st.rules.append(f"{st.iteration}: {plan.rule}")
        st.emit(ev.PlanRule(rule=plan.rule))
        return plan  # its VFs are built in: nothing to probe or repair
    if plan.fallback_reason is not None:
        st.fallbacks.append(st.iteration)
        st.emit(ev.PlanFallback(reason=plan.fallback_reason))
        return plan
    if config.verify.verification != "full" or not config.verify.vacuity_check:
        return plan
    repair = getattr(planner, "repair", None)
    if repair is not None:
        repair = partial(repair, st.task, ctx=st.step())
    plan, dropped = await without_vacuous_vfs(plan, st.task, verifier, repair)
    for nid, name in dropped:
        st.dropped.append(f"{st.iteration}:{nid}.{name} (vacuous)")
        st.emit(ev.VfVacuous(vf=name), nid)
    return plan
