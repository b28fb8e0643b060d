"""A run's lifetime, the same for every method: its id, its trace file, its ledger under the
config's budget, its clock, its first and last events, and how whatever ends it early becomes
a `RunResult`.

The coordinator and the baselines (`verimap.methods`) differ in what they do with a task, not
in how a run is kept: a budget must stop them the same way, a dead endpoint must be reported as
infrastructure by both (an eval retries such a task instead of scoring it), and their traces
must start and end alike so that the viewer, the exports and the live view read them all.
"""

from __future__ import annotations

import asyncio
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from verimap.base import events as ev
from verimap.base.accounting import BudgetExceeded, Ledger
from verimap.base.events import AnyEvent, EventBus, JsonlTraceWriter
from verimap.base.model import ModelError
from verimap.base.run_context import RunContext
from verimap.base.sandbox import SandboxUnavailable
from verimap.config import RunConfig
from verimap.core.result import RunResult

# How a method reports a run that ended before its body returned: called with the status and
# the keywords `error` and `error_kind`, it gives the result with whatever the run had so far.
Ending = Callable[..., RunResult]


def new_run_id() -> str:
    """A run id that sorts by start time and does not collide within a second."""
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def _of_run(run_id: str, writer: JsonlTraceWriter, event: AnyEvent) -> None:
    if event.run_id == run_id:
        writer(event)


class RunScope:
    """One run of one task. Made before the run starts, so a method can build its own state
    around `ctx` (the run's context: id, event sink, ledger, settings); `run` then runs the
    method's body inside the run's lifetime."""

    def __init__(
        self,
        task: str,
        config: RunConfig,
        events: EventBus,
        *,
        run_id: str | None = None,
        trace_path: str | Path | None = None,
        trace_dir: str | Path | None = None,
        policies: list[dict[str, Any]] | None = None,
    ):
        self.task = task
        self.config = config
        # The policies the run follows, with their parameters (their `record()`).
        self.policies = policies or []
        self.events = events
        self.run_id = run_id or new_run_id()
        self.ledger = Ledger(config.budget)
        self.ctx = RunContext(run_id=self.run_id, sink=events.emit, ledger=self.ledger)
        if trace_path is None and trace_dir is not None:
            trace_path = Path(trace_dir) / f"{self.run_id}.jsonl"
        self.trace_path = Path(trace_path) if trace_path is not None else None

    async def run(
        self,
        body: Callable[[], Awaitable[RunResult]],
        ending: Ending,
        *,
        start: Mapping[str, Any] | None = None,
        failures: Mapping[type[Exception], str] | None = None,
        faults: Callable[[], list[str]] | None = None,
        at: Callable[[], RunContext] | None = None,
    ) -> RunResult:
        """`body()`'s result, or `ending`'s when the budget, the clock, the model endpoint, the
        sandbox or a bug ends the run first, with usage, wall time and trace path filled in.

        `start`: more data for the RUN_START event (a baseline's method and parameters).
        `failures`: errors of the method that fail the run with that prefix ("planning failed").
        `faults`: what the sandbox could not judge: a run that then fails is blamed on the
        infrastructure, as one is after a model call that failed for good.
        `at`: the context the run's own events are tagged with (the coordinator's current
        iteration); the run's context by default."""
        at = at or (lambda: self.ctx)
        path = self.trace_path
        writer = JsonlTraceWriter(path) if path is not None else None
        # The bus may be shared by runs in progress at once: the trace keeps this run's events.
        unsubscribe = (
            self.events.subscribe(partial(_of_run, self.run_id, writer)) if writer else None
        )
        begun = time.monotonic()
        try:
            config = self.config.model_dump(mode="json")
            at().emit(
                ev.RunStart(
                    task=self.task, config=config, policies=self.policies, **dict(start or {})
                )
            )
            result = await self._guarded(body, ending, failures or {}, at)
            result.blame_infrastructure([*self.ledger.faults, *(faults() if faults else [])])
            if result.status == "budget_exhausted":
                at().emit(ev.BudgetExhausted(error=result.error))
            result.usage = self.ledger.usage.model_copy(deep=True)
            result.wall_time_s = time.monotonic() - begun
            result.trace_path = str(path) if path is not None else None
            at().emit(
                ev.Finish(
                    status=result.status,
                    final_output=result.final_output,
                    error=result.error,
                    error_kind=result.error_kind,
                    iterations=result.iterations,
                    retries=result.retries,
                    usage=result.usage,
                    wall_time_s=result.wall_time_s,
                )
            )
            await self.events.drain()
        finally:
            if unsubscribe:
                unsubscribe()
            if writer:
                writer.close()
        return result

    async def _guarded(
        self,
        body: Callable[[], Awaitable[RunResult]],
        ending: Ending,
        failures: Mapping[type[Exception], str],
        at: Callable[[], RunContext],
    ) -> RunResult:
        timeout = self.config.budget.timeout_s
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await body()
        except Exception as e:  # a bug in a custom component must still yield a report
            if isinstance(e, TimeoutError) and deadline.expired():
                return ending(
                    "budget_exhausted", error=f"wall-clock budget of {timeout}s exhausted"
                )
            return _ended(e, ending, failures, at())


def _ended(
    e: Exception, ending: Ending, failures: Mapping[type[Exception], str], at: RunContext
) -> RunResult:
    """The result of a run that `e` ended."""
    if isinstance(e, BudgetExceeded):
        return ending("budget_exhausted", error=str(e))
    for kind, prefix in failures.items():
        if isinstance(e, kind):
            return ending("failed", error=f"{prefix}: {e}")
    if isinstance(e, ModelError | SandboxUnavailable):
        what = "model error" if isinstance(e, ModelError) else "sandbox unavailable"
        return ending("failed", error=f"{what}: {e}", error_kind="infrastructure")
    tb = "".join(traceback.format_exception(e))
    at.emit(ev.Error(error=f"{type(e).__name__}: {e}", traceback=tb))
    return ending("failed", error=f"internal error: {type(e).__name__}: {e}")


class Runner:
    """What every way of running a task shares (the coordinator, the baselines): the run's
    config, event bus, trace directory and policy records, one scope per run made from them,
    and the blocking wrapper. One place, so a method cannot start its runs differently."""

    def __init__(
        self,
        config: RunConfig | None,
        events: EventBus | None,
        trace_dir: str | Path | None,
        policies: list[dict[str, Any]] | None,
    ):
        self.config = config or RunConfig()
        self.events = events or EventBus()
        self.trace_dir = Path(trace_dir) if trace_dir is not None else None
        # The policies the run follows, with their parameters, for its run_start event.
        self.policies = policies or []

    def scope(
        self, task: str, run_id: str | None = None, trace_path: str | Path | None = None
    ) -> RunScope:
        return RunScope(
            task,
            self.config,
            self.events,
            run_id=run_id,
            trace_path=trace_path,
            trace_dir=self.trace_dir,
            policies=self.policies,
        )

    async def run(
        self, task: str, *, run_id: str | None = None, trace_path: str | Path | None = None
    ) -> RunResult:
        raise NotImplementedError

    def run_sync(self, task: str, **kw: Any) -> RunResult:
        """Blocking wrapper for scripts and notebooks without a running loop."""
        return asyncio.run(self.run(task, **kw))
