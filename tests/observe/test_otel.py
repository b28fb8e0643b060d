"""OpenTelemetry spans of real runs (scripted models, in-process sandbox), read back from the
SDK's in-memory exporter, and the `--otel` commands end to end, one of them over real OTLP/HTTP
to a collector stub on the loopback interface."""

import json
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import verimap
from verimap.base import events as ev
from verimap.base.events import REDACTED
from verimap.base.messages import ModelResponse
from verimap.base.usage import Usage
from verimap.cli import main
from verimap.cli import run as run_mod
from verimap.cli.tracing import otel_requested
from verimap.config import Loop, RunConfig, Verify
from verimap.observe import otel
from verimap.observe.otel import OtelSetupError, OtelSpans
from verimap.planning.fixed_planners import TemplatePlanner
from verimap.testing import InProcessSandboxDouble, ScriptedModel, ScriptedWorld, tool_call_reply

ENV_KEY = "sk-test-ENVSECRET-abcdefghijklmnop"
# Key-shaped, in no variable: only its shape can give it away.
OUTPUT_KEY = "sk-proj-OUTPUTSECRET0123456789abcdef"
SAMPLES = Path(__file__).resolve().parents[2] / "datasets"
POSITIVE = {
    "name": "x_pos",
    "type": "python",
    "code": "assert outputs['x'] > 0, 'x must be positive'",
}
SENSIBLE = {"name": "sensible", "type": "llm", "content": "y is a sensible answer"}


def node(id, inputs=("USER_TASK",), outputs=("x",), vfs=()):
    return {
        "id": id,
        "instruction": f"do {id}",
        "inputs": list(inputs),
        "outputs": list(outputs),
        "verification": list(vfs),
    }


# `a` never passes, so the second plan replaces it with `a2`.
PLAN1 = {"nodes": [node("a", vfs=[POSITIVE]), node("b", ["a.x"], ["y"], [SENSIBLE])]}
PLAN2 = {"nodes": [node("a2", vfs=[POSITIVE]), node("b", ["a2.x"], ["y"], [SENSIBLE])]}


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def spans(exporter) -> OtelSpans:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelSpans(provider.get_tracer("test"))


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(s for s in spans if s.context.span_id == span.parent.span_id)


def children(span: ReadableSpan, spans: list[ReadableSpan], prefix: str = "") -> list[ReadableSpan]:
    kids = [s for s in spans if s.parent is not None and s.parent.span_id == span.context.span_id]
    return sorted((s for s in kids if s.name.startswith(prefix)), key=lambda s: s.start_time or 0)


def exported_text(spans: list[ReadableSpan]) -> str:
    """Every string an exporter would send: names, attributes, events, statuses."""
    parts: list[str] = []
    for s in spans:
        parts += [
            s.name,
            s.status.description or "",
            json.dumps(dict(s.attributes or {}), default=str),
        ]
        for e in s.events:
            parts += [e.name, json.dumps(dict(e.attributes or {}), default=str)]
    return "\n".join(parts)


async def test_span_tree_of_a_replanned_run(spans, exporter, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)

    def outputs(nid, k, inputs, prompt):
        return {"a": {"x": -1}, "a2": {"x": 3}}.get(nid, {"y": f"use {OUTPUT_KEY}"})

    world = ScriptedWorld(
        [PLAN1, PLAN2], outputs, judge=lambda nid, c, outs: (True, f"fine; {ENV_KEY} is set")
    )
    bus = verimap.EventBus()
    bus.subscribe(spans)
    config = RunConfig(loop=Loop(max_retries=2, max_iterations=2))
    coordinator = verimap.build(world.models(), InProcessSandboxDouble(), config=config, events=bus)
    r = await coordinator.run(f"Answer with the key {ENV_KEY}")
    assert r.status == "success" and r.iterations == 2 and not bus.errors
    got = list(exporter.get_finished_spans())

    (root,) = [s for s in got if s.parent is None]
    assert root.name == "verimap run" and root.status.status_code == StatusCode.UNSET
    assert root.attributes["verimap.run_id"] == r.run_id
    assert root.attributes["verimap.status"] == "success"
    assert root.attributes["verimap.usage.input_tokens"] == r.usage.total.prompt_tokens
    assert root.attributes["verimap.usage.calls"] == r.usage.total.calls

    it1, it2 = children(root, got)
    assert (it1.name, it2.name) == ("iteration 1", "iteration 2")
    assert [s.name for s in children(it1, got, "node")] == ["node a"]
    assert [s.name for s in children(it2, got, "node")] == ["node a2", "node b"]
    assert it2.attributes["verimap.plan.nodes"] == ("a2", "b")

    (a,) = children(it1, got, "node")
    assert a.status.status_code == StatusCode.ERROR and a.attributes["verimap.status"] == "failed"
    attempts = children(a, got, "attempt")
    assert [s.name for s in attempts] == ["attempt 1", "attempt 2"]
    for attempt in attempts:
        assert attempt.status.status_code == StatusCode.ERROR
        (vf,) = children(attempt, got, "vf")
        assert vf.name == "vf x_pos" and vf.attributes["verimap.vf.outcome"] == "FAIL"
        assert vf.status.status_code == StatusCode.ERROR
        assert "x must be positive" in vf.attributes["verimap.vf.message"]
        assert [c.attributes["verimap.role"] for c in children(attempt, got, "chat")] == [
            "executor"
        ]

    b = children(it2, got, "node b")[0]
    (b1,) = children(b, got, "attempt")
    assert b1.status.status_code == StatusCode.UNSET and b1.attributes["verimap.passed"] is True
    assert [c.attributes["verimap.role"] for c in children(b1, got, "chat")] == [
        "executor",
        "judge",
        "judge",
    ]
    (judged,) = children(b1, got, "vf")
    assert judged.attributes["verimap.vf.type"] == "llm"
    assert judged.attributes["verimap.vf.outcome"] == "PASS"

    # The GenAI conventions on every model call; token counts are the model's own, call by call.
    chats = [s for s in got if s.name.startswith("chat ")]
    assert len(chats) == world.model.calls
    for c in chats:
        assert c.name == "chat scripted-world" and c.kind == SpanKind.CLIENT
        assert c.attributes["gen_ai.operation.name"] == "chat"
        assert c.attributes["gen_ai.provider.name"] == "verimap.scripted"
        assert c.attributes["gen_ai.request.model"] == "scripted-world"
        assert c.attributes["gen_ai.response.model"] == "scripted-world"
        where = parent_of(c, got)
        assert where is not None
        expected = "iteration" if c.attributes["verimap.role"] == "planner" else "attempt"
        assert where.name.startswith(expected)
    assert sorted(
        (c.attributes["gen_ai.usage.input_tokens"], c.attributes["gen_ai.usage.output_tokens"])
        for c in chats
    ) == sorted(
        (u.prompt_tokens, u.completion_tokens) for u in (x.usage for x in world.model.responses)
    )
    assert {c.attributes["gen_ai.output.type"] for c in chats} == {"json", "text"}

    # Every child lies within its parent (1 ms of float rounding allowed).
    for s in got:
        if (p := parent_of(s, got)) is not None:
            assert p.start_time - 1_000_000 <= s.start_time <= s.end_time <= p.end_time + 1_000_000

    # No secret anywhere, though both reached attributes (masked, not dropped).
    text = exported_text(got)
    assert ENV_KEY not in text and OUTPUT_KEY not in text and "ENVSECRET" not in text
    assert "OUTPUTSECRET" not in text
    assert REDACTED in root.attributes["verimap.task"]
    assert REDACTED in b1.attributes["verimap.outputs"]
    assert REDACTED in judged.attributes["verimap.vf.explanation"]


def with_usage(reply: ModelResponse, prompt: int, completion: int, cached: int = 0, finish="stop"):
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)
    return reply.model_copy(update={"usage": usage, "finish_reason": finish})


async def test_tool_calls_and_exact_token_counts(spans, exporter):
    model = ScriptedModel(
        [
            with_usage(
                tool_call_reply("calculator", {"expression": "6*7"}), 120, 30, 64, "tool_calls"
            ),
            with_usage(ModelResponse(content="It is 42."), 150, 5),
            with_usage(ModelResponse(content='{"answer": 42}'), 170, 7),
        ],
        name="gpt-test",
    )
    bus = verimap.EventBus()
    bus.subscribe(spans)
    planner = TemplatePlanner.single_node(
        outputs=["answer: number"],
        vfs=[{"name": "is_42", "type": "python", "code": "assert outputs['answer'] == 42"}],
    )
    coord = verimap.build(
        {"executor": model}, InProcessSandboxDouble(), planner=planner, events=bus
    )
    r = await coord.run("What is 6*7?")
    assert r.status == "success"
    got = list(exporter.get_finished_spans())
    (attempt,) = [s for s in got if s.name == "attempt 1"]
    assert parent_of(attempt, got).name == "node solve"  # type: ignore[union-attr]
    inside = children(attempt, got)
    assert [s.name for s in inside] == [
        "chat gpt-test",
        "execute_tool calculator",
        "chat gpt-test",
        "chat gpt-test",
        "vf is_42",
    ]
    first, tool, second, third, _ = inside
    assert tool.start_time >= first.end_time
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert tool.attributes["gen_ai.tool.call.result"] == "42"
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"expression": "6*7"}
    tokens = [
        (c.attributes["gen_ai.usage.input_tokens"], c.attributes["gen_ai.usage.output_tokens"])
        for c in (first, second, third)
    ]
    assert tokens == [(120, 30), (150, 5), (170, 7)]
    assert first.attributes["gen_ai.usage.cache_read.input_tokens"] == 64
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert third.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert first.attributes["verimap.tool_calls"] == 1


async def test_a_failed_model_call_is_an_error_span_and_closes_the_tree(spans, exporter):
    model = ScriptedModel([RuntimeError(f"endpoint said {OUTPUT_KEY} is wrong")])
    bus = verimap.EventBus()
    bus.subscribe(spans)
    coord = verimap.build(
        {"executor": model},
        None,
        config=RunConfig(verify=Verify(verification="none")),
        events=bus,
        planner=TemplatePlanner.single_node(),
    )
    r = await coord.run("task")
    assert r.status == "failed" and r.error_kind == "infrastructure"
    got = list(exporter.get_finished_spans())
    (chat,) = [s for s in got if s.name.startswith("chat ")]
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["error.type"] == "ModelError"
    assert "endpoint said" in (chat.status.description or "")
    # The attempt and its node never finished: they are closed with the run, as cancelled.
    attempt = parent_of(chat, got)
    assert attempt is not None and attempt.attributes["verimap.status"] == "cancelled"
    (root,) = [s for s in got if s.parent is None]
    assert root.status.status_code == StatusCode.ERROR
    assert {s.name for s in got} == {
        "verimap run",
        "iteration 1",
        "node solve",
        "attempt 1",
        "chat scripted",
    }
    assert OUTPUT_KEY not in exported_text(got)


def test_spans_redact_by_themselves(spans, exporter, monkeypatch):
    """Events from another source than an EventBus (which redacts) are redacted all the same."""
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    spans(ev.RunStart(run_id="r", task=f"key {ENV_KEY}", config={}))
    spans(
        ev.NodeStart(
            run_id="r",
            iteration=1,
            node_id="n",
            inputs={"api_key": "hunter2-hunter2", "note": OUTPUT_KEY},
        )
    )
    spans(ev.Error(run_id="r", iteration=1, node_id="n", error=ENV_KEY))
    spans(ev.Finish(run_id="r", status="failed", error=ENV_KEY))
    got = list(exporter.get_finished_spans())
    assert [s.name for s in got] == ["node n", "iteration 1", "verimap run"]
    text = exported_text(got)
    assert ENV_KEY not in text and OUTPUT_KEY not in text and "hunter2" not in text
    assert text.count(REDACTED) >= 4


def test_close_ends_the_runs_that_never_finished(spans, exporter):
    spans(ev.RunStart(run_id="r", task="t"))
    spans(ev.NodeStart(run_id="r", iteration=1, node_id="n"))
    spans(ev.Attempt(run_id="r", iteration=1, node_id="n", attempt=1))
    assert not exporter.get_finished_spans()
    spans.close()
    got = list(exporter.get_finished_spans())
    assert [s.name for s in got] == ["attempt 1", "node n", "iteration 1", "verimap run"]
    assert got[0].attributes["verimap.status"] == "cancelled"
    assert got[-1].attributes["verimap.status"] == "interrupted"
    assert got[-1].status.status_code == StatusCode.ERROR


def test_blank_variables_ask_for_nothing(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "  ")
    assert not otel_requested(False) and otel_requested(True)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
    assert otel_requested(False)


def test_unsupported_protocol_is_named(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(OtelSetupError, match="http/json"):
        otel.otlp_exporter()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    assert otel.otlp_exporter() is not None


def test_importing_verimap_needs_no_opentelemetry():
    code = (
        "import sys, verimap, verimap.cli.run, verimap.cli.eval, verimap.cli.tracing\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'otel imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# -- the commands ------------------------------------------------------------------------------
CLI_PLAN = {"nodes": [node("a", vfs=[POSITIVE])]}


@pytest.fixture
def scripted_run(monkeypatch):
    world = ScriptedWorld([CLI_PLAN], lambda nid, k, inp, p: {"x": 21})

    @asynccontextmanager
    async def connect(**endpoint):
        yield world.models()

    monkeypatch.setattr(run_mod, "_connect", connect)
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    return world


def cli(*args: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CliRunner().invoke(main, list(args), catch_exceptions=False)


def run(task: str, trace_dir: Path, *args: str):
    """`verimap run` on the scripted world, which plans node a: on the local model a run is one
    node without a planner, hence `--max-nodes 2`."""
    return cli(
        "run",
        task,
        "-q",
        "--max-nodes",
        "2",
        "--sandbox",
        "process",
        "--trace-dir",
        str(trace_dir),
        *args,
    )


def test_run_otel_flag_exports_the_run(scripted_run, exporter, monkeypatch, tmp_path):
    monkeypatch.setattr(otel, "otlp_exporter", lambda: exporter)
    r = run("Give 21", tmp_path, "--otel")
    assert r.exit_code == 0, r.output
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("verimap run") == 1 and "node a" in names and "vf x_pos" in names


def test_run_without_otel_or_with_a_blank_endpoint_exports_nothing(
    scripted_run, monkeypatch, tmp_path
):
    def refuse():
        raise AssertionError("no exporter should be made")

    monkeypatch.setattr(otel, "otlp_exporter", refuse)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    r = run("Give 21", tmp_path)
    assert r.exit_code == 0, r.output


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    """An OTLP/HTTP collector stub on the loopback interface, recording each export request."""
    received: list[tuple[str, bytes]] = []
    handler = type("Handler", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def test_the_standard_variable_alone_sends_otlp_to_the_collector(
    scripted_run, collector, monkeypatch, tmp_path
):
    url, received = collector
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    r = run(f"Give 21, key {ENV_KEY}", tmp_path)
    assert r.exit_code == 0, r.output
    assert received and {path for path, _ in received} == {"/v1/traces"}
    names, services = [], set()
    for _, body in received:
        assert ENV_KEY.encode() not in body and b"ENVSECRET" not in body
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            services |= {
                a.value.string_value for a in rs.resource.attributes if a.key == "service.name"
            }
            names += [s.name for ss in rs.scope_spans for s in ss.spans]
    assert services == {"verimap"}
    assert sorted(names) == sorted(
        ["verimap run", "iteration 1", "node a", "attempt 1", "vf x_pos"]
        + ["chat scripted-world"] * scripted_run.model.calls
    )


def test_eval_otel_puts_every_task_run_under_one_eval_span(exporter, monkeypatch, tmp_path):
    monkeypatch.setattr(otel, "otlp_exporter", lambda: exporter)
    r = cli(
        "eval",
        "-b",
        "gsm8k",
        "-m",
        "react",
        "-n",
        "2",
        "-o",
        str(tmp_path / "out"),
        "--data-dir",
        str(SAMPLES),
        "--models-factory",
        "verimap.testing:oracle_factory",
        "--sandbox",
        "process",
        "--quiet",
        "--otel",
    )
    assert r.exit_code == 0, r.output
    got = list(exporter.get_finished_spans())
    (top,) = [s for s in got if s.parent is None]
    assert top.name == "verimap eval" and top.attributes["verimap.benchmark"] == "gsm8k"
    runs = children(top, got)
    assert [s.name for s in runs] == ["verimap run", "verimap run"]
    assert all(s.attributes["verimap.status"] == "success" for s in runs)
