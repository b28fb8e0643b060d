"""How a run ends: its `RunResult` from what the run knows, whether its answer is verified and
why not, and the two ends beyond the paper's (answers that passed their VFs but never agreed,
and a replanner that hands back work that already failed too often)."""

from __future__ import annotations

from typing import Any

from verimap.config import RunConfig
from verimap.core.node_context import best_unverified
from verimap.core.result import ErrorKind, RunResult, RunStatus
from verimap.core.run_state import RunState
from verimap.planning.failure import FailureContext
from verimap.planning.plan import Plan
from verimap.planning.plan_checks import node_work


def result(st: RunState, config: RunConfig, status: RunStatus, *, final: str | None = None,
           final_output: dict | None = None, error: str | None = None,
           error_kind: ErrorKind | None = None) -> RunResult:  # fmt: skip
    """The run's result; with no answer of its own, the best unverified one so far (an answer
    is never lost)."""
    why = why_unverified(st, config, status, final)
    if final_output is None and st.plans:
        final_output = st.best or best_unverified(
            st.plans[-1], st.reports, st.iteration, config.verify.unverified_answer
        )
    return RunResult(
        run_id=st.run_id, task=st.task, status=status, final_node=final, final_output=final_output,
        nodes=st.reports, iterations=st.iteration, retries=st.retries, plans=list(st.plans), error=error,
        verified=why is None, unverified_reason=why, fallback_iterations=list(st.fallbacks),
        plan_rules=list(st.rules),
        dropped_vfs=list(st.dropped), error_kind=error_kind,
    )  # fmt: skip


def why_unverified(
    st: RunState, config: RunConfig, status: RunStatus, final: str | None
) -> str | None:
    """None when the run's answer is verified: every node passed, and the final one on
    evidence (a strong check passed); else why not."""
    if config.verify.verification == "none":
        return "the method runs no verification"
    if status != "success" or final is None:
        return f"the run ended {status}"
    rep = st.reports.get(final)
    return rep.unconfirmed if rep is not None else "the final node did not run"


def unconfirmed(
    st: RunState, config: RunConfig, plan: Plan, failure: FailureContext, statuses: dict[str, Any]
) -> RunResult | None:
    """The run's end when the failed node passed its VFs but its answers were never confirmed:
    a replan would not help, so the answer most solutions gave is kept, unverified."""
    if statuses.get(failure.node_id) != "unconfirmed":
        return None
    disputes = sorted(set(st.disputes))
    agreement, retries = config.verify.agreement, config.loop.max_retries
    why = (
        f"{' and '.join(disputes)} did not confirm any of its answers"
        if disputes
        else f"its answers did not agree {agreement} times in {retries + agreement - 1} attempts"
    )
    rep = st.reports[failure.node_id]
    kept = "the answer most solutions gave is kept, unverified"
    if rep.unconfirmed:
        kept = f"{kept} ({rep.unconfirmed})"
    return result(
        st, config, "failed", final=plan.final_node().id, final_output=rep.outputs,
        error=f"node {failure.node_id!r} passed its VFs, but {why}; {kept}",
    )  # fmt: skip


def repeats_failed_work(
    st: RunState, config: RunConfig, plan: Plan, node_id: str
) -> RunResult | None:
    """The run's end when the replanner hands back work that already failed more often than
    `max_plan_repeats` allows: under greedy decoding the executor then repeats its failed
    answers word for word, and every further iteration costs a plan and a node's retries."""
    limit, work = config.loop.max_plan_repeats, node_work(plan, node_id)
    if limit is None or work is None or (runs := st.failed_work[work]) <= limit:
        return None
    st.iteration -= 1  # the returned plan does not run
    return result(
        st, config, "failed", final=plan.final_node().id,
        error=f"node {node_id!r} failed verification; the replanner returned its work "
        f"unchanged after {runs} failed runs, so the run stopped (max_plan_repeats={limit})",
    )  # fmt: skip
