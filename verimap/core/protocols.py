"""What the loop asks of the components that do its steps: an `Executor` answers a node, a
`Verifier` judges an answer. The loop is typed against these protocols, never against the
classes that implement them (`verimap.core.executor`, `verimap.core.verifier`), so any object of
the right shape takes a step's place. The planner's protocol is `verimap.planning.planner.Planner`,
a check's `verimap.checks.base.Check`, a model's and a sandbox's in `verimap.base.protocols`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from verimap.base.iotypes import TypeSpec
from verimap.base.messages import Message
from verimap.base.plan import Node, Plan
from verimap.base.run_context import RunContext
from verimap.base.verdicts import VerificationReport
from verimap.base.verification import Disputing
from verimap.core.agent import OnToolCall
from verimap.core.executor import ExecutorOutput
from verimap.core.feedback import Feedback


class Executor(Protocol):
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
