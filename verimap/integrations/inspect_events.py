"""A verimap run's events written into an Inspect AI sample's transcript, as they happen.

Each node's work is a span (`node <id>`, type `verimap-node`) inside the run's span: the info
events of its attempts, tool calls and verdicts, and the model events of the calls made for it
(the adapter nests them by the call's purpose, `span_for`). Every other event (the plan, a
replan, the finish with its usage) is an info event in the run's span. Info events carry the
verimap event's envelope (node, iteration, attempt) and payload, with `source`
`verimap/<type>` (`verimap/plan`, `verimap/vf_verdict`, ...), so a log reader can pick them out.

Model calls are not repeated as info events: with the adapter every call is a real model event.
A node span opens and closes in event callbacks, not around a block of code, so `span()` cannot
make it: its begin and end events are appended to the transcript directly.
"""

from __future__ import annotations

import uuid
from typing import Any

from verimap.base.event_types import MODEL_CALL, NODE_FINISH, NODE_REUSED, NODE_START, AnyEvent
from verimap.base.purpose import Purpose
from verimap.integrations import missing_extra

try:
    from inspect_ai.event import Event, InfoEvent, SpanBeginEvent, SpanEndEvent
    from inspect_ai.log import transcript
    from inspect_ai.util import current_span_id
except ModuleNotFoundError as e:
    raise missing_extra(e, "inspect_ai", "inspect") from None

NODE_SPAN = "verimap-node"
SOURCE = "verimap/"
_SKIPPED_KEYS = ("type", "run_id", "ts")


def payload(event: AnyEvent) -> dict[str, Any]:
    """An event's envelope fields that are set, and its payload, as one JSON object."""
    line = event.wire()
    head = {k: v for k, v in line.items() if k not in (*_SKIPPED_KEYS, "data") and v is not None}
    return {**head, **line.get("data", {})}


class TranscriptRecorder:
    """An `EventBus` subscriber for one run, made inside the run's span (see the module
    docstring). `close()` ends the spans of nodes a stopped run left open."""

    def __init__(self) -> None:
        self.transcript = transcript()
        self.run_span = current_span_id()
        self.nodes: dict[str, str] = {}

    def __call__(self, event: AnyEvent) -> None:
        if event.type == MODEL_CALL:
            return
        node = event.node_id
        if event.type == NODE_START and node:
            self._end(node)
            span = uuid.uuid4().hex
            self._append(
                SpanBeginEvent(
                    id=span,
                    parent_id=self.run_span,
                    type=NODE_SPAN,
                    name=f"node {node}",
                    span_id=span,
                )
            )
            self.nodes[node] = span
        where = self.nodes.get(node or "", self.run_span)
        self._append(InfoEvent(source=SOURCE + event.type, data=payload(event), span_id=where))
        if event.type in (NODE_FINISH, NODE_REUSED) and node:
            self._end(node)

    def span_for(self, purpose: Purpose | None) -> str | None:
        """The open span of the node a model call works on, if any."""
        node = getattr(purpose, "node_id", None)
        return self.nodes.get(node) if node else None

    def close(self) -> None:
        for node in list(self.nodes):
            self._end(node)

    def _end(self, node: str) -> None:
        span = self.nodes.pop(node, None)
        if span is not None:
            self._append(SpanEndEvent(id=span, span_id=span))

    def _append(self, event: Event) -> None:
        self.transcript._event(event)  # no public call appends a built event
