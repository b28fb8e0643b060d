"""A task's wall-clock budget in an eval (`verimap eval --time-limit`).

A task's run stops at the budget, as a run stops at its own (`Budget.timeout_s`), and is scored
as it stands: `budget_exhausted`, wrong unless its answer is right, with its usage and trace.
Whatever is not such a run (scoring, a cluster's task, a custom solver) gets a tenth more, at
least a minute (`backstop`), before the task is cancelled and recorded as a `budget_exhausted`
failure with no answer. Either way a slow task is a failure of the method that says why:
counted, never dropped from the scores (as an error line would be) nor run again on a resume.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from verimap.base.accounting import Budget
from verimap.config import RunConfig
from verimap.evals.attempt import Attempt, TaskRecord, task_key
from verimap.evals.tasksets import EvalTask

# (task, run index) -> the attempt: `verimap.evals.runner.Dispatch`
Solve = Callable[[EvalTask, int], Awaitable[Attempt]]


def within(cfg: RunConfig, limit: float | None) -> RunConfig:
    """`cfg` with its runs' wall-clock budget no longer than `limit` seconds (None: as it is)."""
    own = cfg.budget.timeout_s
    if limit is None or (own is not None and own <= limit):
        return cfg
    budget = Budget.model_validate(
        {**cfg.budget.model_dump(exclude_unset=True), "timeout_s": limit}
    )
    return cfg.model_copy(update={"budget": budget})


def backstop(limit: float) -> float:
    """When a task that its run's budget did not end is ended: a tenth more, at least a minute."""
    return limit + max(60.0, limit / 10)


def time_limited(solve: Solve, limit: float, benchmark: str, method: str) -> Solve:
    """`solve`, with a task still unsolved `backstop(limit)` seconds after it started cancelled
    and recorded as a failure that says why."""

    async def solve_within(task: EvalTask, run: int) -> Attempt:
        start = time.monotonic()
        deadline = asyncio.timeout(backstop(limit))
        try:
            async with deadline:
                return await solve(task, run)
        except TimeoutError:
            if not deadline.expired():
                raise
        key = task_key(run, task.id)
        rec = TaskRecord(
            key=key,
            run=run,
            task_id=task.id,
            benchmark=benchmark,
            method=method,
            status="budget_exhausted",
            correct=False,
            verified=False,
            gold=task.gold,
            wall_time_s=round(time.monotonic() - start, 3),
            error=f"the task ran past its time limit of {limit:g} s (--time-limit) and was ended",
        )
        return Attempt(key, record=rec.model_dump(mode="json"))

    return solve_within
