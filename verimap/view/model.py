"""What the page shows of a run: iterations, nodes, attempts and verdicts, each list capped.

Built by `verimap.view.trace` from a trace, or from the plans of a results record. Every
list here keeps at most so many items and counts the rest (`Shown`), so the page can say
"… K more" and its size is bounded by item counts as well as by string lengths.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

try:
    import orjson
except ImportError:  # an optional speed-up of the view extra
    orjson = None  # type: ignore[assignment]
_ORJSON_OPTS = (orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) if orjson is not None else 0

# How much of one run the page shows; what is left out is counted ("… K more").
MAX_ITERATIONS = 20
MAX_PLAN_NODES = 200  # per iteration
MAX_DIFF_LINES = 1_000  # per replan
MAX_ATTEMPTS = 20  # per node
MAX_VERDICTS = 100  # per attempt
MAX_CALLS = 100  # tool calls, model calls: per attempt, and the planner's per run
MAX_OTHER = 50  # any other list: unknown events, errors, rejected plans, notes
_T = TypeVar("_T")


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


class Shown(list[_T]):
    """The first `cap` items added, and a count of the rest: the page shows these and says
    how many it left out. Items added with a `key` are counted once per key."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        self.hidden = 0
        self._hidden_keys: set[Hashable] = set()

    def add(self, item: _T, key: Hashable | None = None) -> bool:
        """Keep `item` if there is room; whether it was kept."""
        if len(self) < self.cap:
            self.append(item)
            return True
        if key is None or key not in self._hidden_keys:
            self.hidden += 1
            if key is not None:
                self._hidden_keys.add(key)
        return False


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
    verdicts: Shown[Verdict] = field(default_factory=lambda: Shown(MAX_VERDICTS))
    tool_calls: Shown[dict[str, Any]] = field(default_factory=lambda: Shown(MAX_CALLS))
    model_calls: Shown[dict[str, Any]] = field(default_factory=lambda: Shown(MAX_CALLS))
    other: Shown[dict[str, Any]] = field(default_factory=lambda: Shown(MAX_OTHER))


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
    attempts: Shown[Attempt] = field(default_factory=lambda: Shown(MAX_ATTEMPTS))
    # Why the node was not retried again, and after which attempt: a decision about the node.
    stopped: str | None = None
    stopped_after: int | None = None
    other: Shown[dict[str, Any]] = field(default_factory=lambda: Shown(MAX_OTHER))

    def attempt(self, number: int | None) -> Attempt:
        """The attempt numbered `number` (None: the latest), made when first seen; past the
        cap, a scratch one that is not shown."""
        n = number or (self.attempts[-1].number if self.attempts else 1)
        for a in self.attempts:
            if a.number == n:
                return a
        a = Attempt(number=n)
        self.attempts.add(a, key=n)
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
    diff: Shown[tuple[str, str]] = field(default_factory=lambda: Shown(MAX_DIFF_LINES))
    replan: dict[str, Any] | None = None  # why the planner was asked again
    kept: dict[str, Any] | None = None  # why the same plan ran again
    fallback: str | None = None
    invalid_plans: Shown[dict[str, Any]] = field(default_factory=lambda: Shown(MAX_OTHER))
    vacuous: Shown[str] = field(default_factory=lambda: Shown(MAX_OTHER))
    nodes: dict[str, NodeRun] = field(default_factory=dict)
    hidden_nodes: set[str] = field(default_factory=set)
    edges: list[tuple[str, str]] = field(default_factory=list)
    svg: str = ""
    # Why the plan is listed rather than drawn (too big, or Graphviz too slow).
    layout_note: str = ""

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
        """The node `node_id`, made when first seen; past the cap, a scratch one."""
        n = self.nodes.get(node_id)
        if n is None:
            n = NodeRun(id=node_id, anchor=f"{self.anchor}-x{len(self.nodes)}", in_plan=False)
            if len(self.nodes) < MAX_PLAN_NODES:
                self.nodes[node_id] = n
            else:
                self.hidden_nodes.add(node_id)
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
    hidden_iterations: int = 0
    errors: Shown[dict[str, Any]] = field(default_factory=lambda: Shown(MAX_OTHER))
    # Model calls made outside any attempt: the planner's.
    model_calls: Shown[dict[str, Any]] = field(default_factory=lambda: Shown(MAX_CALLS))
    other: Shown[dict[str, Any]] = field(default_factory=lambda: Shown(MAX_OTHER))
    problems: list[str] = field(default_factory=list)
    # Events past the run's budget: not folded in (the run's `finish` always is).
    hidden_events: int = 0

    @property
    def last(self) -> Iteration | None:
        return self.iterations[-1] if self.iterations else None
