"""A run's JSONL trace folded into iterations, nodes and attempts, ready to draw.

The trace is read leniently, with no `Event` or `Plan` validation: the viewer
must open a torn trace (a killed run), an old one, or one whose plans never
validated, and show what is there. Every string in it is model output or derived
from it, so each is clipped to `max_chars` on the way in; the HTML layer escapes
them, this layer only bounds their size.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from verimap import events as ev
from verimap.trace_files import DEFAULT_MAX_CHARS, clip_deep, read_events

try:
    import orjson
except ImportError:  # an optional speed-up of the view extra
    orjson = None  # type: ignore[assignment]
_ORJSON_OPTS = (orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) if orjson is not None else 0

# A plan drawn with more nodes than this would take dot (and the reader) too long.
MAX_DAG_NODES = 150
_NODE_EVENTS = {
    ev.NODE_START,
    ev.NODE_REUSED,
    ev.NODE_FINISH,
    ev.ATTEMPT,
    ev.RETRY,
    ev.VF_VERDICT,
    ev.ATTEMPT_RESULT,
}


def pretty(obj: Any) -> str:
    """JSON as people read it; plain strings stay unquoted.

    orjson when it is there: the stdlib's indented encoder is pure Python and was a third of
    a 500-task report's build time. What orjson refuses (an int beyond 64 bits) goes to json."""
    if isinstance(obj, str):
        return obj
    if orjson is not None:
        with contextlib.suppress(TypeError):
            return orjson.dumps(obj, option=_ORJSON_OPTS, default=str).decode()
    return json.dumps(obj, indent=2, ensure_ascii=False, default=str)


@dataclass
class Verdict:
    name: str
    type: str
    outcome: str
    message: str = ""
    traceback: str = ""
    explanation: str = ""
    check: str = ""  # the VF's code or criterion, from the plan

    @property
    def passed(self) -> bool:
        return self.outcome == "PASS"


class _Timed:
    """Wall time from the events' timestamps, when both ends were seen."""

    started: float | None
    finished: float | None

    @property
    def seconds(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return max(0.0, self.finished - self.started)


@dataclass
class Attempt(_Timed):
    number: int
    started: float | None = None
    finished: float | None = None
    outputs: Any = None
    error: str | None = None
    passed: bool | None = None
    score: float | None = None
    feedback: Any = None  # what the retry that started this attempt was told
    verdicts: list[Verdict] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    model_calls: list[dict[str, Any]] = field(default_factory=list)
    other: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class NodeRun(_Timed):
    """One node within one iteration: its declaration in that plan and what happened to it."""

    id: str
    anchor: str
    name: str = ""
    instruction: str = ""
    inputs_decl: list[str] = field(default_factory=list)
    outputs_decl: Any = None
    vfs: list[dict[str, Any]] = field(default_factory=list)
    final: bool = False
    in_plan: bool = True
    status: str = "pending"
    started: float | None = None
    finished: float | None = None
    inputs: Any = None
    outputs: Any = None
    attempts: list[Attempt] = field(default_factory=list)
    other: list[dict[str, Any]] = field(default_factory=list)

    def attempt(self, number: int | None) -> Attempt:
        n = number or (self.attempts[-1].number if self.attempts else 1)
        for a in self.attempts:
            if a.number == n:
                return a
        a = Attempt(number=n)
        self.attempts.append(a)
        return a

    def vf_check(self, name: str) -> str:
        for vf in self.vfs:
            if isinstance(vf, dict) and vf.get("name") == name:
                return str(vf.get("code") or vf.get("content") or "")
        return ""


@dataclass
class Iteration:
    number: int
    anchor: str
    plan: dict[str, Any] | None = None
    plan_json: str = ""
    diff: list[tuple[str, str]] = field(default_factory=list)
    replan: dict[str, Any] | None = None  # why the planner was asked again
    kept: dict[str, Any] | None = None  # why the same plan ran again
    fallback: str | None = None
    invalid_plans: list[dict[str, Any]] = field(default_factory=list)
    vacuous: list[str] = field(default_factory=list)
    nodes: dict[str, NodeRun] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)
    svg: str = ""

    @property
    def kind(self) -> str:
        if self.fallback is not None:
            return "fallback plan"
        if self.kept is not None:
            return "same plan again"
        if self.replan is not None:
            return "replan"
        return "plan"

    def node(self, node_id: str) -> NodeRun:
        n = self.nodes.get(node_id)
        if n is None:
            n = NodeRun(id=node_id, anchor=f"{self.anchor}-x{len(self.nodes)}", in_plan=False)
            self.nodes[node_id] = n
        return n


@dataclass
class RunView:
    """A run as the viewer shows it. `source` says where it came from (a trace, or only the
    plans of a results record when the trace is missing)."""

    anchor: str
    path: str = ""
    source: str = "trace"
    run_id: str = ""
    task: str = ""
    config: Any = None
    status: str = "unfinished"
    final_output: Any = None
    error: str | None = None
    n_iterations: int | None = None
    retries: int | None = None
    wall_time_s: float | None = None
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    iterations: list[Iteration] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    # Model calls made outside any attempt: the planner's.
    model_calls: list[dict[str, Any]] = field(default_factory=list)
    other: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def last(self) -> Iteration | None:
        return self.iterations[-1] if self.iterations else None


def _ref_source(ref: Any) -> str | None:
    if not isinstance(ref, str) or ref == "USER_TASK":
        return None
    ref = ref.strip().strip("<>")
    return ref.split(".", 1)[0] if "." in ref else None


def _edges(plan: dict[str, Any], ids: list[str]) -> list[tuple[str, str]]:
    """Declared edges plus the ones the inputs imply, as the plan model derives them."""
    known = set(ids)
    out: dict[tuple[str, str], None] = {}
    for e in plan.get("edges") or []:
        if isinstance(e, dict):
            s, t = e.get("from", e.get("source")), e.get("to", e.get("target"))
        elif isinstance(e, list | tuple) and len(e) == 2:
            s, t = e
        else:
            continue
        if isinstance(s, str) and isinstance(t, str) and s in known and t in known:
            out[(s, t)] = None
    for n in plan.get("nodes") or []:
        if not isinstance(n, dict):
            continue
        for ref in n.get("inputs") or []:
            src = _ref_source(ref)
            if src in known and isinstance(n.get("id"), str):
                out[(src, n["id"])] = None
    return list(out)


def _final_id(plan: dict[str, Any], ids: list[str], edges: list[tuple[str, str]]) -> str | None:
    flagged = [
        n.get("id") for n in plan.get("nodes") or [] if isinstance(n, dict) and n.get("final")
    ]
    if len(flagged) == 1:
        return flagged[0]
    sinks = [i for i in ids if not any(s == i for s, _ in edges)]
    return sinks[0] if len(sinks) == 1 else None


def _set_plan(it: Iteration, plan: Any) -> None:
    if not isinstance(plan, dict):
        return
    it.plan = plan
    it.plan_json = pretty(plan)
    nodes = [n for n in plan.get("nodes") or [] if isinstance(n, dict) and "id" in n]
    ids = [str(n["id"]) for n in nodes]
    it.edges = _edges(plan, ids)
    final = _final_id(plan, ids, it.edges)
    fresh: dict[str, NodeRun] = {}
    for j, n in enumerate(nodes):
        nid = str(n["id"])
        if nid in fresh:  # a duplicate id (an invalid plan); the first one wins
            continue
        # events for a node before its plan would be a coordinator bug; keep them if so
        node = it.nodes.get(nid) or NodeRun(id=nid, anchor="")
        node.anchor = f"{it.anchor}-n{j}"
        node.in_plan = True
        node.name = str(n.get("name") or "")
        node.instruction = str(n.get("instruction") or "")
        node.inputs_decl = [str(x) for x in n.get("inputs") or []]
        node.outputs_decl = n.get("outputs")
        node.vfs = [v for v in n.get("verification") or [] if isinstance(v, dict)]
        node.final = nid == final
        fresh[nid] = node
    for nid, old in it.nodes.items():
        fresh.setdefault(nid, old)
    it.nodes = fresh


def _diff(prev: str, cur: str) -> list[tuple[str, str]]:
    """The replan's change as a unified diff of the pretty JSON, each line with its kind."""
    lines = difflib.unified_diff(
        prev.splitlines(), cur.splitlines(), "previous plan", "this plan", lineterm="", n=2
    )
    out = []
    for line in lines:
        kind = "hunk" if line.startswith("@@") else "ctx"
        if line.startswith(("+++", "---")):
            kind = "head"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        out.append((kind, line))
    return out


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def build_run(
    events: list[dict[str, Any]],
    anchor: str,
    *,
    max_chars: int | None = DEFAULT_MAX_CHARS,
    path: str = "",
    problems: list[str] | None = None,
) -> RunView:
    """Fold `events` (in trace order) into a `RunView` whose anchors all start with `anchor`.

    `max_chars=None`: the events are clipped already (`read_events(clip=...)`)."""
    run = RunView(anchor=anchor, path=path, problems=list(problems or []))
    its: dict[int, Iteration] = {}

    def iteration(n: int | None) -> Iteration:
        n = n if n is not None and n >= 1 else 1
        if n not in its:
            its[n] = Iteration(number=n, anchor=f"{anchor}-i{n}")
        return its[n]

    for raw in events:
        e: dict[str, Any] = raw if max_chars is None else clip_deep(raw, max_chars)
        typ = e["type"]
        d = e.get("data")
        data: dict[str, Any] = d if isinstance(d, dict) else {}
        ts = _num(e.get("ts"))
        it_no = _int(e.get("iteration"))
        nid = e.get("node_id")
        attempt_no = _int(e.get("attempt"))
        run.run_id = run.run_id or str(e.get("run_id") or "")
        if typ == ev.RUN_START:
            run.task = str(data.get("task", ""))
            run.config = data.get("config")
        elif typ == ev.PLAN:
            it = iteration(it_no)
            _set_plan(it, data.get("plan"))
        elif typ == ev.PLAN_INVALID:
            iteration(it_no).invalid_plans.append(
                {"problems": data.get("problems") or [], "reply": data.get("reply", "")}
            )
        elif typ == ev.PLAN_FALLBACK:
            iteration(it_no).fallback = str(data.get("reason") or "")
        elif typ == ev.VF_VACUOUS:
            iteration(it_no).vacuous.append(f"{nid}.{data.get('vf')}")
        elif typ == ev.PLAN_KEPT:
            iteration(it_no).kept = data
        elif typ == ev.REPLAN:
            iteration(it_no).replan = data
        elif typ in _NODE_EVENTS and isinstance(nid, str):
            node = iteration(it_no).node(nid)
            if typ == ev.NODE_START:
                node.status = "running"
                node.started = ts
                node.inputs = data.get("inputs")
            elif typ == ev.NODE_REUSED:
                node.status = "reused"
                node.outputs = data.get("outputs")
                node.started = node.finished = ts
            elif typ == ev.NODE_FINISH:
                node.status = str(data.get("status") or "finished")
                node.outputs = data.get("outputs")
                node.finished = ts
            elif typ == ev.RETRY:
                node.attempt(attempt_no).feedback = data.get("feedback")
            elif typ == ev.ATTEMPT:
                node.attempt(attempt_no).started = ts
            elif typ == ev.VF_VERDICT:
                name = str(data.get("name", ""))
                node.attempt(attempt_no).verdicts.append(
                    Verdict(
                        name=name,
                        type=str(data.get("type", "")),
                        outcome=str(data.get("outcome", "")),
                        message=str(data.get("message") or ""),
                        traceback=str(data.get("traceback") or ""),
                        explanation=str(data.get("explanation") or ""),
                        check=node.vf_check(name),
                    )
                )
            elif typ == ev.ATTEMPT_RESULT:
                a = node.attempt(attempt_no)
                a.finished = ts
                a.passed = bool(data.get("passed"))
                a.score = _num(data.get("score"))
                a.outputs = data.get("outputs")
                a.error = data.get("error")
        elif typ in (ev.TOOL_CALL, ev.MODEL_CALL) and isinstance(nid, str) and attempt_no:
            a = iteration(it_no).node(nid).attempt(attempt_no)
            (a.tool_calls if typ == ev.TOOL_CALL else a.model_calls).append(data)
        elif typ == ev.MODEL_CALL and not isinstance(nid, str):
            run.model_calls.append(data)
        elif typ in (ev.ERROR, ev.BUDGET):
            run.errors.append({"type": typ, **data})
        elif typ == ev.FINISH:
            run.status = str(data.get("status") or "finished")
            run.final_output = data.get("final_output")
            run.error = data.get("error")
            run.n_iterations = _int(data.get("iterations"))
            run.retries = _int(data.get("retries"))
            run.wall_time_s = _num(data.get("wall_time_s"))
            roles = (data.get("usage") or {}).get("roles") or {}
            run.usage = {str(k): v for k, v in roles.items() if isinstance(v, dict)}
        else:
            other = {"type": typ, "ts": ts, "data": data}
            if isinstance(nid, str):
                node = iteration(it_no).node(nid)
                (node.attempt(attempt_no).other if attempt_no else node.other).append(other)
            else:
                run.other.append(other)

    run.iterations = [its[k] for k in sorted(its)]
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


def load_run(
    path: str | os.PathLike[str], anchor: str, *, max_chars: int = DEFAULT_MAX_CHARS
) -> RunView:
    events, problems = read_events(path, clip=max_chars)
    return build_run(events, anchor, max_chars=None, path=str(path), problems=problems)


def run_from_plans(
    plans: list[Any], anchor: str, *, max_chars: int = DEFAULT_MAX_CHARS, note: str = ""
) -> RunView:
    """A `RunView` with only the plans (a results record whose trace is gone)."""
    run = RunView(anchor=anchor, source="record", problems=[note] if note else [])
    prev = ""
    for k, plan in enumerate(plans, 1):
        it = Iteration(number=k, anchor=f"{anchor}-i{k}")
        _set_plan(it, clip_deep(plan, max_chars))
        if it.plan_json and prev:
            it.diff = _diff(prev, it.plan_json)
        prev = it.plan_json or prev
        run.iterations.append(it)
    return run
