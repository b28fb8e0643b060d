"""Run events: every step of a run is an event, delivered to subscribers and to a JSONL trace.

The events are typed (`verimap.base.event_types`, re-exported here: `events.NodeStart`,
`events.parse_event`, the type names `events.RUN_START`, ...). Traces get shared and attached
to bug reports, so everything emitted is passed through `redact` (`verimap.base.redaction`,
re-exported here) first: API keys never leave the process.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verimap.base.event_types import *  # noqa: F403  (the typed events, re-exported: `ev.NodeStart`)
from verimap.base.event_types import EVENT_TYPES, AnyEvent, Event, RunStart, parse_event
from verimap.base.out_files import TRACE, open_appending
from verimap.base.redaction import REDACTED as REDACTED
from verimap.base.redaction import redact, secret_values

Subscriber = Callable[[AnyEvent], Any]


def _redacted(event: AnyEvent, secrets: list[str]) -> AnyEvent:
    """`event` with its payload passed through `redact`. A typed event is rebuilt only when
    something was masked (rarely): the check is one comparison of two small dicts, and
    rebuilding every event would cost the coordinator a validation per step."""
    data = event.data
    clean = redact(data, secrets)
    if clean == data:
        return event
    if isinstance(event, Event):
        return event.model_copy(update={"data": clean})
    try:
        return type(event).model_validate({**event.wire(), "data": clean})
    except ValueError:  # a masked value no longer fits its field: keep it, untyped
        return Event.model_validate({**event.wire(), "data": clean})


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

    def emit(self, event: AnyEvent) -> AnyEvent:
        if isinstance(event, RunStart):
            self._secrets = secret_values()
        event = _redacted(event, self._secrets)
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
    """A subscriber that appends each event as one JSON line (redacted again on write). The
    file is created, or else must be a verimap trace (`out_files.TRACE`): an `OutFileError`
    otherwise, and for a symlink."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open_appending(self.path, TRACE)
        self._lock = threading.Lock()
        self._secrets = secret_values()

    def __call__(self, event: AnyEvent) -> None:
        line = json.dumps(redact(event.wire(), self._secrets), default=str)
        with self._lock:
            if not self._f.closed:
                self._f.write(line + "\n")
                self._f.flush()

    def close(self) -> None:
        with self._lock:
            self._f.close()


def read_trace(path: str | os.PathLike[str]) -> list[AnyEvent]:
    """A trace's events, read strictly: a line of a known type must validate as it
    (`parse_event`), one of another type is a generic `Event`, and the first line that is
    neither raises (a `ValueError`). `verimap.observe.trace_files` reads traces leniently."""
    with open(path, encoding="utf-8") as f:
        return [_strict(json.loads(line)) for line in f if line.strip()]


def _strict(obj: Any) -> AnyEvent:
    if isinstance(obj, dict) and obj.get("type") in EVENT_TYPES:
        return parse_event(obj)
    return Event.model_validate(obj)
