"""A run's JSONL trace folded into iterations, nodes and attempts, ready to draw.

The trace is read leniently: the viewer must open a torn trace (a killed run), an
old one, or one whose plans never validated, and show what is there. A line that
is no event is skipped and noted as `file:line: reason`; an event is folded by
its typed fields, and one whose payload does not validate as its type (an older
verimap's, a hand-edited one) is shown as it was recorded (`trace_files.as_event`).
Plans are not validated, so a plan's every field is read for the kind it must be
and ignored when it is not. Every string is model output or derived from it, so
each is clipped to `max_chars` on the way in, and so is every container; the run
keeps at most so many of each list (see `verimap.view.model`) and folds events only
up to `RUN_BUDGET`. The HTML layer escapes what is left; this layer only bounds its
size.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from typing import Any

from verimap.base import events as ev
from verimap.observe.trace_files import (
    DEFAULT_MAX_CHARS,
    EVENT,
    as_event,
    clip_deep,
    clip_text,
    read_jsonl,
)
from verimap.view.model import (
    MAX_DIFF_LINES,
    MAX_ITERATIONS,
    MAX_PLAN_NODES,
    Attempt,
    Iteration,
    NodeRun,
    RunView,
    Shown,
    Verdict,
    pretty,
)

__all__ = [
    "Attempt",
    "Iteration",
    "NodeRun",
    "RunView",
    "Shown",
    "Verdict",
    "build_run",
    "load_run",
    "pretty",
    "run_from_plans",
]

# Events folded per run, in units of `EVENT_COST` plus one per comma of the event's line
# (about one per JSON node): a bound on the page however the trace is shaped.
RUN_BUDGET = 100_000
EVENT_COST = 10
MAX_EDGES = 2_000  # per plan
MAX_DIFF_INPUT = 1_500  # lines of either plan's JSON
_NODE_EVENTS = (
    ev.NodeStart,
    ev.NodeReused,
    ev.NodeFinish,
    ev.Attempt,
    ev.Retry,
    ev.VfVerdict,
    ev.AttemptResult,
    ev.RetriesStopped,
)


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _label(x: Any) -> str:
    """A value shown as a name: strings as they are, anything else as short JSON."""
    return x if isinstance(x, str) else clip_text(pretty(x), 200)


def _ref_source(ref: Any) -> str | None:
    if not isinstance(ref, str) or ref == "USER_TASK":
        return None
    ref = ref.strip().strip("<>")
    return ref.split(".", 1)[0] if "." in ref else None


def _edges(plan: dict[str, Any], ids: list[str]) -> list[tuple[str, str]]:
    """Declared edges plus the ones the inputs imply, as the plan model derives them."""
    known = set(ids)
    out: dict[tuple[str, str], None] = {}
    for e in _list(plan.get("edges")):
        if isinstance(e, dict):
            s, t = e.get("from", e.get("source")), e.get("to", e.get("target"))
        elif isinstance(e, list) and len(e) == 2:
            s, t = e
        else:
            continue
        if isinstance(s, str) and isinstance(t, str) and s in known and t in known:
            out[(s, t)] = None
    for n in _list(plan.get("nodes")):
        if not isinstance(n, dict) or not isinstance(n.get("id"), str):
            continue
        for ref in _list(n.get("inputs")):
            src = _ref_source(ref)
            if src in known:
                out[(src, n["id"])] = None
    return list(out)[:MAX_EDGES]


def _final_id(plan: dict[str, Any], ids: list[str], edges: list[tuple[str, str]]) -> str | None:
    flagged = [
        n.get("id") for n in _list(plan.get("nodes")) if isinstance(n, dict) and n.get("final")
    ]
    if len(flagged) == 1 and isinstance(flagged[0], str):
        return flagged[0]
    sources = {s for s, _ in edges}
    sinks = [i for i in ids if i not in sources]
    return sinks[0] if len(sinks) == 1 else None


def _set_plan(it: Iteration, plan: Any) -> None:
    if not isinstance(plan, dict):
        return
    it.plan = plan
    it.plan_json = pretty(plan)
    nodes = [n for n in _list(plan.get("nodes")) if isinstance(n, dict) and "id" in n]
    ids = [_label(n["id"]) for n in nodes]
    it.edges = _edges(plan, ids)
    final = _final_id(plan, ids, it.edges)
    fresh: dict[str, NodeRun] = {}
    for j, (nid, n) in enumerate(zip(ids, nodes, strict=True)):
        if nid in fresh:  # a duplicate id (an invalid plan); the first one wins
            continue
        if len(fresh) >= MAX_PLAN_NODES:
            it.hidden_nodes.add(nid)
            continue
        # events for a node before its plan would be a coordinator bug; keep them if so
        node = it.nodes.get(nid) or NodeRun(id=nid, anchor="")
        node.anchor = f"{it.anchor}-n{j}"
        node.in_plan = True
        node.name = _label(n.get("name") or "")
        node.instruction = _label(n.get("instruction") or "")
        node.inputs_decl = [_label(x) for x in _list(n.get("inputs"))]
        node.outputs_decl = n.get("outputs")
        node.vfs = [v for v in _list(n.get("verification")) if isinstance(v, dict)]
        node.final = nid == final
        fresh[nid] = node
    for nid, old in it.nodes.items():
        if len(fresh) < MAX_PLAN_NODES:
            fresh.setdefault(nid, old)
        elif nid not in fresh:
            it.hidden_nodes.add(nid)
    it.nodes = fresh


def _diff(prev: str, cur: str) -> Shown[tuple[str, str]]:
    """The replan's change as a unified diff of the pretty JSON, each line with its kind.
    Plans longer than `MAX_DIFF_INPUT` lines are not compared: difflib's time grows with the
    square of their length (seconds at 4,000 lines)."""
    old, new = prev.splitlines(), cur.splitlines()
    out: Shown[tuple[str, str]] = Shown(MAX_DIFF_LINES)
    if max(len(old), len(new)) > MAX_DIFF_INPUT:
        out.add(("hunk", f"(not compared: the plans are {len(old):,} and {len(new):,} lines long)"))
        return out
    lines = difflib.unified_diff(old, new, "previous plan", "this plan", lineterm="", n=2)
    for line in lines:
        kind = "hunk" if line.startswith("@@") else "ctx"
        if line.startswith(("+++", "---")):
            kind = "head"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        out.add((kind, line))
    return out


class _Fold:
    """Folds events, in trace order, into one `RunView`."""

    def __init__(self, run: RunView) -> None:
        self.run = run
        self.its: dict[int, Iteration] = {}

    def iteration(self, n: int | None) -> Iteration:
        """Iteration `n` (1 when unnumbered), made when first seen; past the cap, a scratch
        one that is not shown."""
        n = n if n is not None and n >= 1 else 1
        it = self.its.get(n)
        if it is None:
            it = Iteration(number=n, anchor=f"{self.run.anchor}-i{n}")
            if len(self.its) < MAX_ITERATIONS:
                self.its[n] = it
            else:
                self.run.hidden_iterations += 1
        return it

    def event(self, e: ev.AnyEvent, why: str | None = None) -> None:
        """Fold one event; a generic one (an unknown type, or a payload that did not validate:
        `why`) is shown as it was recorded, where it belongs."""
        run, it_no, nid = self.run, e.iteration, e.node_id
        run.run_id = run.run_id or e.run_id
        if isinstance(e, _NODE_EVENTS) and nid is not None:
            self.node_event(e, self.iteration(it_no).node(nid))
            return
        match e:
            case ev.RunStart():
                run.task, run.config = e.task, e.config
            case ev.Plan():
                _set_plan(self.iteration(it_no), e.plan)
            case ev.PlanInvalid():
                self.iteration(it_no).invalid_plans.add({"problems": e.problems, "reply": e.reply})
            case ev.PlanFallback():
                self.iteration(it_no).fallback = e.reason
            case ev.VfVacuous():
                self.iteration(it_no).vacuous.add(f"{nid}.{e.vf}")
            case ev.PlanKept():
                self.iteration(it_no).kept = e.data
            case ev.Replan():
                self.iteration(it_no).replan = e.data
            case ev.ToolCall() | ev.ModelCall() if nid is not None and e.attempt:
                a = self.iteration(it_no).node(nid).attempt(e.attempt)
                (a.tool_calls if isinstance(e, ev.ToolCall) else a.model_calls).add(e.data)
            case ev.ModelCall() if nid is None:
                run.model_calls.add(e.data)
            case ev.Error() | ev.BudgetExhausted():
                run.errors.add({**e.data, "type": e.type})
            case ev.Finish():
                self.finish(e)
            case _:
                label = e.type if why is None else f"{e.type} ({why})"
                other = {"type": label, "ts": e.ts, "data": e.data}
                if nid is not None:
                    node = self.iteration(it_no).node(nid)
                    (node.attempt(e.attempt).other if e.attempt else node.other).add(other)
                else:
                    run.other.add(other)

    def node_event(self, e: ev.AnyEvent, node: NodeRun) -> None:
        ts = e.ts
        match e:
            case ev.NodeStart():
                node.status = "running"
                node.started = ts
                node.inputs = e.inputs
            case ev.NodeReused():
                node.status = "reused"
                node.outputs = e.outputs
                node.started = node.finished = ts
            case ev.NodeFinish():
                node.status = e.status or "finished"
                node.outputs = e.outputs
                node.finished = ts
            case ev.Retry():
                node.attempt(e.attempt).feedback = e.feedback
            case ev.RetriesStopped():
                node.stopped, node.stopped_after = e.reason, e.attempt
            case ev.Attempt():
                node.attempt(e.attempt).started = ts
            case ev.VfVerdict():
                node.attempt(e.attempt).verdicts.add(
                    Verdict(
                        name=e.name,
                        type=e.vf_type,
                        outcome=e.outcome,
                        message=e.message,
                        traceback=e.traceback,
                        explanation=e.explanation,
                        check=node.vf_check(e.name),
                    )
                )
            case ev.AttemptResult():
                a = node.attempt(e.attempt)
                a.finished = ts
                a.passed = e.passed
                a.score = e.score
                a.outputs = e.outputs
                a.error = e.error

    def finish(self, e: ev.Finish) -> None:
        run = self.run
        run.status = e.status or "finished"
        run.final_output = e.final_output
        run.error = e.error
        run.n_iterations = e.iterations
        run.retries = e.retries
        run.wall_time_s = e.wall_time_s
        roles = e.usage.roles if e.usage is not None else {}
        run.usage = {role: u.model_dump() for role, u in roles.items()}

    def done(self) -> RunView:
        run = self.run
        run.iterations = [self.its[k] for k in sorted(self.its)]
        finished = run.status != "unfinished"
        prev = ""
        for it in run.iterations:
            if it.plan_json and prev:
                it.diff = _diff(prev, it.plan_json)
            prev = it.plan_json or prev
            for node in it.nodes.values():
                if node.status == "pending" and finished:
                    node.status = "skipped"
                node.attempts.sort(key=lambda a: a.number)
        return run


def build_run(
    events: Sequence[dict[str, Any]],
    anchor: str,
    *,
    max_chars: int | None = DEFAULT_MAX_CHARS,
    path: str = "",
    problems: list[str] | None = None,
    costs: Sequence[int] | None = None,
    budget: int = RUN_BUDGET,
) -> RunView:
    """Fold `events` (in trace order) into a `RunView` whose anchors all start with `anchor`.

    Each event costs `EVENT_COST` plus its entry in `costs` (see `JsonlRead.costs`); once
    `budget` is spent, later events are only counted, except the run's `finish`, which holds
    its status. `max_chars=None`: the events are clipped already (`read_jsonl(clip=...)`)."""
    fold = _Fold(RunView(anchor=anchor, path=path, problems=list(problems or [])))
    spent = 0
    for k, raw in enumerate(events):
        spent += EVENT_COST + (costs[k] if costs is not None else 0)
        if spent > budget and raw.get("type") != ev.FINISH:
            fold.run.hidden_events += 1
            continue
        fold.event(*as_event(raw if max_chars is None else clip_deep(raw, max_chars)))
    return fold.done()


def load_run(
    path: str | os.PathLike[str], anchor: str, *, max_chars: int = DEFAULT_MAX_CHARS
) -> RunView:
    got = read_jsonl(path, EVENT, clip=max_chars)
    problems = [str(p) for p in got.problems]
    return build_run(
        got.records, anchor, max_chars=None, path=str(path), problems=problems, costs=got.costs
    )


def run_from_plans(
    plans: list[Any], anchor: str, *, max_chars: int = DEFAULT_MAX_CHARS, note: str = ""
) -> RunView:
    """A `RunView` with only the plans (a results record whose trace is gone)."""
    run = RunView(anchor=anchor, source="record", problems=[note] if note else [])
    prev = ""
    for k, plan in enumerate(plans, 1):
        if k > MAX_ITERATIONS:
            run.hidden_iterations = len(plans) - MAX_ITERATIONS
            break
        it = Iteration(number=k, anchor=f"{anchor}-i{k}")
        _set_plan(it, clip_deep(plan, max_chars))
        if it.plan_json and prev:
            it.diff = _diff(prev, it.plan_json)
        prev = it.plan_json or prev
        run.iterations.append(it)
    return run
