"""Run events: every step of a run is an `Event`, delivered to subscribers and to a JSONL trace.

Traces get shared and attached to bug reports, so everything emitted is passed
through `redact` (`verimap.redaction`, re-exported here) first: API keys never leave the process.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from verimap.redaction import REDACTED as REDACTED
from verimap.redaction import redact, secret_values

# Event types, in the order a run emits them.
RUN_START = "run_start"
PLAN = "plan"
PLAN_INVALID = "plan_invalid"
PLAN_FALLBACK = "plan_fallback"
VF_VACUOUS = "vf_vacuous"
PLAN_KEPT = "plan_kept"
NODE_START = "node_start"
NODE_REUSED = "node_reused"
ATTEMPT = "attempt"
TOOL_CALL = "tool_call"
# One model call of any role (planner, executor, judge): what it cost and how it ended, never
# what was said. Emitted when the call ends, inside the attempt that made it, if any.
MODEL_CALL = "model_call"
# A final answer passed its VFs but still needs another attempt to agree with it.
AGREEMENT = "agreement"
# The independent solution a numeric final answer is compared with (RunConfig.cross_check): its
# number and reply, for the trace only (the executor's retry is never shown them).
CROSS_CHECK = "cross_check"
# A baseline method's replies, each cut to a few KB, with the answer read from each.
REPLIES = "replies"
# Self-consistency's vote: each answer, the samples that gave it, and the winner's share.
VOTE = "vote"
VF_VERDICT = "vf_verdict"
ATTEMPT_RESULT = "attempt_result"
RETRY = "retry"
NODE_FINISH = "node_finish"
REPLAN = "replan"
BUDGET = "budget_exhausted"
ERROR = "error"
FINISH = "finish"


class Event(BaseModel):
    type: str
    run_id: str
    ts: float = Field(default_factory=time.time)
    node_id: str | None = None
    iteration: int | None = None
    attempt: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)


Subscriber = Callable[[Event], Any]


class EventBus:
    """Fan-out to subscribers. A subscriber may be sync or async; one that raises is reported
    on stderr-free `errors` and never breaks the run."""

    def __init__(self) -> None:
        self._subs: list[Subscriber] = []
        self.errors: list[str] = []
        self._pending: set[asyncio.Task] = set()
        # Scanning the environment per event would dominate the coordinator's overhead;
        # the secret values are read when the bus is made and again at each run's start.
        self._secrets = secret_values()

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Add a subscriber; returns a function that removes it."""
        self._subs.append(callback)
        return lambda: self._subs.remove(callback)

    def emit(self, event: Event) -> Event:
        if event.type == RUN_START:
            self._secrets = secret_values()
        event = event.model_copy(update={"data": redact(event.data, self._secrets)})
        for cb in list(self._subs):
            try:
                res = cb(event)
                if inspect.isawaitable(res):
                    task = asyncio.ensure_future(res)
                    self._pending.add(task)
                    task.add_done_callback(self._pending.discard)
            except Exception as e:
                self.errors.append(f"subscriber {cb!r} failed on {event.type}: {e}")
        return event

    async def drain(self) -> None:
        """Wait for async subscribers still running."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)


class JsonlTraceWriter:
    """A subscriber that appends each event as one JSON line (redacted again on write)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._secrets = secret_values()

    def __call__(self, event: Event) -> None:
        line = json.dumps(redact(event.model_dump(mode="json"), self._secrets), default=str)
        with self._lock:
            if not self._f.closed:
                self._f.write(line + "\n")
                self._f.flush()

    def close(self) -> None:
        with self._lock:
            self._f.close()


def read_trace(path: str | os.PathLike[str]) -> list[Event]:
    with open(path, encoding="utf-8") as f:
        return [Event.model_validate_json(line) for line in f if line.strip()]
