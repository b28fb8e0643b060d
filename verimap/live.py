"""What a run is doing right now, rebuilt from its events.

`LiveState` is a plain state machine: the coordinator's events go in, node statuses come out.
It knows nothing of terminals, so the statuses a test asserts are the ones the rich view
(`verimap.live_view`) draws and the plain log tells. `TaskBoard` keeps one state per eval task
in flight. Model output reaches these lines (VF messages, executor errors), so every text goes
through `clean`, which strips escape sequences and control characters with the same
`redaction.printable` the final report uses: a reply must not drive the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from verimap import events as ev
from verimap.events import Event
from verimap.redaction import printable

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

    def apply(self, event: Event) -> None:
        """Advance by one event; events this view does not draw are ignored."""
        if event.iteration:
            self.iteration = event.iteration
        handler = _HANDLERS.get(event.type)
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


def _run_start(s: LiveState, e: Event) -> None:
    s.run_id, s.started, s.phase = e.run_id, e.ts, PLANNING
    s.task = clean(e.data.get("task", ""), 200)


def _plan(s: LiveState, e: Event) -> None:
    nodes = (e.data.get("plan") or {}).get("nodes") or []
    s.nodes = {str(n.get("id")): NodeView(str(n.get("id"))) for n in nodes if isinstance(n, dict)}
    s.phase = EXECUTING


def _plan_invalid(s: LiveState, e: Event) -> None:
    s.note = f"plan rejected ({len(e.data.get('problems') or [])} problem(s)), asking for a fix"


def _plan_fallback(s: LiveState, e: Event) -> None:
    s.note = "no valid plan: the task runs as one node (fallback)"


def _vf_vacuous(s: LiveState, e: Event) -> None:
    s.note = clean(f"{e.node_id}: VF {e.data.get('vf')} dropped, it passes on any output", 200)


def _plan_kept(s: LiveState, e: Event) -> None:
    s._end_iteration()
    s.phase = EXECUTING
    s.note = f"plan kept: node {e.data.get('failed_node')!r} gave no typed answer"


def _node_start(s: LiveState, e: Event) -> None:
    n = s.node(e.node_id)
    n.status, n.attempt, n.verdict = RUNNING, 0, ""


def _node_reused(s: LiveState, e: Event) -> None:
    n = s.node(e.node_id)
    n.status, n.verdict = "reused", "verified before, unchanged"


def _attempt(s: LiveState, e: Event) -> None:
    n = s.node(e.node_id)
    n.attempt = e.attempt or n.attempt + 1
    n.status = RETRY if n.attempt > 1 else RUNNING


def _retry(s: LiveState, e: Event) -> None:
    n = s.node(e.node_id)
    n.attempt, n.status = e.attempt or n.attempt + 1, RETRY
    s.retries += 1


def _vf_verdict(s: LiveState, e: Event) -> None:
    d = e.data
    n, attempt, passed = s.node(e.node_id), e.attempt or 0, d.get("outcome") == "PASS"
    if attempt == n.verdict_attempt and not n.verdict_passed:
        return
    why = d.get("message") or d.get("explanation") or ""
    n.verdict = clean(
        f"#{attempt} {d.get('name')} {d.get('outcome')}" + (f": {why}" if why else "")
    )
    n.verdict_attempt, n.verdict_passed = attempt, passed


def _attempt_result(s: LiveState, e: Event) -> None:
    if e.data.get("error"):
        n = s.node(e.node_id)
        n.verdict = clean(f"#{e.attempt} error: {e.data['error']}")
        n.verdict_attempt, n.verdict_passed = e.attempt or 0, False


def _agreement(s: LiveState, e: Event) -> None:
    got, needed = len(e.data.get("answers") or []), e.data.get("needed")
    s.node(e.node_id).verdict = f"#{e.attempt} passed; agreement {got}/{needed}, sampling again"


def _node_finish(s: LiveState, e: Event) -> None:
    s.node(e.node_id).status = str(e.data.get("status", "failed"))


def _replan(s: LiveState, e: Event) -> None:
    s._end_iteration()
    s.phase, s.replans = REPLANNING, s.replans + 1
    s.note = f"replanned after node {e.data.get('failed_node')!r} failed"


def _budget(s: LiveState, e: Event) -> None:
    s.note = clean(f"budget exhausted: {e.data.get('error')}")


def _error(s: LiveState, e: Event) -> None:
    s.note = clean(f"error: {e.data.get('error')}")


def _finish(s: LiveState, e: Event) -> None:
    s._end_iteration()
    s.phase, s.ended = str(e.data.get("status", "finished")), e.ts
    if e.data.get("error"):
        s.note = clean(e.data["error"], 200)


_HANDLERS: dict[str, Callable[[LiveState, Event], None]] = {
    ev.RUN_START: _run_start,
    ev.PLAN: _plan,
    ev.PLAN_INVALID: _plan_invalid,
    ev.PLAN_FALLBACK: _plan_fallback,
    ev.VF_VACUOUS: _vf_vacuous,
    ev.PLAN_KEPT: _plan_kept,
    ev.NODE_START: _node_start,
    ev.NODE_REUSED: _node_reused,
    ev.ATTEMPT: _attempt,
    ev.RETRY: _retry,
    ev.VF_VERDICT: _vf_verdict,
    ev.ATTEMPT_RESULT: _attempt_result,
    ev.AGREEMENT: _agreement,
    ev.NODE_FINISH: _node_finish,
    ev.REPLAN: _replan,
    ev.BUDGET: _budget,
    ev.ERROR: _error,
    ev.FINISH: _finish,
}


class TaskBoard:
    """The eval tasks in flight, each with its `LiveState`, in the order they started."""

    def __init__(self) -> None:
        self.tasks: dict[str, LiveState] = {}

    def start(self, key: str) -> LiveState:
        return self.tasks.setdefault(key, LiveState())

    def apply(self, key: str, event: Event) -> None:
        self.start(key).apply(event)

    def done(self, key: str) -> None:
        self.tasks.pop(key, None)

    def shown(self, limit: int) -> tuple[list[tuple[str, LiveState]], int]:
        """The `limit` most recently started tasks, oldest first, and how many are left out."""
        items = list(self.tasks.items())
        return items[-limit:] if limit > 0 else [], max(0, len(items) - limit)


def plain_line(e: Event) -> str | None:
    """The plain-log line of one event, or None for events the log leaves out."""
    d = e.data
    where = f"[it {e.iteration}] " if e.iteration else ""
    node = clean(e.node_id, 60)
    if e.type == ev.PLAN:
        nodes = (d.get("plan") or {}).get("nodes") or []
        ids = ", ".join(clean(n.get("id"), 40) for n in nodes)
        return f"{where}plan: {len(nodes)} node(s): {ids}"
    if e.type == ev.PLAN_INVALID:
        probs = d.get("problems") or []
        return f"{where}plan rejected ({len(probs)} problem(s)), asking for a fix: {clean('; '.join(map(str, probs)), 200)}"
    if e.type == ev.NODE_START:
        return f"{where}{node}: start"
    if e.type == ev.NODE_REUSED:
        return f"{where}{node}: reused (verified before, unchanged)"
    if e.type == ev.RETRY:
        return f"{where}{node}: retry {(e.attempt or 2) - 1}"
    if e.type == ev.VF_VERDICT:
        msg = f" - {clean(d['message'], 120)}" if d.get("message") else ""
        return f"{where}{node} #{e.attempt}: vf {clean(d.get('name'), 60)} {d.get('outcome')}{msg}"
    if e.type == ev.ATTEMPT_RESULT and d.get("error"):
        return f"{where}{node} #{e.attempt}: {clean(d['error'])}"
    if e.type == ev.NODE_FINISH:
        return f"{where}{node}: {d.get('status')}"
    if e.type == ev.REPLAN:
        return f"{where}replanning after node {d.get('failed_node')!r} failed"
    if e.type == ev.PLAN_KEPT:
        return f"{where}plan kept: node {d.get('failed_node')!r} gave no typed answer"
    if e.type == ev.PLAN_FALLBACK:
        return f"{where}no valid plan: running the task as one node (fallback)"
    if e.type == ev.VF_VACUOUS:
        return f"{where}{node}: vf {clean(d.get('vf'), 60)} dropped: it passes on any output"
    if e.type == ev.BUDGET:
        return f"{where}budget exhausted: {clean(d.get('error'))}"
    if e.type == ev.CROSS_CHECK:
        said = clean(d.get("answer") if d.get("answer") is not None else d.get("error"), 120)
        return f"{where}{node} #{e.attempt}: independent {d.get('kind', 'reply')}: {said}"
    return None


class PlainLog:
    """An event subscriber writing one plain line per step: for pipes, CI logs and dumb
    terminals, where a redrawn display would be a mess of escape codes."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def __call__(self, event: Event) -> None:
        line = plain_line(event)
        if line is None:
            return
        out = self.stream or sys.stderr  # looked up per line: click's runner swaps sys.stderr
        out.write(line + "\n")
        out.flush()
