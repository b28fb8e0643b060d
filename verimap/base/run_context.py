"""The one context a run passes to its planner, executor and verifier.

A run's components need to know which run, iteration, node and attempt they work for (so
what they report lands in the right place of the trace), and which ledger to charge. Passing that explicitly, rather than through context variables or callbacks
set on the components, keeps two runs in one event loop apart by construction, lets a
component be reused across runs, and makes a test's wiring visible in its call. The context
is immutable: the coordinator derives a child for each iteration and attempt
(`for_iteration`, `for_attempt`) instead of changing the one others hold.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from verimap.base import events as ev
from verimap.base.accounting import Ledger, MeteredModel, ModelCall, metered
from verimap.base.errors import VerimapError
from verimap.base.protocols import Model

EventSink = Callable[[ev.AnyEvent], Any]


def _discard(event: ev.AnyEvent) -> None:
    """The sink of a context made outside a run (a planner tried on its own): nobody listens."""


@dataclass(frozen=True)
class RunContext:
    """Who a step works for and where it reports. Every field has a default, so a component
    can be tried outside a run with `RunContext()` or, to see what it reports,
    `RunContext(sink=events.append)`."""

    run_id: str = ""
    # The plan being run, counting from 1; None before the first plan.
    iteration: int | None = None
    # Where events go: the coordinator's `EventBus.emit` during a run.
    sink: EventSink = _discard
    ledger: Ledger = field(default_factory=Ledger)
    # The node and attempt a step is part of, when it is part of one.
    node_id: str | None = None
    attempt: int | None = None
    # What a component keeps for the rest of the run (a check's independent solutions): one
    # dict shared by the run's context and all its children, so it ends with the run.
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def remember(self, key: str, make: Callable[[], Any]) -> Any:
        """The run's value under `key`, made on first use."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def for_iteration(self, iteration: int | None) -> RunContext:
        return replace(self, iteration=iteration, node_id=None, attempt=None)

    def for_attempt(self, node_id: str | None, attempt: int | None) -> RunContext:
        return replace(self, node_id=node_id, attempt=attempt)

    def emit(self, event: ev.AnyEvent) -> None:
        """Report `event` (`ctx.emit(ev.PlanInvalid(problems=..., reply=...))`), tagged with
        this context's run, iteration, node and attempt."""
        self.sink(
            event.model_copy(
                update={
                    "run_id": self.run_id,
                    "node_id": self.node_id,
                    "iteration": self.iteration,
                    "attempt": self.attempt,
                }
            )
        )

    def model(self, model: Model) -> MeteredModel:
        """`model` as this context's steps must call it: budget-checked and charged to the
        run's ledger, each call reported as a `model_call` event of this node and attempt."""
        return metered(model, self.ledger, on_call=self._heard)

    def _heard(self, call: ModelCall) -> None:
        self.emit(ev.ModelCall(**call.model_dump()))


class MissingContext(VerimapError, TypeError):
    """A planner, executor or verifier whose method takes no `ctx` keyword."""


# The methods the coordinator calls on each component, all with `ctx=`; `repair` only when the
# planner has one.
CALLED_WITH_CTX = {
    "planner": ("plan", "replan", "repair"),
    "executor": ("execute",),
    "verifier": ("verify",),
}


def require_ctx(role: str, component: object) -> None:
    """Raise `MissingContext` when a method the coordinator will call on `component` takes no
    `ctx` keyword. Checked once, when the coordinator is built, so that a planner written as
    `async def plan(self, task)` is named with the fix instead of failing mid-run with a bare
    "unexpected keyword argument" TypeError."""
    for name in CALLED_WITH_CTX[role]:
        method = getattr(component, name, None)
        if method is None:
            continue
        try:
            params = inspect.signature(method).parameters
        except (TypeError, ValueError):  # no signature to read (a builtin): trust it
            continue
        if "ctx" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
            continue
        raise MissingContext(
            f"{role} {type(component).__name__}.{name} takes no `ctx` keyword. The coordinator "
            f"calls it as `{name}(..., ctx=ctx)` with the run's RunContext: add `*, ctx` to its "
            "signature (meter model calls with `ctx.model(model)`, report with `ctx.emit(...)`)."
        )
