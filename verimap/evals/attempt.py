"""One try at one task: solve it, score it, and describe what it leaves behind.

An `Attempt` is plain data (a result record, or the line for `errors.jsonl`), written by
nobody here. The local runner and a cluster worker both produce attempts with
`attempt_task`; only the process that owns the run directory appends them, which is what
keeps a task from being written twice however many processes solve tasks.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from verimap.base.events import EventBus
from verimap.base.out_files import file_name
from verimap.base.plan import LLMVF, CheckVF, PythonVF
from verimap.base.protocols import Sandbox
from verimap.base.verdicts import SKIPPED
from verimap.evals.tasksets import Benchmark, EvalTask

if TYPE_CHECKING:
    from verimap.planning.demos import DemoPool

# (task, run index, trace path) -> RunResult
Solver = Callable[[EvalTask, int, Any], Awaitable[Any]]


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


@dataclass
class Attempt:
    """A scored `record` or an infrastructure `error` line, never both. `trace` carries the
    trace's text when the task ran where the run directory is not (None: already in place);
    `worker` names where it ran, for the summary of a cluster run."""

    key: str
    record: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    trace: str | None = None
    worker: str = ""


def task_key(run: int, task_id: str) -> str:
    return f"r{run}/{task_id}"


def trace_rel(run: int, task_id: str) -> Path:
    """Where a task's trace lives, relative to the run directory."""
    return Path("traces") / f"run{run}" / f"{file_name(task_id)}.jsonl"


def vf_stats(plans: list[Any]) -> dict[str, int]:
    """Counts and total lengths (characters) of Python and NL VFs, and the count of named
    checks (`check`), over all plans of a run."""
    s = {
        "plans": 0,
        "nodes": 0,
        "python": 0,
        "python_chars": 0,
        "llm": 0,
        "llm_chars": 0,
        "check": 0,
    }
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
                elif isinstance(vf, CheckVF):
                    s["check"] += 1
    return s


def vf_calls(result: Any) -> dict[str, int]:
    """Python VFs run and natural-language criteria judged, over every attempt of the run.

    Counted from the verdicts in the run's node reports, so a judge criterion skipped after a
    Python VF failed is not a call, while one judged in a batch with others is. The vacuity
    probes before a plan runs are not verification of an answer and are left out. Built-in
    checks of the executor's work (`check`) are counted when they ran."""
    calls = {"python": 0, "llm": 0}
    for rep in result.nodes.values():
        for v in rep.verdicts:
            if v.outcome != SKIPPED:
                calls[v.type] = calls.get(v.type, 0) + 1
    return calls


def record_meta(task: EvalTask, result: Any) -> dict[str, Any]:
    """What a record keeps beside its fields: the task's question type (MultiHopRAG) and the
    answer's confidence when the method gives one (self-consistency's vote share)."""
    meta: dict[str, Any] = {}
    if "question_type" in task.meta:
        meta["question_type"] = task.meta["question_type"]
    if (confidence := getattr(result, "confidence", None)) is not None:
        meta["confidence"] = confidence
    return meta


def error_line(
    key: str, task_id: str, run: int, kind: str, error: str, rel: Path, tb: str = ""
) -> dict[str, Any]:
    return {
        "key": key,
        "task_id": task_id,
        "run": run,
        "kind": kind,
        "error": error,
        "traceback": tb,
        "trace": str(rel),
        "at": time.time(),
    }


async def attempt_task(
    bench: Benchmark,
    method: str,
    task: EvalTask,
    run: int,
    trace_path: Path,
    sandbox: Sandbox,
    solve: Solver,
) -> Attempt:
    """Solve and score `task`, its trace going to `trace_path`. A failure of the model
    endpoint, the sandbox or the scorer is an error attempt, never a wrong answer."""
    key = task_key(run, task.id)
    rel = trace_rel(run, task.id)
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    trace_path.unlink(missing_ok=True)  # a previous, unfinished attempt of this task
    start = time.monotonic()

    def errored(error: str, kind: str, tb: str = "") -> Attempt:
        return Attempt(key, error=error_line(key, task.id, run, kind, error, rel, tb))

    try:
        result = await solve(task, run, trace_path)
        if getattr(result, "error_kind", None) is not None:
            return errored(result.error or "infrastructure failure", result.error_kind)
        score = await bench.score(task, result.answer, sandbox)
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception as e:
        return errored(f"{type(e).__name__}: {e}", "exception", traceback.format_exc())
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
        meta=record_meta(task, result),
        trace=str(rel),
        error=result.error,
        fallbacks=len(result.fallback_iterations),
        dropped_vfs=len(result.dropped_vfs),
    )
    return Attempt(key, record=rec.model_dump(mode="json"))


def method_solver(
    bench: Benchmark,
    method: str,
    models: dict[str, Any] | None,
    sandbox: Sandbox,
    cfg: Any,
    events: EventBus | None = None,
    watch: Callable[[str], EventBus] | None = None,
    samples: int | None = None,
    demos: DemoPool | None = None,
) -> Solver:
    """Solve with `method`'s runner (a coordinator, or a baseline taking `samples`): built per task, since each task gets fresh tools
    (the programming workspace holds per-task state), over the same models and sandbox.
    `events` hears every task's run (e.g. OpenTelemetry); `watch(key)`, when given, is the
    event bus for the run of the task with that key (the live board), and passes it on.
    `demos`: the pool `cfg` names, read once when the eval started; every task's planner is
    shown it (`build(demos=...)`), and the file is not read again."""
    from verimap.wiring import build

    if models is None:
        raise ValueError("no models given: pass models (planner, executor, judge) or a solver")
    bench.use_models(models)  # a judge scorer asks the run's judge

    async def solve(task: EvalTask, run: int, trace_path: Path) -> Any:
        bus = events
        if watch is not None:
            bus = watch(task_key(run, task.id))
            if events is not None:
                bus.subscribe(events.emit)
        coord = build(
            models,
            sandbox,
            bench.tools(sandbox),
            cfg,
            method=method,
            domain=bench.domain,
            events=bus,
            samples=samples,
            demos=demos,
        )
        return await coord.run(task.prompt, trace_path=trace_path)

    return solve
