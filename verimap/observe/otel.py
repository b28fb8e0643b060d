"""OpenTelemetry spans of a run, built from its events.

`OtelSpans` is an `EventBus` subscriber: the engine only emits events, and this module alone
imports OpenTelemetry (the `otel` extra), so `import verimap` never needs it. A run becomes
run > iteration > node > attempt > model call / VF / tool call; planner calls sit in their
iteration. Model calls follow the GenAI semantic conventions (`gen_ai.*`, span name
`chat MODEL`); the rest is under `verimap.*`.

Model calls, tool calls and verdicts are reported when they end, so their spans start at the
event's time less the duration the event carries. Every attribute value, span name and status
passes through `redaction.redact`, as trace lines do, and no message text is recorded: the
events carry none.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from verimap.base import events as ev
from verimap.base.env import getenv
from verimap.base.errors import VerimapError
from verimap.base.events import AnyEvent
from verimap.base.redaction import redact, secret_values
from verimap.base.usage import Usage
from verimap.base.verdicts import clip
from verimap.base.version import __version__

# Longer texts (plans, outputs, tracebacks) are cut, keeping head and tail: collectors drop
# or truncate huge attributes anyway, and the JSONL trace keeps the whole.
TEXT_LIMIT = 4000
_FAILED_RUN = ("failed", "budget_exhausted", "interrupted")
_GOOD_NODE = ("verified", "reused")
_GOOD_VF = ("PASS", "SKIPPED")
# Attribute keys outside these namespaces get `verimap.` in front.
_NAMESPACES = ("gen_ai.", "server.", "error.", "verimap.")


class OtelSetupError(VerimapError, RuntimeError):
    """The exporter the OTEL_EXPORTER_OTLP_* variables ask for cannot be made."""


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _at(e: AnyEvent) -> float:
    """When an event happened: a line of a foreign trace may have no time (then: now)."""
    return e.ts if e.ts is not None else time.time()


def _started(e: AnyEvent) -> float:
    """When the step an event reports began (model and tool calls, verdicts arrive at its end)."""
    took = None
    if isinstance(e, ev.ModelCall | ev.ToolCall):
        took = e.duration_s
    elif isinstance(e, ev.VfVerdict):
        took = e.verify_s
    return _at(e) - took if took is not None and took > 0 else _at(e)


@dataclass
class _Run:
    root: Span
    secrets: list[str]
    iteration: int | None = None
    iterations: dict[int, Span] = field(default_factory=dict)
    nodes: dict[tuple[int | None, str], Span] = field(default_factory=dict)
    attempts: dict[tuple[int | None, str, int], Span] = field(default_factory=dict)


class OtelSpans:
    """An `EventBus` subscriber that turns each run's events into spans of `tracer` (the
    global tracer provider's by default). A run's span is a child of the span current where
    `Coordinator.run` was called, so runs nest under an application's own spans."""

    def __init__(self, tracer: trace.Tracer | None = None, *, text_limit: int = TEXT_LIMIT):
        self.tracer = tracer or trace.get_tracer("verimap", __version__)
        self.text_limit = text_limit
        self._runs: dict[str, _Run] = {}

    def __call__(self, e: AnyEvent) -> None:
        run = self._runs.get(e.run_id) or self._start_run(e)
        if e.iteration is not None and e.iteration != run.iteration:
            self._enter_iteration(run, e.iteration, _started(e))
        handler = getattr(self, f"_on_{e.type}", None)
        if handler is not None and not isinstance(e, ev.Event):
            handler(run, e)
        else:
            self._parent(run, e).add_event(e.type, self._attrs(run, e.data), _ns(_at(e)))

    def close(self) -> None:
        """End the spans of runs that never finished (an interrupted eval), so they are sent."""
        for run_id in list(self._runs):
            self(ev.Finish(run_id=run_id, status="interrupted"))

    # -- spans ----------------------------------------------------------------
    def _start_run(self, e: AnyEvent) -> _Run:
        root = self.tracer.start_span(
            "verimap run", attributes={"verimap.run_id": e.run_id}, start_time=_ns(_at(e))
        )
        run = self._runs[e.run_id] = _Run(root, secret_values())
        return run

    def _enter_iteration(self, run: _Run, iteration: int, at: float) -> None:
        if run.iteration is not None:
            self._close_iteration(run, run.iteration, at)
        run.iteration = iteration
        run.iterations[iteration] = self._child(
            run, run.root, f"iteration {iteration}", at, {"verimap.iteration": iteration}
        )

    def _close_iteration(self, run: _Run, iteration: int, at: float) -> None:
        """End an iteration with whatever it still had running (nodes cancelled when another
        failed, or stopped by a budget)."""
        for attempt in [k for k in run.attempts if k[0] == iteration]:
            self._cancel(run.attempts.pop(attempt), at)
        for node in [k for k in run.nodes if k[0] == iteration]:
            self._cancel(run.nodes.pop(node), at)
        if (span := run.iterations.pop(iteration, None)) is not None:
            span.end(_ns(at))

    @staticmethod
    def _cancel(span: Span, at: float) -> None:
        span.set_attribute("verimap.status", "cancelled")
        span.end(_ns(at))

    def _child(
        self,
        run: _Run,
        parent: Span,
        name: str,
        start: float,
        attributes: Mapping[str, Any],
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span:
        return self.tracer.start_span(
            redact(name, run.secrets),
            context=trace.set_span_in_context(parent),
            kind=kind,
            attributes=self._attrs(run, attributes),
            start_time=_ns(start),
        )

    def _parent(self, run: _Run, e: AnyEvent) -> Span:
        """The innermost open span an event belongs to."""
        it = e.iteration
        if e.node_id is not None:
            if e.attempt is not None and (a := run.attempts.get((it, e.node_id, e.attempt))):
                return a
            if n := run.nodes.get((it, e.node_id)):
                return n
        if it is not None and (i := run.iterations.get(it)):
            return i
        return run.root

    def _instant(self, run: _Run, e: AnyEvent, name: str, attributes: Mapping[str, Any]) -> Span:
        """A span for a step that ended when `e` was emitted."""
        return self._child(run, self._parent(run, e), name, _started(e), attributes)

    # -- attributes -----------------------------------------------------------
    def _attrs(self, run: _Run, attributes: Mapping[str, Any]) -> dict[str, AttributeValue]:
        out: dict[str, AttributeValue] = {}
        for k, v in attributes.items():
            value = self._value(run, v)
            if value is not None:
                out[k if k.startswith(_NAMESPACES) else f"verimap.{k}"] = value
        return out

    def _value(self, run: _Run, v: Any) -> AttributeValue | None:
        """A value an attribute can hold, redacted then clipped (redacting first, so a cut never
        leaves part of a secret unrecognised)."""
        if v is None or isinstance(v, bool | int | float):
            return v
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return [clip(redact(x, run.secrets), self.text_limit) for x in v]
        if not isinstance(v, str):
            v = json.dumps(redact(v, run.secrets), default=str, ensure_ascii=False)
        return clip(redact(v, run.secrets), self.text_limit)

    @staticmethod
    def _fail(span: Span, description: str) -> None:
        span.set_status(Status(StatusCode.ERROR, redact(description)[:500]))

    # -- events ---------------------------------------------------------------
    def _on_run_start(self, run: _Run, e: ev.RunStart) -> None:
        run.root.set_attributes(self._attrs(run, {"task": e.task, "config": e.config}))

    def _on_plan(self, run: _Run, e: ev.Plan) -> None:
        nodes = e.plan.get("nodes")
        ids = (
            [str(n.get("id")) for n in nodes if isinstance(n, dict)]
            if isinstance(nodes, list)
            else []
        )
        span = self._parent(run, e)
        span.set_attributes(self._attrs(run, {"plan.nodes": ids, "plan": e.plan}))

    def _on_node_start(self, run: _Run, e: ev.NodeStart) -> None:
        assert e.node_id is not None
        parent = run.iterations.get(e.iteration or 0, run.root)
        run.nodes[(e.iteration, e.node_id)] = self._child(
            run,
            parent,
            f"node {e.node_id}",
            _at(e),
            {"node_id": e.node_id, "instruction": e.instruction, "inputs": e.inputs},
        )

    def _on_node_reused(self, run: _Run, e: ev.NodeReused) -> None:
        span = self._instant(
            run,
            e,
            f"node {e.node_id}",
            {"node_id": e.node_id, "status": "reused", "outputs": e.outputs},
        )
        span.end(_ns(_at(e)))

    def _on_attempt(self, run: _Run, e: ev.Attempt) -> None:
        assert e.node_id is not None and e.attempt is not None
        parent = run.nodes.get((e.iteration, e.node_id)) or self._parent(run, e)
        run.attempts[(e.iteration, e.node_id, e.attempt)] = self._child(
            run, parent, f"attempt {e.attempt}", _at(e), {"attempt": e.attempt}
        )

    def _on_model_call(self, run: _Run, e: ev.ModelCall) -> None:
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": e.provider,
            "gen_ai.request.model": e.model,
            "gen_ai.response.model": e.response_model or None,
            "gen_ai.output.type": e.output_type,
            "gen_ai.request.temperature": e.temperature,
            "gen_ai.request.top_p": e.top_p,
            "gen_ai.request.max_tokens": e.max_tokens,
            "gen_ai.usage.input_tokens": e.prompt_tokens,
            "gen_ai.usage.output_tokens": e.completion_tokens,
            "gen_ai.usage.cache_read.input_tokens": e.cached_tokens,
            "gen_ai.response.finish_reasons": [e.finish_reason] if e.finish_reason else None,
            "server.address": e.server_address,
            "server.port": e.server_port,
            "error.type": e.error_type,
            "verimap.role": e.role,
            "verimap.cost_usd": e.cost,
            "verimap.tool_calls": e.tool_calls,
        }
        span = self._child(
            run, self._parent(run, e), f"chat {e.model}", _started(e), attrs, SpanKind.CLIENT
        )
        if e.error:
            self._fail(span, str(self._value(run, e.error)))
        span.end(_ns(_at(e)))

    def _on_tool_call(self, run: _Run, e: ev.ToolCall) -> None:
        span = self._instant(
            run,
            e,
            f"execute_tool {e.tool}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": e.tool,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": e.arguments,
                "gen_ai.tool.call.result": e.result,
            },
        )
        span.end(_ns(_at(e)))

    def _on_vf_verdict(self, run: _Run, e: ev.VfVerdict) -> None:
        span = self._instant(
            run,
            e,
            f"vf {e.name}",
            {
                "vf.name": e.name,
                "vf.type": e.vf_type,
                "vf.outcome": e.outcome,
                "vf.message": e.message,
                "vf.explanation": e.explanation,
                "vf.traceback": e.traceback,
                "vf.weight": e.weight,
            },
        )
        if e.outcome not in _GOOD_VF:
            self._fail(span, f"{e.outcome}: {self._value(run, e.message)}")
        span.end(_ns(_at(e)))

    def _on_attempt_result(self, run: _Run, e: ev.AttemptResult) -> None:
        assert e.node_id is not None and e.attempt is not None
        span = run.attempts.pop((e.iteration, e.node_id, e.attempt), None)
        if span is None:
            return
        span.set_attributes(
            self._attrs(
                run,
                {
                    "passed": e.passed,
                    "score": e.score,
                    "error": e.error,
                    "outputs": e.outputs,
                },
            )
        )
        if not e.passed:
            self._fail(span, str(self._value(run, e.error or "verification failed")))
        span.end(_ns(_at(e)))

    def _on_node_finish(self, run: _Run, e: ev.NodeFinish) -> None:
        assert e.node_id is not None
        for key in [k for k in run.attempts if k[:2] == (e.iteration, e.node_id)]:
            self._cancel(run.attempts.pop(key), _at(e))
        span = run.nodes.pop((e.iteration, e.node_id), None)
        if span is None:
            return
        span.set_attributes(self._attrs(run, {"status": e.status, "outputs": e.outputs}))
        if e.status not in _GOOD_NODE:
            self._fail(span, f"node {e.node_id} {e.status}")
        span.end(_ns(_at(e)))

    def _on_finish(self, run: _Run, e: ev.Finish) -> None:
        at = _at(e)
        if run.iteration is not None:
            self._close_iteration(run, run.iteration, at)
        for span in [*run.attempts.values(), *run.nodes.values(), *run.iterations.values()]:
            self._cancel(span, at)
        total = e.usage.total if e.usage is not None else Usage()
        run.root.set_attributes(
            self._attrs(
                run,
                {
                    "status": e.status,
                    "error": e.error,
                    "error_kind": e.error_kind,
                    "final_output": e.final_output,
                    "iterations": e.iterations,
                    "retries": e.retries,
                    "wall_time_s": e.wall_time_s,
                    "usage.calls": total.calls,
                    "usage.input_tokens": total.prompt_tokens,
                    "usage.output_tokens": total.completion_tokens,
                    "usage.cost_usd": total.cost,
                },
            )
        )
        if e.status in _FAILED_RUN:
            self._fail(run.root, str(self._value(run, e.error or e.status)))
        run.root.end(_ns(at))
        del self._runs[e.run_id]


def otlp_exporter() -> SpanExporter:
    """The OTLP span exporter the standard variables describe (OTEL_EXPORTER_OTLP_ENDPOINT,
    ..._TRACES_ENDPOINT, ..._PROTOCOL, ..._HEADERS, ...), where an empty variable is unset, as
    everywhere in verimap. Default: OTLP over HTTP to http://localhost:4318."""
    protocol = getenv(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    ).strip()
    traces = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError:
            raise OtelSetupError(
                "OTLP over gRPC needs its exporter: pip install opentelemetry-exporter-otlp-proto-grpc"
            ) from None
        return GrpcExporter(endpoint=traces or base)
    if protocol not in ("", "http/protobuf"):
        raise OtelSetupError(
            f"OTLP protocol {protocol!r} is not supported: use http/protobuf or grpc"
        )
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise OtelSetupError(
            "the OTLP exporter is not installed: pip install 'verimap[otel]'"
        ) from None
    if traces is None and base is not None:
        traces = f"{base.rstrip('/')}/v1/traces"
    return OTLPSpanExporter(endpoint=traces)


def otlp_provider(exporter: SpanExporter | None = None) -> TracerProvider:
    """A tracer provider that batches spans to `exporter` (by default `otlp_exporter()`), as
    service `verimap` unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another.
    Call its `shutdown()` at the end, which sends the spans still queued."""
    resource = Resource.create({SERVICE_VERSION: __version__})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "verimap"}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter or otlp_exporter()))
    return provider
