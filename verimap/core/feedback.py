"""What a failed attempt teaches the next one: the coordinator builds a retried node's
`Feedback` (`verimap.base.execution`) from the failed attempt, and the executor renders it into
its prompt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verimap.base.execution import Feedback
from verimap.core.result import AttemptReport


def retry_feedback(
    outputs: dict[str, Any] | None,
    attempts: Sequence[AttemptReport],
    fresh_turns: bool,
    **why: Any,
) -> Feedback:
    """The feedback after the last of a node's `attempts` failed. With `fresh_turns`, every
    second failure of the run leaves the outputs out, so the next attempt starts over."""
    fresh = fresh_turns and sum(not a.passed for a in attempts) % 2 == 0
    return Feedback(previous_outputs=None if fresh else outputs, fresh=fresh, **why)
