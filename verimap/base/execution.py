"""One attempt at a node, as the `Executor` protocol (`verimap.base.roles`) speaks of it: what
a retry is told (`Feedback`), what an attempt gives back (`ExecutorOutput`), and the callback
that watches its tool calls (`OnToolCall`). The coordinator builds the feedback from verdicts
(`verimap.core.feedback`); an executor renders it into its prompt. What a replan is told is
`verimap.base.failure.FailureContext`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from verimap.base.messages import AssistantMessage, Message
from verimap.base.verdicts import VFVerdict, clip

# The one output of a text-only executor: its reply as written.
TEXT_OUTPUT = "text"

# (tool, arguments, result, seconds the call took)
OnToolCall = Callable[[str, str, str, float], None]

FEEDBACK = """
This is a retry. Your previous outputs were:
{previous}
They failed verification:
{failures}
Correct the problems."""

# A retry that starts afresh (`RunConfig.execution.fresh_code_retries`): what failed, not the failed code.
FEEDBACK_FRESH = """
This is a new attempt. An earlier solution failed verification:
{failures}
Write a new solution from the start; do not repeat that mistake."""


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
            return FEEDBACK_FRESH.format(failures=failures)
        return FEEDBACK.format(
            previous=clip(json.dumps(self.previous_outputs, ensure_ascii=False, default=str), 1000),
            failures=failures,
        )


class ExecutorOutput(BaseModel):
    """One attempt's end: its outputs, or the error that ended it (`ok` tells which), with the
    steps and tool calls it took and its messages."""

    outputs: dict[str, Any] | None = None
    error: str | None = None
    steps: int = 0
    tool_calls: int = 0
    messages: list[Message] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.outputs is not None

    def reply(self, limit: int = 4000) -> str:
        """What the executor wrote (its reasoning and tool requests), cut to `limit` for the
        trace: a wrong answer that passed its VFs can only be understood from its working."""
        texts = [m.content for m in self.messages if isinstance(m, AssistantMessage) and m.content]
        return clip("\n\n".join(texts), limit)
