"""What the loop asks of the components that do its steps: a `Planner` writes a plan and
rewrites it after a failure, an `Executor` answers a node, a `Verifier` judges an answer.

The loop (`verimap.core`) is typed against these protocols, never against the classes verimap
ships (`verimap.planning.planner.LLMPlanner`, `verimap.core.executor.Executor`,
`verimap.core.verifier.Verifier`), so any object of the right shape takes a step's place. What
a step is told and gives back is on this floor too: the plan (`verimap.base.plan`), an
attempt's feedback and output (`verimap.base.execution`), a replan's `FailureContext`, and the
verification protocol the verifier's checks speak (`verimap.base.verification`). A model's and
a sandbox's protocols are in `verimap.base.protocols`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from verimap.base.execution import ExecutorOutput, Feedback, OnToolCall
from verimap.base.failure import FailureContext
from verimap.base.iotypes import TypeSpec
from verimap.base.messages import Message
from verimap.base.plan import Node, Plan
from verimap.base.run_context import RunContext
from verimap.base.verdicts import VerificationReport
from verimap.base.verification import Disputing


@runtime_checkable
class Planner(Protocol):
    """Write your own: return a `Plan` (use `parse_plan` to validate) from both coroutines.

    `ctx` is required: the coordinator calls both with the run's context, and a planner whose
    methods take no `ctx` is refused when the coordinator is built (`require_ctx`). Outside a
    run, pass `ctx=RunContext()`. A planner that writes no valid plan raises `PlanningError`."""

    async def plan(self, task: str, *, ctx: RunContext) -> Plan: ...

    async def replan(
        self, task: str, previous: Plan, failure: FailureContext, *, ctx: RunContext
    ) -> Plan: ...


class Executor(Protocol):
    """Answers one node at a time, on the values its inputs name."""

    async def execute(
        self,
        node: Node,
        inputs: dict[str, Any],
        feedback: Feedback | None = None,
        context: dict[str, Any] | None = None,
        input_types: Mapping[str, TypeSpec] | None = None,
        on_tool_call: OnToolCall | None = None,
        sample: bool = False,
        *,
        ctx: RunContext,
        final: bool = True,
    ) -> ExecutorOutput:
        """One attempt at `node` on `inputs`: its outputs, or the error that ended it.
        `feedback` is what the previous attempt's failure teaches; `sample` asks for a sampled
        (not greedy) reply; `final` marks the plan's last node."""
        ...


class Verifier(Protocol):
    """Judges one attempt at a node: the plan's VFs and the checks the run adds."""

    async def verify(
        self,
        node: Node,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        *,
        ctx: RunContext,
        task: str | None = None,
        transcript: Sequence[Message] = (),
        final: bool = False,
    ) -> VerificationReport:
        """Every verdict on one attempt at `node`; the attempt passes only if all pass."""
        ...

    @property
    def disputing(self) -> Disputing:
        """The checks that may dispute an answer, and what they say once they have."""
        ...

    async def vacuous_vfs(self, plan: Plan, task: str) -> list[tuple[str, str]]:
        """(node, VF) of every Python VF no answer can fail."""
        ...
