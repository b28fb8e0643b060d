"""What the disputing checks say once they dispute an answer every other verdict passed.

A disputing check (answer agreement, code agreement) fails an answer without showing it wrong:
the answer stands, unconfirmed. The node loop then asks those checks, and only them, which
answer to keep, whether a retry could still be confirmed, and what the votes were; it knows
these questions, never a check by name. Each check answers from what the run's context
remembers of its ballot, so without a context none can.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from verimap.base.plan import Node
from verimap.base.verdicts import VerificationReport
from verimap.checks.base import Check, Chooser, Settler, Tallier

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

_T = TypeVar("_T")


class Disputing:
    """The disputing checks among a verifier's checks."""

    def __init__(self, checks: Sequence[Check]) -> None:
        self.checks = [c for c in checks if c.disputes]

    def of(self, report: VerificationReport) -> list[str] | None:
        """The checks that disputed an answer every other verdict passed (None if something
        else failed it, or nothing did)."""
        names = [v.name for v in report.failures]
        disputing = {c.name for c in self.checks}
        if names and all(v.type == "check" and v.name in disputing for v in report.failures):
            return names
        return None

    def _ask(
        self, protocol: type, ask: Callable[[Any], _T | None], ctx: RunContext | None
    ) -> _T | None:
        if ctx is None:
            return None
        found = (ask(c) for c in self.checks if isinstance(c, protocol))
        return next((x for x in found if x is not None), None)

    def choose(
        self, node: Node, candidates: list[dict[str, Any]], ctx: RunContext | None
    ) -> dict[str, Any] | None:
        """The answer a check keeps when no attempt was confirmed, if one knows."""
        return self._ask(Chooser, lambda c: c.choose(node, candidates, ctx), ctx)

    def tally(self, ctx: RunContext | None) -> str | None:
        """The votes behind a kept unconfirmed answer, if a check cast any."""
        return self._ask(Tallier, lambda c: c.tally(ctx), ctx)

    def settled(self, node: Node, ctx: RunContext | None) -> str | None:
        """Why retrying the node is futile, if a check can tell."""
        return self._ask(Settler, lambda c: c.settled(node, ctx), ctx)
