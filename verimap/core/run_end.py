"""How a run ends: the answer it keeps (the plurality of the answers given), whether that is
verified and why not, and the two ends beyond the paper's (answers that passed their VFs but
never agreed, and a replanner that hands back work that already failed too often). Pure
functions of what the run knows; the coordinator builds the `RunResult` from them, and a node's
attempts pick their answer by the same plurality."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from verimap.base.plan import PlanShape
from verimap.config import RunConfig
from verimap.core.node_context import DONE
from verimap.core.result import NodeReport, RunStatus


def why_unverified(
    config: RunConfig, status: RunStatus, final: str | None, reports: Mapping[str, NodeReport]
) -> str | None:
    """None when the run's answer is verified: every node passed, and the final one on
    evidence (a strong check passed); else why not."""
    if config.verify.verification == "none":
        return "the method runs no verification"
    if status != "success" or final is None:
        return f"the run ended {status}"
    rep = reports.get(final)
    return rep.unconfirmed if rep is not None else "the final node did not run"


def unconfirmed_error(
    config: RunConfig, node_id: str, report: NodeReport, disputes: list[str]
) -> str:
    """Why the run ends when the failed node passed its VFs but its answers were never
    confirmed (`disputes`: the checks that disputed answers in this run): a replan would not
    help, so the answer most solutions gave is kept, unverified."""
    agreement, retries = config.verify.agreement, config.loop.max_retries
    why = (
        f"{' and '.join(sorted(set(disputes)))} did not confirm any of its answers"
        if disputes
        else f"its answers did not agree {agreement} times in {retries + agreement - 1} attempts"
    )
    kept = "the answer most solutions gave is kept, unverified"
    if report.unconfirmed:
        kept = f"{kept} ({report.unconfirmed})"
    return f"node {node_id!r} passed its VFs, but {why}; {kept}"


def repeated_work_error(config: RunConfig, node_id: str, runs: int) -> str | None:
    """Why the run ends when the replanner hands back the failed node's work after it failed
    `runs` times, more often than `max_plan_repeats` allows (None: it may run again): under
    greedy decoding the executor then repeats its failed answers word for word, and every
    further iteration costs a plan and a node's retries."""
    limit = config.loop.max_plan_repeats
    if limit is None or runs <= limit:
        return None
    return (
        f"node {node_id!r} failed verification; the replanner returned its work "
        f"unchanged after {runs} failed runs, so the run stopped (max_plan_repeats={limit})"
    )


def _canonical(value: Any) -> Any:
    """Equal answers compare equal: 84.0 is 84, whatever the container."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def plurality(answers: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
    """The answer given most often and how often; the earliest on a tie."""
    keys = [json.dumps(_canonical(a), sort_keys=True, default=str) for a in answers]
    counts = Counter(keys)
    top = max(counts.values())
    return dict(answers[next(i for i, k in enumerate(keys) if counts[k] == top)]), top


def best_unverified(
    shape: PlanShape, reports: Mapping[str, NodeReport], iteration: int, mode: str = "plurality"
) -> dict[str, Any] | None:
    """The final node's answer that most of its well-typed attempts gave (the first on a tie,
    so a greedy first attempt wins against scattered samples), or its last outputs (`mode`
    "last"); else the outputs of its deepest verified ancestor."""
    final = shape.final
    rep = reports.get(final)
    if rep is not None and rep.iteration == iteration and (rep.outputs or rep.attempts):
        # A node cut off mid-way (a budget) has attempts but no outputs yet: they still count.
        typed = [a for a in rep.attempts if a.outputs and a.error is None]
        if mode == "last":
            return dict(rep.outputs or (typed[-1].outputs if typed else None) or {}) or None
        answers = [a.outputs or {} for a in typed if a.passed] or [a.outputs or {} for a in typed]
        if answers:
            return plurality(answers)[0]
        return dict(rep.outputs) if rep.outputs else None
    for aid in reversed(shape.order):
        arep = reports.get(aid)
        if aid in shape.lineage[final] and arep and arep.status in DONE and arep.outputs:
            return dict(arep.outputs)
    return None
