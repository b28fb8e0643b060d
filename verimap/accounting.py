"""Per-role usage ledger and budgets.

Every model call the engine makes goes through `call_model`, which asks the
current run's `Ledger` (a context variable, so concurrent nodes share it without
plumbing) whether the call may start, and records what it cost afterwards, also
when it failed. A budget is checked *before* a call, so a run never starts a call
that would cross a limit.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager

from verimap.config import Budget
from verimap.errors import VerimapError
from verimap.llm.base import Model, ModelError, ModelRequest, ModelResponse
from verimap.usage import Usage, UsageByRole


class BudgetExceeded(VerimapError, RuntimeError):
    """A budget limit stops the run; `limit` names which one."""

    def __init__(self, limit: str, message: str):
        super().__init__(message)
        self.limit = limit


class Ledger:
    """Usage per role for one run, checked against a `Budget`."""

    def __init__(self, budget: Budget | None = None, *, clock=time.monotonic):
        self.budget = budget or Budget()
        self.usage = UsageByRole()
        self.calls_log: list[tuple[str, Usage]] = []
        # Model calls that failed for good, also those a caller turned into something else (a
        # judge's ERROR verdict): a run that then fails did so on infrastructure, not on merit.
        self.faults: list[str] = []
        self._clock = clock
        self.started = clock()

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self.started

    def check(self, role: str = "") -> None:
        """Raise `BudgetExceeded` if one more call would cross a limit."""
        b, total = self.budget, self.usage.total
        if b.max_llm_calls is not None and total.calls + 1 > b.max_llm_calls:
            raise BudgetExceeded(
                "max_llm_calls",
                f"LLM call budget exhausted: {total.calls} of {b.max_llm_calls} calls used",
            )
        if b.max_tokens is not None and total.total_tokens >= b.max_tokens:
            raise BudgetExceeded(
                "max_tokens",
                f"token budget exhausted: {total.total_tokens} of {b.max_tokens} tokens used",
            )
        if b.max_cost is not None and total.cost >= b.max_cost:
            raise BudgetExceeded(
                "max_cost", f"cost budget exhausted: ${total.cost:.4f} of ${b.max_cost:.4f}"
            )
        if b.timeout_s is not None and self.elapsed_s >= b.timeout_s:
            raise BudgetExceeded(
                "timeout_s", f"wall-clock budget exhausted: {self.elapsed_s:.1f}s of {b.timeout_s}s"
            )

    def record(self, role: str, usage: Usage) -> None:
        self.usage.add(role, usage)
        self.calls_log.append((role, usage))


_current: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar(
    "verimap_ledger", default=None
)


def current_ledger() -> Ledger | None:
    return _current.get()


@contextmanager
def use_ledger(ledger: Ledger) -> Iterator[Ledger]:
    """Make `ledger` the one `call_model` charges, in this task and the tasks it starts."""
    token = _current.set(ledger)
    try:
        yield ledger
    finally:
        _current.reset(token)


async def call_model(model: Model, req: ModelRequest) -> ModelResponse:
    """Call `model`, checking the budget first and charging the ledger (for `req.role`) after."""
    ledger = _current.get()
    if ledger is not None:
        ledger.check(req.role)
    try:
        resp = await model.request(req)
    except ModelError as e:
        if ledger is not None:
            ledger.record(req.role, e.usage)
            ledger.faults.append(f"{req.role} model error: {e}")
        raise
    if ledger is not None:
        usage = resp.usage
        if usage.calls == 0:
            usage = usage.model_copy(update={"calls": 1})
        ledger.record(req.role, usage)
    return resp
