"""What the side-by-side benchmarks share (small_model.py, verification_quality.py): task views
the eval runner takes for a benchmark, the README's pens task, rows read back from run
directories, and one local server and sandbox per benchmark run whose tables are written even
when the run is cut short.

A benchmark script runs as `python3 benchmarks/NAME.py`, so this directory is on `sys.path` and
`from _common import ...` finds this module; the tests put it there themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verimap.base.events import PLAN_FALLBACK
from verimap.base.model import Model
from verimap.base.protocols import Sandbox
from verimap.evals.compact import model_seconds
from verimap.evals.data import DataSource
from verimap.evals.runner import ERRORS, RESULTS, ResultsLog
from verimap.evals.scoring import Score, score_gsm8k
from verimap.evals.stats import total_calls
from verimap.evals.tasksets import Benchmark, EvalTask
from verimap.local.endpoint import connect
from verimap.sandbox import get_sandbox
from verimap.tools.registry import ToolRegistry, default_tools

REPO = Path(__file__).resolve().parents[1]
PENS = "A shop sells pens at 17 dollars each. How much do 23 pens cost? Give the number."
PENS_GOLD = "391"


# ---- task sets ----------------------------------------------------------------------------------


class BenchmarkView:
    """A benchmark with other `tasks()`: the runner only knows "the first N" (or a seeded sample),
    and a benchmark script needs a window or a drawn set. Everything else (name, tools, scorer,
    data source) is the wrapped benchmark's, so the runner cannot tell the two apart."""

    def __init__(self, bench: Benchmark):
        self._bench = bench

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bench, name)


class TaskWindow(BenchmarkView):
    """The fixed window [offset, offset + n) of a benchmark's tasks."""

    def __init__(self, bench: Benchmark, offset: int, n: int):
        super().__init__(bench)
        self.offset, self.n = offset, n

    def tasks(self) -> list[EvalTask]:
        return self._bench.tasks()[self.offset : self.offset + self.n]


class TaskSubset(BenchmarkView):
    """Given tasks of a benchmark, in the given order (one task, when methods are interleaved
    task by task)."""

    def __init__(self, bench: Benchmark, tasks: list[EvalTask]):
        super().__init__(bench)
        self._tasks = list(tasks)

    def tasks(self) -> list[EvalTask]:
        return list(self._tasks)


class PensTask(Benchmark):
    """The README's `verimap run` example as a one-task benchmark, so it runs, is traced and is
    tallied exactly like the eval cells. Its tools and domain are the ones `verimap run --method`
    uses (`default_tools`, math), so the numbers are those of the README command."""

    name = "pens"
    domain = "math"

    def __init__(self) -> None:
        self.source = DataSource("pens", REPO / "README.md", "readme")

    def tasks(self) -> list[EvalTask]:
        return [EvalTask("pens", self.name, PENS, PENS_GOLD)]

    def tools(self, sandbox: Sandbox) -> ToolRegistry:
        return default_tools(sandbox)

    async def score(self, task: EvalTask, answer: Any, sandbox: Sandbox) -> Score:
        return score_gsm8k(answer, task.gold)


# ---- rows from run directories ------------------------------------------------------------------


@dataclass
class Row:
    """One finished task of one method, as the tables need it; `record` is the results.jsonl
    line it was read from, for `verimap.evals.stats`."""

    task_id: str
    correct: bool
    wall_s: float
    calls: int
    prompt_tokens: int
    completion_tokens: int
    verified: bool = False
    no_plan: bool = False
    fallbacks: int = 0
    cached_tokens: int = 0
    model_s: float | None = None  # seconds inside model calls, from the trace
    record: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Cell:
    """One (benchmark, method): its finished rows, the tasks that raised, and what went wrong
    with the cell as a whole (a run directory that could not be used, say)."""

    bench: str
    method: str
    rows: list[Row] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # task ids in errors.jsonl, never finished
    note: str = ""

    @property
    def records(self) -> list[dict[str, Any]]:
        return [r.record for r in self.rows]

    @property
    def generation_rate(self) -> float | None:
        """Completion tokens per second inside model calls: the speed of the host the cell was
        timed on, whatever its tasks asked for. None without traces, and when its calls write
        fewer than `RATE_MIN_TOKENS` tokens on average: reading the prompt then takes most of a
        call, and the rate says nothing of the host (a one-word answer to a long question)."""
        timed = [r for r in self.rows if r.model_s]
        seconds = sum(r.model_s or 0.0 for r in timed)
        tokens = sum(r.completion_tokens for r in timed)
        calls = sum(r.calls for r in timed)
        if seconds <= 0 or tokens < RATE_MIN_TOKENS * max(calls, 1):
            return None
        return tokens / seconds


# Cells timed side by side ran within 1.45x of react's generation rate in every draw of
# eval/draws; one resumed on a slower host ran 3.3x apart (design/decisions.md, D30).
SPEED_SPREAD = 2.0
RATE_MIN_TOKENS = 32


def unlike_speeds(a: Cell, b: Cell) -> str | None:
    """Why the wall times of `a` and `b` cannot be divided, or None when they can: a ratio of
    times means something only when both were taken at one speed, and `--resume` may time a
    cell on another host or beside other work."""
    ra, rb = a.generation_rate, b.generation_rate
    if ra and rb and max(ra, rb) / min(ra, rb) > SPEED_SPREAD:
        return f"not comparable: {ra:.0f} vs {rb:.0f} tokens/s"
    return None


def trace_events(trace: Path) -> list[dict[str, Any]] | None:
    """A trace's events, skipping lines that do not parse; None when it cannot be read."""
    try:
        lines = trace.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    events = []
    for line in lines:
        with contextlib.suppress(json.JSONDecodeError):
            events.append(json.loads(line))
    return events


def fallbacks_in(events: list[dict[str, Any]]) -> int:
    """`plan_fallback` events: the record's own count may be missing in older records, the
    trace always says."""
    return sum(e.get("type") == PLAN_FALLBACK for e in events)


def count_fallbacks(trace: Path) -> int | None:
    """`fallbacks_in` a trace file; None when it cannot be read."""
    events = trace_events(trace)
    return None if events is None else fallbacks_in(events)


def row_from_record(
    rec: dict[str, Any], fallbacks: int | None = None, model_s: float | None = None
) -> Row:
    """A results.jsonl record as a Row; calls and tokens are summed over the roles. A compact
    record (`verimap.evals.compact`) carries its sums, and its trace's fallbacks and model
    seconds."""
    if rec.get("compact"):
        completion = int(rec.get("completion_tokens") or 0)
        return Row(
            task_id=rec["task_id"],
            correct=bool(rec["correct"]),
            wall_s=float(rec["wall_time_s"]),
            calls=total_calls(rec),
            prompt_tokens=int(rec["tokens"]) - completion,
            completion_tokens=completion,
            verified=bool(rec["verified"]),
            fallbacks=int(rec["fallbacks"]),
            model_s=rec.get("model_seconds"),
            record=rec,
        )
    usage = (rec.get("usage") or {}).values()
    return Row(
        task_id=rec["task_id"],
        correct=bool(rec.get("correct")),
        wall_s=float(rec.get("wall_time_s", 0.0)),
        calls=sum(int(u.get("calls", 0)) for u in usage),
        prompt_tokens=sum(int(u.get("prompt_tokens", 0)) for u in usage),
        completion_tokens=sum(int(u.get("completion_tokens", 0)) for u in usage),
        cached_tokens=sum(int(u.get("cached_tokens", 0)) for u in usage),
        verified=bool(rec.get("verified")),
        no_plan="planning failed" in (rec.get("error") or ""),
        fallbacks=int(rec.get("fallbacks", 0)) if fallbacks is None else fallbacks,
        model_s=model_s,
        record=rec,
    )


def read_cell(bench: str, method: str, out: Path, order: list[str] | None = None) -> Cell:
    """The cell as its run directory holds it now, whether the run finished or was cut short.
    Rows follow `order` (task ids) when given, then the rest as they were recorded."""
    cell = Cell(bench, method)
    done = ResultsLog(out / RESULTS).load()
    for rec in done.values():
        events = trace_events(out / rec["trace"]) if rec.get("trace") else None
        if events is None:
            cell.rows.append(row_from_record(rec))
            continue
        cell.rows.append(row_from_record(rec, fallbacks_in(events), model_seconds(events)))
    errors = ResultsLog(out / ERRORS).load()
    cell.errors = sorted({e["task_id"] for k, e in errors.items() if k not in done})
    if order:
        rank = {t: i for i, t in enumerate(order)}
        cell.rows.sort(key=lambda r: rank.get(r.task_id, len(rank)))
    return cell


# ---- the run ------------------------------------------------------------------------------------


def seconds(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.1f} s"


def commit() -> str:
    """The checkout measured: short hash, "+dirty" when the tree has changes (runs/ is ignored)."""

    def git(*a: str) -> str:
        r = subprocess.run(["git", *a], capture_output=True, text=True, cwd=REPO, check=False)
        return r.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain") else "")


def say(text: str) -> None:
    """A progress line on stderr, so stdout holds only the tables."""
    print(text, file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def local_session(
    model: str, sandbox_kind: str
) -> AsyncIterator[tuple[dict[str, Model], Sandbox]]:
    """One local model server and one sandbox for every method of the run, both started once,
    so no method pays (or skips) a start-up the others do not. SIGTERM cancels the run as Ctrl-C
    does: finished tasks are already on disk and the tables are still written."""
    me = asyncio.current_task()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, lambda: me and me.cancel())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sandbox = get_sandbox(sandbox_kind, shared=False)
    async with sandbox, connect(model=model, keep_server=False) as models:
        yield models, sandbox


def write_report(table: str, out: str | None) -> None:
    """The tables on stdout, and in `out` unless it is empty."""
    print(table)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(table, encoding="utf-8")
        say(f"written to {path}")


def run_then_report(
    work: Coroutine[Any, Any, Any],
    report: Callable[[bool], str],
    out: str | None,
    resume_hint: str,
) -> int:
    """Run `work`, then write `report(interrupted)` whatever happened: the tables are rebuilt
    from the run directories, so an interrupted run still shows what finished. The exit code is
    0, 130 (interrupted) or 1 (nothing could run: no server, no sandbox)."""
    code = 0
    try:
        asyncio.run(work)
    except (KeyboardInterrupt, asyncio.CancelledError):
        say(f"\ninterrupted: the tables hold what finished; continue with {resume_hint}")
        code = 130
    except Exception as e:
        say(f"error: {type(e).__name__}: {e}")
        code = 1
    finally:
        write_report(report(code == 130), out)
    return code
