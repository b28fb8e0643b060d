"""Run a benchmark with a method, concurrently, losing nothing when interrupted.

Each finished task is one JSON line appended to `DIR/results.jsonl` and fsynced
before the next is counted, so a crash or Ctrl-C can cost at most the tasks still
running. On `--resume` the log is read back (a torn last line from a kill is cut
off), finished tasks are skipped, and a lock file keeps two runs from writing the
same directory at once; together these mean no task is lost or counted twice.
Tasks that fail for infrastructure reasons (a model endpoint that fails past its
retries, a sandbox that cannot run, a task the data or the scorer cannot handle)
are never scored: they are logged to `DIR/errors.jsonl` instead, and since they
are not in the results a resume retries them.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from verimap.config import RunConfig
from verimap.errors import VerimapError
from verimap.evals.benchmarks import Benchmark, EvalTask
from verimap.evals.methods import METHODS, build_coordinator, get_method, method_config
from verimap.evals.sampling import sample_digest, select_tasks
from verimap.events import EventBus
from verimap.llm.base import Model
from verimap.plan import LLMVF, PythonVF
from verimap.result import SKIPPED
from verimap.sandbox.base import Sandbox

if TYPE_CHECKING:
    from rich.console import Console

    from verimap.live_view import BoardView

RESULTS = "results.jsonl"
ERRORS = "errors.jsonl"
CONFIG = "config.json"
LOCK = ".lock"


class RunDirError(VerimapError, RuntimeError):
    """The output directory cannot be used as asked (busy, or holds another run)."""


class TaskRecord(BaseModel):
    key: str
    run: int
    task_id: str
    benchmark: str
    method: str
    status: str
    correct: bool
    verified: bool  # verification accepted the final answer (run status success)
    predicted: str = ""
    gold: str = ""
    score_detail: str = ""
    iterations: int = 0
    retries: int = 0
    usage: dict[str, dict[str, Any]] = Field(default_factory=dict)
    tokens: int = 0
    cost: float = 0.0
    wall_time_s: float = 0.0
    vf_stats: dict[str, int] = Field(default_factory=dict)
    # VF executions in the run (what the paper's Table 3 counts), beside `vf_stats`' VFs written.
    vf_calls: dict[str, int] = Field(default_factory=dict)
    plans: list[dict[str, Any]] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)
    trace: str | None = None
    error: str | None = None
    # Plans that were the one-node fallback, and VFs dropped as vacuous (see RunResult).
    fallbacks: int = 0
    dropped_vfs: int = 0
    finished_at: float = Field(default_factory=time.time)


# The paper's protocol (App. B): a seeded random sample of 500 tasks, or half the set when it
# has fewer than 500, each run three times.
def task_key(run: int, task_id: str) -> str:
    return f"r{run}/{task_id}"


def unscored_errors(out: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The last error line of every task in `out` that errored and is not in the results yet:
    what a resume would retry."""
    path = Path(out) / ERRORS
    if not path.exists():
        return {}
    done = ResultsLog(Path(out) / RESULTS).load()
    last: dict[str, dict[str, Any]] = {}
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line from a kill; the task is retried either way
        if isinstance(rec, dict) and "key" in rec and rec["key"] not in done:
            last[rec["key"]] = rec
    return last


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


class ResultsLog:
    """Append-only JSONL with one fsync per record."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)

    def load(self, *, repair: bool = False) -> dict[str, dict[str, Any]]:
        """Finished records by key. A torn final line (a kill mid-write) is dropped, and with
        `repair` cut from the file so later appends start on a fresh line."""
        if not self.path.exists():
            return {}
        raw = self.path.read_bytes()
        end = raw.rfind(b"\n") + 1
        if end < len(raw) and repair:
            with self.path.open("r+b") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
        out: dict[str, dict[str, Any]] = {}
        for n, line in enumerate(raw[:end].splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise RunDirError(
                    f"{self.path}: line {n} is not valid JSON ({e}); fix or remove it"
                ) from None
            out.setdefault(rec["key"], rec)
        return out

    def append(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def dir_lock(out: Path) -> Iterator[None]:
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(f"{out} is in use by another eval run") from None
        yield
    finally:
        os.close(fd)


def vf_stats(plans: list[Any]) -> dict[str, int]:
    """Counts and total lengths (characters) of Python and NL VFs over all plans of a run."""
    s = {"plans": 0, "nodes": 0, "python": 0, "python_chars": 0, "llm": 0, "llm_chars": 0}
    for p in plans:
        s["plans"] += 1
        for n in p.nodes:
            s["nodes"] += 1
            for vf in n.verification:
                if isinstance(vf, PythonVF):
                    s["python"] += 1
                    s["python_chars"] += len(vf.code)
                elif isinstance(vf, LLMVF):
                    s["llm"] += 1
                    s["llm_chars"] += len(vf.content)
    return s


def vf_calls(result: Any) -> dict[str, int]:
    """Python VFs run and natural-language criteria judged, over every attempt of the run.

    Counted from the verdicts in the run's node reports, so a judge criterion skipped after a
    Python VF failed is not a call, while one judged in a batch with others is. The vacuity
    probes before a plan runs are not verification of an answer and are left out."""
    calls = {"python": 0, "llm": 0}
    for rep in result.nodes.values():
        for v in rep.verdicts:
            if v.outcome != SKIPPED:
                calls[v.type] += 1
    return calls


@dataclass
class Tally:
    total: int
    done: int = 0
    correct: int = 0
    tokens: int = 0
    cost: float = 0.0
    errors: int = 0
    skipped: int = 0

    def add(self, rec: dict[str, Any]) -> None:
        self.done += 1
        self.correct += bool(rec.get("correct"))
        self.tokens += int(rec.get("tokens", 0))
        self.cost += float(rec.get("cost", 0.0))

    @property
    def accuracy(self) -> float:
        return self.correct / self.done if self.done else 0.0


@dataclass
class EvalOutcome:
    out_dir: Path
    tally: Tally
    records: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False


# (task, run index, trace path) -> RunResult
Solver = Callable[[EvalTask, int, Any], Awaitable[Any]]


def _check_config(out: Path, cfg: dict[str, Any], resume: bool, has_results: bool) -> None:
    path = out / CONFIG
    if path.exists():
        old = json.loads(path.read_text())
        if has_results and not resume:
            raise RunDirError(
                f"{out} already holds results; pass --resume to continue it, or choose another --out"
            )
        for k in ("benchmark", "method", "sample", "seed"):
            if old.get(k) != cfg.get(k):
                raise RunDirError(
                    f"{out} holds a run of {k} {old.get(k)!r}, not {cfg.get(k)!r}; choose another --out"
                )
        if old.get("sample_digest") != cfg.get("sample_digest"):
            raise RunDirError(
                f"{out} holds a sample of other task ids (another data directory?); "
                "choose another --out"
            )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cfg, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def _progress(total: int, enabled: bool, console: Console, board: BoardView | None = None):
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from verimap.live_view import BoardProgress

    return BoardProgress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("acc {task.fields[acc]}"),
        TextColumn("tok {task.fields[tok]}"),
        TextColumn("${task.fields[cost]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not enabled,
        transient=False,
        board=board,
    )


async def run_eval(
    bench: Benchmark,
    method: str,
    models: dict[str, Model] | None,
    sandbox: Sandbox,
    out_dir: str | os.PathLike[str],
    *,
    runs: int = 1,
    limit: int | None = None,
    sample: int | str | None = None,
    seed: int | None = None,
    max_concurrency: int = 4,
    resume: bool = False,
    config: RunConfig | dict[str, Any] | None = None,
    progress: bool = True,
    solver: Solver | None = None,
    extra_config: dict[str, Any] | None = None,
    events: EventBus | None = None,
) -> EvalOutcome:
    """Run `runs` x the first `limit` tasks, or x a seeded random `sample` of them (an int, or
    "paper": see `paper_sample_size`); see the module docstring for the guarantees.

    With a `solver`, `method` may name something that is no preset (a bare-model baseline beside
    the methods): its records, traces and errors then land in the same layout, and its
    `run_config` is `config` as given. `events` hears every task's run (not a custom solver's).
    """
    custom = solver is not None and method not in METHODS
    if not custom:
        get_method(method)
    if runs < 1 or max_concurrency < 1:
        raise ValueError("runs and max_concurrency must be >= 1")
    out = Path(out_dir)
    if custom:
        cfg = config if isinstance(config, RunConfig) else RunConfig.model_validate(config or {})
    else:
        cfg = method_config(method, config)
    everything = bench.tasks()
    tasks = select_tasks(everything, limit=limit, sample=sample, seed=seed)
    sampled = (
        {"sample": len(tasks), "sample_of": len(everything), "sample_rule": str(sample),
         "seed": 0 if seed is None else seed, "sample_digest": sample_digest(tasks)}
        if sample is not None
        else {}
    )  # fmt: skip
    with dir_lock(out):
        log = ResultsLog(out / RESULTS)
        done = log.load(repair=True)
        _check_config(
            out,
            {
                "benchmark": bench.name,
                "method": method,
                "runs": runs,
                "limit": limit,
                **sampled,
                "data": {"dir": str(bench.source.root), "origin": bench.source.origin},
                "models": {r: getattr(m, "name", "?") for r, m in (models or {}).items()},
                "sandbox": getattr(sandbox, "kind", "?"),
                "run_config": cfg.model_dump(mode="json"),
                **(extra_config or {}),
            },
            resume,
            bool(done),
        )
        pending = [(r, t) for r in range(runs) for t in tasks if task_key(r, t.id) not in done]
        tally = Tally(total=runs * len(tasks))
        mine = {task_key(r, t.id) for r in range(runs) for t in tasks}
        for k, rec in done.items():
            if k in mine:
                tally.add(rec)
        tally.skipped = tally.done
        if pending:
            bench.prepare()
        from verimap import live_view  # rich loads only when an eval runs

        console = live_view.stderr_console()
        # The tasks in flight, drawn under the bar; only where the bar itself redraws.
        live = progress and solver is None and live_view.is_live(console)
        board = live_view.BoardView() if live else None
        watch = board.bus if board is not None else None
        solve = solver or _default_solver(bench, method, models, sandbox, cfg, events, watch)
        sem = asyncio.Semaphore(max_concurrency)
        outcome = EvalOutcome(out, tally)
        with _progress(tally.total, progress, console, board) as bar:
            pid = bar.add_task(f"{bench.name}/{method}", total=tally.total, completed=tally.done,
                               acc="-", tok=0, cost="0.0000")  # fmt: skip

            def refresh() -> None:
                bar.update(pid, completed=tally.done, acc=f"{tally.accuracy:.1%}" if tally.done else "-",
                           tok=tally.tokens, cost=f"{tally.cost:.4f}")  # fmt: skip

            refresh()

            async def one(run: int, task: EvalTask) -> None:
                async with sem:
                    key = task_key(run, task.id)
                    if board is not None:
                        board.start(key)
                    try:
                        rec = await _run_task(bench, method, task, run, out, sandbox, solve)
                    finally:
                        if board is not None:
                            board.done(key)
                if rec is None:
                    tally.errors += 1
                    return
                log.append(rec)
                outcome.records.append(rec)
                tally.add(rec)
                refresh()
                if progress and not bar.console.is_terminal:
                    # No live bar in a log file or CI: one line per finished task instead.
                    print(
                        f"[{tally.done}/{tally.total}] {rec['key']} "
                        f"{'correct' if rec['correct'] else 'wrong'} ({rec['status']}); "
                        f"acc {tally.accuracy:.1%}, {tally.tokens} tok, ${tally.cost:.4f}",
                        file=sys.stderr,
                        flush=True,
                    )

            jobs = [asyncio.create_task(one(r, t)) for r, t in pending]
            try:
                await asyncio.gather(*jobs)
            except BaseException:
                outcome.interrupted = True
                for j in jobs:
                    j.cancel()
                await asyncio.gather(*jobs, return_exceptions=True)
                raise
        return outcome


def _default_solver(
    bench: Benchmark,
    method: str,
    models: dict[str, Model] | None,
    sandbox: Sandbox,
    cfg: RunConfig,
    events: EventBus | None = None,
    watch: Callable[[str], EventBus] | None = None,
) -> Solver:
    """`events` hears every task's run (e.g. OpenTelemetry); `watch(key)`, when given, is the
    event bus for the run of the task with that key (the live board), and passes it on."""
    if models is None:
        raise ValueError("no models given: pass models (planner, executor, judge) or a solver")

    async def solve(task: EvalTask, run: int, trace_path: Path) -> Any:
        bus = events
        if watch is not None:
            bus = watch(task_key(run, task.id))
            if events is not None:
                bus.subscribe(events.emit)
        coord = build_coordinator(
            method, models, sandbox, bench.tools(sandbox), config=cfg, domain=bench.domain,
            events=bus,
        )  # fmt: skip
        return await coord.run(task.prompt, trace_path=trace_path)

    return solve


async def _run_task(
    bench: Benchmark,
    method: str,
    task: EvalTask,
    run: int,
    out: Path,
    sandbox: Sandbox,
    solve: Solver,
) -> dict[str, Any] | None:
    key = task_key(run, task.id)
    rel = Path("traces") / f"run{run}" / f"{_safe(task.id)}.jsonl"
    trace_path = out / rel
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    trace_path.unlink(missing_ok=True)  # a previous, unfinished attempt of this task
    start = time.monotonic()

    def errored(error: str, kind: str, tb: str = "") -> None:
        ResultsLog(out / ERRORS).append(
            {"key": key, "task_id": task.id, "run": run, "kind": kind, "error": error,
             "traceback": tb, "trace": str(rel), "at": time.time()}
        )  # fmt: skip
        print(f"task {key} errored, not scored: {error}", file=sys.stderr, flush=True)

    try:
        result = await solve(task, run, trace_path)
        if getattr(result, "error_kind", None) is not None:
            errored(result.error or "infrastructure failure", result.error_kind)
            return None
        score = await bench.score(task, result.answer, sandbox)
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception as e:
        errored(f"{type(e).__name__}: {e}", "exception", traceback.format_exc())
        return None
    usage = result.usage
    total = usage.total
    rec = TaskRecord(
        key=key,
        run=run,
        task_id=task.id,
        benchmark=bench.name,
        method=method,
        status=result.status,
        correct=score.correct,
        verified=result.verified,
        predicted=score.predicted[:4000],
        gold=score.gold,
        score_detail=score.detail,
        iterations=result.iterations,
        retries=result.retries,
        usage={r: u.model_dump() for r, u in usage.roles.items()},
        tokens=total.total_tokens,
        cost=total.cost,
        wall_time_s=round(time.monotonic() - start, 3),
        vf_stats=vf_stats(result.plans),
        vf_calls=vf_calls(result),
        plans=[p.model_dump(mode="json", by_alias=True) for p in result.plans],
        meta={"question_type": task.meta["question_type"]} if "question_type" in task.meta else {},
        trace=str(rel),
        error=result.error,
        fallbacks=len(result.fallback_iterations),
        dropped_vfs=len(result.dropped_vfs),
    )
    return rec.model_dump(mode="json")
