"""Run a benchmark with a method, concurrently, losing nothing when interrupted.

Each finished task is one JSON line appended to `DIR/results.jsonl` and fsynced
before the next is counted, so a crash or Ctrl-C can cost at most the tasks still
running. On `--resume` the log is read back (a torn last line from a kill is cut
off, a complete one is kept), finished tasks are skipped, and a lock file keeps two
runs from writing the same directory at once; together these mean no task is lost or
counted twice.

A directory is written only once it is known to be this run's (`verimap.evals.run_dir`).

Tasks that fail for infrastructure reasons (a model endpoint that fails past its
retries, a sandbox that cannot run, a task the data or the scorer cannot handle)
are never scored: they are logged to `DIR/errors.jsonl` instead, and since they
are not in the results a resume retries them.

A task past its wall-clock budget (`task_time_limit`) ends as a scored failure
(`verimap.evals.task_budget`), and the tasks finished before it are kept.

Only this process writes the directory. Tasks may be solved elsewhere (`dispatch`: a
cluster's workers, see `verimap.evals.cluster`) and come back as `Attempt`s, which the
runner stores as it stores its own.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from verimap.base.events import EventBus
from verimap.base.protocols import Model, Sandbox
from verimap.config import RunConfig
from verimap.evals.attempt import (
    Attempt,
    Solver,
    TaskRecord,
    attempt_task,
    method_solver,
    task_key,
    trace_rel,
    vf_calls,
    vf_stats,
)
from verimap.evals.run_dir import (
    CONFIG,
    ERRORS,
    MARK,
    RESULTS,
    ResultsLog,
    RunDirError,
    check_run_dir,
    dir_lock,
    is_eval_config,
    store,
    unscored_errors,
    write_config,
)
from verimap.evals.sampling import SelectionError, select_tasks, selection_record
from verimap.evals.task_budget import time_limited, within
from verimap.evals.tasksets import Benchmark, EvalTask
from verimap.methods.presets import METHODS, get_method
from verimap.planning.demos import DemoPool, read_pool
from verimap.wiring import resolve, runs_locally

if TYPE_CHECKING:
    from rich.console import Console

    from verimap.observe.live_view import BoardView

__all__ = [
    "CONFIG",
    "ERRORS",
    "MARK",
    "RESULTS",
    "Attempt",
    "Dispatch",
    "EvalOutcome",
    "ResultsLog",
    "RunDirError",
    "Tally",
    "TaskRecord",
    "check_run_dir",
    "dir_lock",
    "is_eval_config",
    "preflight",
    "run_eval",
    "task_key",
    "unscored_errors",
    "vf_calls",
    "vf_stats",
]


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
    # Finished tasks per worker, when workers elsewhere solved them (a cluster run).
    workers: Counter[str] = field(default_factory=Counter)


# (task, run index) -> the attempt, solved wherever the dispatcher sends it
Dispatch = Callable[[EvalTask, int], Awaitable[Attempt]]


def _selection(
    bench: Benchmark,
    limit: int | str | None,
    sample: int | str | None,
    seed: int | None,
    ids: Sequence[str] | None = None,
    extra: DemoPool | None = None,
    demos_file: str | None = None,
) -> tuple[list[EvalTask], dict[str, Any]]:
    """The tasks to run, and what config.json keeps of how they were chosen (a sample, a range,
    ids) and of a custom benchmark's source, for a resume to check. A seeded sample is drawn
    from the tasks the benchmark does not hold out (`Benchmark.held_out`, with `extra`, the
    pool the planner shows, read from `demos_file` when the run started), by its `stratum`; a
    range or ids that take a task whose plan that pool holds are refused."""
    everything = bench.tasks()
    held = bench.held_out(extra) if sample is not None else frozenset()
    pool = [t for t in everything if t.id not in held]
    picked: dict[str, Any] = dict(limit=limit, sample=sample, seed=seed, ids=ids)
    tasks = select_tasks(pool, **picked, stratum=bench.stratum)
    shown = sorted(t.id for t in tasks if t.id in bench.shown(extra))
    if shown:
        raise SelectionError(
            f"{len(shown)} of the tasks chosen ({', '.join(shown[:5])}"
            f"{', ...' if len(shown) > 5 else ''}) have their plans in the demonstrations file "
            f"{demos_file}: the planner would be shown them; choose other tasks, or draw with "
            "--sample, which leaves them out"
        )
    chosen = selection_record(tasks, len(pool), **picked)
    if held:
        chosen["held_out"] = len(everything) - len(pool)
    if sample is not None and bench.stratum:
        chosen["stratified_by"] = bench.stratum
    if source := bench.identity():
        chosen["benchmark_source"] = source
    return tasks, chosen


def _start(
    bench: Benchmark,
    method: str,
    config: RunConfig | dict[str, Any] | None,
    demos: DemoPool | None,
    local: bool = False,
) -> tuple[RunConfig, DemoPool | None]:
    """A run's config and its pool of demonstrations: `demos` (the pool as read when the run
    started, checked again here) or else the one the config names, read and validated now;
    the run passes it on and never reads the file again. A method's config is resolved
    (`verimap.wiring`); a custom solver's is `config` as given, and its pool only decides
    which tasks a draw leaves out."""
    if method in METHODS:
        settings = resolve(config, method=method, local=local)
        return settings.config, settings.demo_pool(bench.domain, demos)
    cfg = config if isinstance(config, RunConfig) else RunConfig.model_validate(config or {})
    path = cfg.planning.demos_file
    if demos is None and path is not None:
        demos = read_pool(path, bench.domain)
    return cfg, demos


def preflight(
    bench: Benchmark,
    method: str,
    out_dir: str | os.PathLike[str],
    *,
    limit: int | str | None = None,
    sample: int | str | None = None,
    seed: int | None = None,
    sample_ids: Sequence[str] | None = None,
    resume: bool = False,
    config: RunConfig | dict[str, Any] | None = None,
    demos: DemoPool | None = None,
    **ignored: Any,
) -> DemoPool | None:
    """What `run_eval` checks first (its directory, the tasks chosen, the demonstrations
    file), for a caller with costly work to do before it (a model server or a cluster's workers
    to start): refused now rather than after that work. Takes `run_eval`'s keyword arguments
    and ignores those that do not matter here. Returns the pool of demonstrations the config
    names (`demos` when given), read here: the caller hands it to `run_eval` (`demos=`), so
    the eval reads the file once."""
    run_config, demos = _start(bench, method, config, demos)
    _, sampled = _selection(
        bench, limit, sample, seed, sample_ids, demos, run_config.planning.demos_file
    )
    cfg: dict[str, Any] = {"benchmark": bench.name, "method": method, **sampled}
    if method in METHODS:
        cfg["run_config"] = run_config.model_dump(mode="json")
    check_run_dir(Path(out_dir), cfg, resume)
    return demos


def _progress(total: int, enabled: bool, console: Console, board: BoardView | None = None):
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from verimap.observe.live_view import BoardProgress

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
    sandbox: Sandbox | None,
    out_dir: str | os.PathLike[str],
    *,
    runs: int = 1,
    limit: int | str | None = None,
    sample: int | str | None = None,
    seed: int | None = None,
    sample_ids: Sequence[str] | None = None,
    max_concurrency: int = 4,
    resume: bool = False,
    config: RunConfig | dict[str, Any] | None = None,
    progress: bool = True,
    solver: Solver | None = None,
    extra_config: dict[str, Any] | None = None,
    events: EventBus | None = None,
    dispatch: Dispatch | None = None,
    samples: int | None = None,
    task_time_limit: float | None = None,
    demos: DemoPool | None = None,
) -> EvalOutcome:
    """Run `runs` x the first `limit` tasks (or the range `limit` = "A:B"), x a seeded random
    `sample` of them (an int, or "paper": see `paper_sample_size`), or x the tasks with
    `sample_ids`; see the module docstring for the guarantees.

    With a `solver`, `method` may name something that is no preset (a bare-model baseline beside
    the methods): its records, traces and errors then land in the same layout, and its
    `run_config` is `config` as given. `events` hears every task's run (not a custom solver's).

    With a `dispatch`, tasks are solved by whatever it sends them to (`models`, `sandbox`,
    `solver` and `events` are then unused, and the bar shows no live board), and only what it
    returns is written here. `samples`: the k of a method that samples (sc), in config.json.
    `task_time_limit`: seconds each task may take (None: no limit; see the module docstring).
    `demos`: the pool of demonstrations the config names, as read when the eval started
    (`preflight` returns it); None reads it here. Either way it is read once, before the
    tasks are chosen, and that pool is what the draw leaves out and every task's planner is
    shown: the file is not read again."""
    custom = solver is not None and method not in METHODS
    if not custom:
        get_method(method)
    if runs < 1 or max_concurrency < 1:
        raise ValueError("runs and max_concurrency must be >= 1")
    if task_time_limit is not None and not task_time_limit > 0:
        raise ValueError(f"task_time_limit must be a number of seconds > 0, got {task_time_limit}")
    out = Path(out_dir)
    # A bad config or demonstrations file is refused before the directory is touched.
    cfg, demos = _start(bench, method, config, demos, runs_locally(models or {}))
    if dispatch is None and solver is None:  # refused before the directory is touched
        if sandbox is None:
            raise ValueError("no sandbox given: pass a sandbox, a solver or a dispatch")
        if models is None:
            raise ValueError("no models given: pass models (planner, executor, judge) or a solver")
    tasks, sampled = _selection(
        bench, limit, sample, seed, sample_ids, demos, cfg.planning.demos_file
    )
    run_cfg = {
        "benchmark": bench.name,
        "method": method,
        "runs": runs,
        "limit": limit,
        **sampled,
        "data": {"dir": str(bench.source.root), "origin": bench.source.origin},
        "models": {r: getattr(m, "name", "?") for r, m in (models or {}).items()},
        "sandbox": getattr(sandbox, "kind", "?"),
        "run_config": cfg.model_dump(mode="json"),
        **({"samples": samples} if samples is not None else {}),
        **({"task_time_limit": task_time_limit} if task_time_limit is not None else {}),
        **(extra_config or {}),
    }
    check_run_dir(out, run_cfg, resume)  # before the lock file is made in somebody's folder
    with dir_lock(out):
        done = check_run_dir(out, run_cfg, resume)  # again: another run may have written since
        log = ResultsLog(out / RESULTS)
        log.load(repair=True)
        if log.torn_line is not None:
            print(
                f"warning: {log.path}:{log.torn_line}: a torn last line (a run killed while "
                "writing it) was dropped; its task runs again",
                file=sys.stderr,
                flush=True,
            )
        write_config(out, run_cfg)
        pending = [(r, t) for r in range(runs) for t in tasks if task_key(r, t.id) not in done]
        tally = Tally(total=runs * len(tasks))
        mine = {task_key(r, t.id) for r in range(runs) for t in tasks}
        for k, rec in done.items():
            if k in mine:
                tally.add(rec)
        tally.skipped = tally.done
        if pending and dispatch is None:
            bench.prepare()
        from rich.markup import escape  # the bar's description is markup

        from verimap.observe import live_view  # rich loads only when an eval runs
        from verimap.observe.live import clean

        console = live_view.stderr_console()
        # The tasks in flight, drawn under the bar; only where the bar itself redraws (and
        # where the runs' events are: not those of a cluster's workers).
        live = progress and solver is None and dispatch is None and live_view.is_live(console)
        board = live_view.BoardView() if live else None
        watch = board.bus if board is not None else None
        if dispatch is None:
            if solver is None:
                solver = method_solver(
                    bench,
                    method,
                    models,
                    cast(Sandbox, sandbox),
                    within(cfg, task_time_limit),
                    events,
                    watch,
                    samples,
                    demos,
                )
            # A custom solver may need no sandbox (the bare model); scoring GSM8K or QA needs
            # none either, and HumanEval's scorer fails its tasks as errors without one.
            dispatch = _local(bench, method, out, cast(Sandbox, sandbox), solver)
        run_one: Dispatch = dispatch
        if task_time_limit is not None:
            run_one = time_limited(dispatch, task_time_limit, bench.name, method)
        sem = asyncio.Semaphore(max_concurrency)
        outcome = EvalOutcome(out, tally)
        with _progress(tally.total, progress, console, board) as bar:
            pid = bar.add_task(
                escape(clean(f"{bench.name}/{method}")),
                total=tally.total,
                completed=tally.done,
                acc="-",
                tok=0,
                cost="0.0000",
            )

            def refresh() -> None:
                bar.update(
                    pid,
                    completed=tally.done,
                    acc=f"{tally.accuracy:.1%}" if tally.done else "-",
                    tok=tally.tokens,
                    cost=f"{tally.cost:.4f}",
                )

            refresh()

            async def one(run: int, task: EvalTask) -> None:
                async with sem:
                    key = task_key(run, task.id)
                    if board is not None:
                        board.start(key)
                    try:
                        att = await run_one(task, run)
                    finally:
                        if board is not None:
                            board.done(key)
                rec = store(out, log, att, trace_rel(run, task.id))
                if rec is None:
                    tally.errors += 1
                    return
                if att.worker:
                    outcome.workers[att.worker] += 1
                outcome.records.append(rec)
                tally.add(rec)
                refresh()
                if progress and not bar.console.is_terminal:
                    # No live bar in a log file or CI: one line per finished task instead.
                    print(
                        f"[{tally.done}/{tally.total}] {clean(rec['key'], 200)} "
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


def _local(bench: Benchmark, method: str, out: Path, sandbox: Sandbox, solve: Solver) -> Dispatch:
    async def run_here(task: EvalTask, run: int) -> Attempt:
        trace_path = out / trace_rel(run, task.id)
        return await attempt_task(bench, method, task, run, trace_path, sandbox, solve)

    return run_here
