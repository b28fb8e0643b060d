"""What a failed attempt teaches the next one: the feedback a retried node gets. The coordinator
builds it from verdicts and the executor renders it into its prompt. What a replan is told is
`verimap.base.failure.FailureContext`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from verimap.base.verdicts import VFVerdict, clip
from verimap.core import prompts
from verimap.core.result import AttemptReport


class Feedback(BaseModel):
    """What a retry is told: its previous outputs and why they failed. A `fresh` retry is told
    only why: it starts over instead of repairing outputs it would stay anchored to."""

    previous_outputs: dict[str, Any] | None = None
    failures: list[VFVerdict] = Field(default_factory=list)
    error: str | None = None
    fresh: bool = False

    def render(self, limit: int = 3000) -> str:
        """Cut to fit a small model's context: each failure gets its share of `limit`."""
        lines = [v.feedback() for v in self.failures]
        if self.error:
            lines.append(f"[attempt error] {self.error}")
        per = max(300, limit // max(1, 2 * len(lines)))
        failures = "\n".join(clip(line, per) for line in lines) or "(no details)"
        if self.fresh:
            return prompts.EXECUTOR_FEEDBACK_FRESH.format(failures=failures)
        return prompts.EXECUTOR_FEEDBACK.format(
            previous=clip(json.dumps(self.previous_outputs, ensure_ascii=False, default=str), 1000),
            failures=failures,
        )


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
