"""What a run is doing right now, rebuilt from its events.

`LiveState` is a plain state machine: the coordinator's events go in, node statuses come out.
It knows nothing of terminals, so the statuses a test asserts are the ones the rich view
(`verimap.observe.live_view`) draws and the plain log tells. `TaskBoard` keeps one state per eval task
in flight. Model output reaches these lines (VF messages, executor errors), so every text goes
through `clean`, which strips escape sequences and control characters with the same
`redaction.printable` the final report uses: a reply must not drive the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from verimap.base import events as ev
from verimap.base.redaction import printable

# Node statuses beside the coordinator's own (verified, reused, failed, fail-accepted,
# unconfirmed, skipped): "retry" while a retry attempt runs, "stopped" for a node that was
# still running when the run ended (the budget ran out, an error).
PENDING, RUNNING, RETRY, SKIPPED, STOPPED = "pending", "running", "retry", "skipped", "stopped"
# A run's phase before its FINISH event; FINISH sets the run's final status instead.
STARTING, PLANNING, EXECUTING, REPLANNING = "starting", "planning", "running", "replanning"

VERDICT_CHARS = 160


def clean(text: Any, limit: int = VERDICT_CHARS) -> str:
    """One line of `text` without escape sequences or control characters, its runs of
    whitespace (newlines too) made one space, cut to `limit` characters."""
    line = " ".join(printable(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


@dataclass
class NodeView:
    id: str
    status: str = PENDING
    attempt: int = 0
    verdict: str = ""
    # Which attempt `verdict` is from and whether it passed: within one attempt the first
    # failing verdict says more than anything judged after it (passes, skipped judges).
    verdict_attempt: int = 0
    verdict_passed: bool = True

    @property
    def retries(self) -> int:
        return max(0, self.attempt - 1)

    @property
    def label(self) -> str:
        return f"retry {self.retries}" if self.status == RETRY else self.status


@dataclass
class LiveState:
    """One run's plan and node statuses as its events so far tell them."""

    run_id: str = ""
    task: str = ""
    iteration: int = 0
    phase: str = STARTING
    nodes: dict[str, NodeView] = field(default_factory=dict)
    # The last run-level happening: a rejected plan, a replan, the budget running out.
    note: str = ""
    retries: int = 0
    replans: int = 0
    started: float | None = None
    ended: float | None = None

    @property
    def finished(self) -> bool:
        return self.ended is not None

    def apply(self, event: ev.AnyEvent) -> None:
        """Advance by one event; events this view does not draw are ignored."""
        if event.iteration:
            self.iteration = event.iteration
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def node(self, node_id: str | None) -> NodeView:
        nid = node_id or "?"
        if nid not in self.nodes:  # an event for a node of no plan seen (a cut trace)
            self.nodes[nid] = NodeView(nid)
        return self.nodes[nid]

    def _end_iteration(self) -> None:
        for n in self.nodes.values():
            if n.status == PENDING:
                n.status = SKIPPED
            elif n.status in (RUNNING, RETRY):
                n.status = STOPPED


def _run_start(s: LiveState, e: ev.RunStart) -> None:
    s.run_id, s.started, s.phase = e.run_id, e.ts, PLANNING
    s.task = clean(e.task, 200)


def _plan_nodes(e: ev.Plan) -> list[dict[str, Any]]:
    """The plan's node objects (a plan is a JSON document: it is drawn, not validated)."""
    nodes = e.plan.get("nodes")
    return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []


def _plan(s: LiveState, e: ev.Plan) -> None:
    s.nodes = {str(n.get("id")): NodeView(str(n.get("id"))) for n in _plan_nodes(e)}
    s.phase = EXECUTING


def _plan_invalid(s: LiveState, e: ev.PlanInvalid) -> None:
    s.note = f"plan rejected ({len(e.problems)} problem(s)), asking for a fix"


def _plan_fallback(s: LiveState, e: ev.PlanFallback) -> None:
    s.note = "no valid plan: the task runs as one node (fallback)"


def _plan_rule(s: LiveState, e: ev.PlanRule) -> None:
    s.note = clean(e.rule, 200)


def _vf_vacuous(s: LiveState, e: ev.VfVacuous) -> None:
    s.note = clean(f"{e.node_id}: VF {e.vf} dropped, it passes on any output", 200)


def _plan_kept(s: LiveState, e: ev.PlanKept) -> None:
    s._end_iteration()
    s.phase = EXECUTING
    s.note = f"plan kept: node {e.failed_node!r} gave no typed answer"


def _node_start(s: LiveState, e: ev.NodeStart) -> None:
    n = s.node(e.node_id)
    n.status, n.attempt, n.verdict = RUNNING, 0, ""


def _node_reused(s: LiveState, e: ev.NodeReused) -> None:
    n = s.node(e.node_id)
    n.status, n.verdict = "reused", "verified before, unchanged"


def _attempt(s: LiveState, e: ev.Attempt) -> None:
    n = s.node(e.node_id)
    n.attempt = e.attempt or n.attempt + 1
    n.status = RETRY if n.attempt > 1 else RUNNING


def _retry(s: LiveState, e: ev.Retry) -> None:
    n = s.node(e.node_id)
    n.attempt, n.status = e.attempt or n.attempt + 1, RETRY
    s.retries += 1


def _vf_verdict(s: LiveState, e: ev.VfVerdict) -> None:
    n, attempt, passed = s.node(e.node_id), e.attempt or 0, e.outcome == "PASS"
    if attempt == n.verdict_attempt and not n.verdict_passed:
        return
    why = e.message or e.explanation
    n.verdict = clean(f"#{attempt} {e.name} {e.outcome}" + (f": {why}" if why else ""))
    n.verdict_attempt, n.verdict_passed = attempt, passed


def _attempt_result(s: LiveState, e: ev.AttemptResult) -> None:
    if e.error:
        n = s.node(e.node_id)
        n.verdict = clean(f"#{e.attempt} error: {e.error}")
        n.verdict_attempt, n.verdict_passed = e.attempt or 0, False


def _agreement(s: LiveState, e: ev.Agreement) -> None:
    got, needed = len(e.answers), e.needed
    s.node(e.node_id).verdict = f"#{e.attempt} passed; agreement {got}/{needed}, sampling again"


def _node_finish(s: LiveState, e: ev.NodeFinish) -> None:
    s.node(e.node_id).status = e.status


def _replan(s: LiveState, e: ev.Replan) -> None:
    s._end_iteration()
    s.phase, s.replans = REPLANNING, s.replans + 1
    s.note = f"replanned after node {e.failed_node!r} failed"


def _budget(s: LiveState, e: ev.BudgetExhausted) -> None:
    s.note = clean(f"budget exhausted: {e.error}")


def _error(s: LiveState, e: ev.Error) -> None:
    s.note = clean(f"error: {e.error}")


def _finish(s: LiveState, e: ev.Finish) -> None:
    s._end_iteration()
    s.phase, s.ended = e.status, e.ts
    if e.error:
        s.note = clean(e.error, 200)


# Each typed event this view draws, with its handler (called with that class's events only).
_HANDLERS: dict[type[ev.AnyEvent], Callable[[LiveState, Any], None]] = {
    ev.RunStart: _run_start,
    ev.Plan: _plan,
    ev.PlanInvalid: _plan_invalid,
    ev.PlanFallback: _plan_fallback,
    ev.PlanRule: _plan_rule,
    ev.VfVacuous: _vf_vacuous,
    ev.PlanKept: _plan_kept,
    ev.NodeStart: _node_start,
    ev.NodeReused: _node_reused,
    ev.Attempt: _attempt,
    ev.Retry: _retry,
    ev.VfVerdict: _vf_verdict,
    ev.AttemptResult: _attempt_result,
    ev.Agreement: _agreement,
    ev.NodeFinish: _node_finish,
    ev.Replan: _replan,
    ev.BudgetExhausted: _budget,
    ev.Error: _error,
    ev.Finish: _finish,
}


class TaskBoard:
    """The eval tasks in flight, each with its `LiveState`, in the order they started."""

    def __init__(self) -> None:
        self.tasks: dict[str, LiveState] = {}

    def start(self, key: str) -> LiveState:
        return self.tasks.setdefault(key, LiveState())

    def apply(self, key: str, event: ev.AnyEvent) -> None:
        self.start(key).apply(event)

    def done(self, key: str) -> None:
        self.tasks.pop(key, None)

    def shown(self, limit: int) -> tuple[list[tuple[str, LiveState]], int]:
        """The `limit` most recently started tasks, oldest first, and how many are left out."""
        items = list(self.tasks.items())
        return items[-limit:] if limit > 0 else [], max(0, len(items) - limit)


def plain_line(e: ev.AnyEvent) -> str | None:
    """The plain-log line of one event, or None for events the log leaves out."""
    where = f"[it {e.iteration}] " if e.iteration else ""
    node = clean(e.node_id, 60)
    match e:
        case ev.Plan():
            nodes = _plan_nodes(e)
            ids = ", ".join(clean(n.get("id"), 40) for n in nodes)
            return f"{where}plan: {len(nodes)} node(s): {ids}"
        case ev.PlanInvalid():
            probs = clean("; ".join(e.problems), 200)
            return f"{where}plan rejected ({len(e.problems)} problem(s)), asking for a fix: {probs}"
        case ev.NodeStart():
            return f"{where}{node}: start"
        case ev.NodeReused():
            return f"{where}{node}: reused (verified before, unchanged)"
        case ev.Retry():
            return f"{where}{node}: retry {(e.attempt or 2) - 1}"
        case ev.RetriesStopped():
            return f"{where}{node}: no more retries: {clean(e.reason, 160)}"
        case ev.VfVerdict():
            msg = f" - {clean(e.message, 120)}" if e.message else ""
            return f"{where}{node} #{e.attempt}: vf {clean(e.name, 60)} {e.outcome}{msg}"
        case ev.AttemptResult() if e.error:
            return f"{where}{node} #{e.attempt}: {clean(e.error)}"
        case ev.NodeFinish():
            return f"{where}{node}: {e.status}"
        case ev.Replan():
            return f"{where}replanning after node {e.failed_node!r} failed"
        case ev.PlanKept():
            return f"{where}plan kept: node {e.failed_node!r} gave no typed answer"
        case ev.PlanFallback():
            return f"{where}no valid plan: running the task as one node (fallback)"
        case ev.PlanRule():
            return f"{where}{clean(e.rule, 120)}"
        case ev.VfVacuous():
            return f"{where}{node}: vf {clean(e.vf, 60)} dropped: it passes on any output"
        case ev.BudgetExhausted():
            return f"{where}budget exhausted: {clean(e.error)}"
        case ev.CrossCheck():
            said = clean(e.answer if e.answer is not None else e.error, 120)
            return f"{where}{node} #{e.attempt}: independent {e.kind}: {said}"
    return None


class PlainLog:
    """An event subscriber writing one plain line per step: for pipes, CI logs and dumb
    terminals, where a redrawn display would be a mess of escape codes."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def __call__(self, event: ev.AnyEvent) -> None:
        line = plain_line(event)
        if line is None:
            return
        out = self.stream or sys.stderr  # looked up per line: click's runner swaps sys.stderr
        out.write(line + "\n")
        out.flush()
