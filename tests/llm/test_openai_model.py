"""OpenAIModel against a scripted endpoint over real HTTP: retries, fallback, accounting."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest

from verimap.base.messages import GenerationSettings, ModelRequest, UserMessage
from verimap.base.model import ModelError
from verimap.base.protocols import Model
from verimap.llm.openai_model import OpenAIModel, parse_text_tool_calls, response_format_for

from .conftest import Reply, completion, error

SCHEMA = {
    "type": "object",
    "properties": {"passed": {"type": "boolean"}, "explanation": {"type": "string"}},
    "required": ["passed", "explanation"],
    "additionalProperties": False,
}


def fast(url: str, **kw) -> OpenAIModel:
    kw = {"max_retries": 3, "backoff_base": 0.01, "backoff_max": 0.05, **kw}
    return OpenAIModel("gpt-4o-mini", base_url=url, api_key="sk-test-secret-123", **kw)


def ask(schema=None, **kw) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content="hi")], response_schema=schema, **kw)


def test_is_a_model():
    assert isinstance(fast("http://127.0.0.1:1/v1"), Model)


async def test_retries_429_and_500_then_succeeds_and_counts_failed_attempts(http_server):
    http_server.replies = [
        error(429, "slow down"),
        error(500, "boom"),
        Reply(body=completion("hello", prompt=7, completion_tokens=3)),
    ]
    r = await fast(http_server.url).request(ask())
    assert r.content == "hello"
    assert len(http_server.requests) == 3
    assert (r.usage.calls, r.usage.failed_calls) == (3, 2)
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (7, 3)


async def test_backoff_grows_and_honours_retry_after(http_server):
    http_server.replies = [
        Reply(status=429, body={"error": {"message": "x"}}, headers={"retry-after": "0.3"}),
        Reply(body=completion()),
    ]
    t0 = time.monotonic()
    await OpenAIModel("m", base_url=http_server.url, api_key="k", backoff_max=5).request(ask())
    assert time.monotonic() - t0 >= 0.3
    m = fast("http://x", backoff_base=1.0, backoff_max=100.0)
    delays = [m.retry_policy.backoff(i) for i in range(4)]
    assert all(0.75 * 2**i <= d <= 1.25 * 2**i for i, d in enumerate(delays))


async def test_gives_up_after_bounded_retries_with_usage(http_server):
    http_server.replies = [error(503, "overloaded")]
    with pytest.raises(ModelError) as ei:
        await fast(http_server.url, max_retries=2).request(ask())
    assert len(http_server.requests) == 3
    assert f"127.0.0.1:{http_server.port} answered HTTP 503" in str(ei.value)  # the host only
    assert (ei.value.usage.calls, ei.value.usage.failed_calls) == (3, 3)


async def test_client_errors_are_not_retried_and_key_never_appears(http_server):
    http_server.replies = [error(401, "invalid api key")]
    m = fast(http_server.url)
    with pytest.raises(ModelError) as ei:
        await m.request(ask())
    assert len(http_server.requests) == 1
    assert "401" in str(ei.value)
    assert "sk-test-secret-123" not in str(ei.value) and "sk-test-secret-123" not in repr(m)
    headers = {k.lower(): v for k, v in http_server.headers[0].items()}
    assert headers["authorization"] == "Bearer sk-test-secret-123"


async def test_unreachable_endpoint_is_a_clear_error_quickly():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    t0 = time.monotonic()
    with pytest.raises(ModelError) as ei:
        await fast(url, max_retries=2).request(ask())
    assert time.monotonic() - t0 < 10
    assert f"endpoint 127.0.0.1:{port} is unreachable" in str(ei.value)  # the host only
    assert ei.value.usage.failed_calls == 3


async def test_timeout_is_retried(http_server):
    http_server.replies = [
        Reply(body=completion("late"), delay=1.5),
        Reply(body=completion("on time")),
    ]
    r = await fast(http_server.url, timeout=0.5).request(ask())
    assert r.content == "on time"
    assert r.usage.failed_calls == 1


async def test_on_unreachable_hook_switches_to_a_recovered_url(http_server):
    http_server.replies = [Reply(body=completion("recovered"))]
    calls = []

    async def recover():
        calls.append(1)
        return http_server.url

    m = fast("http://127.0.0.1:9/v1", on_unreachable=recover)
    r = await m.request(ask())
    assert r.content == "recovered" and calls == [1] and m.base_url == http_server.url


async def test_auto_dialect_falls_back_from_json_schema_and_remembers(http_server):
    llama_500 = error(
        500, "1 validation error: response_format.type Input should be 'text' or 'json_object'"
    )
    ok = Reply(body=completion('{"passed": true, "explanation": "fine"}'))
    http_server.replies = [llama_500, ok, ok]
    m = fast(http_server.url)
    r = await m.request(ask(SCHEMA))
    assert json.loads(r.content)["passed"] is True
    sent = [req["response_format"] for req in http_server.requests]
    assert sent[0]["type"] == "json_schema" and sent[0]["json_schema"]["schema"] == SCHEMA
    assert sent[1] == {"type": "json_object", "schema": SCHEMA}
    assert m.dialect == "llamacpp"
    await m.request(ask(SCHEMA))
    assert http_server.requests[2]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert r.usage.failed_calls == 1


async def test_auto_dialect_falls_to_json_mode_when_schema_key_rejected(http_server):
    http_server.replies = [
        error(400, "response_format json_schema is not supported"),
        error(400, "unknown parameter response_format.schema"),
        Reply(body=completion('{"passed": false, "explanation": "x"}')),
    ]
    m = fast(http_server.url)
    await m.request(ask(SCHEMA))
    assert http_server.requests[2]["response_format"] == {"type": "json_object"}
    assert m.dialect == "json_mode"


async def test_fixed_dialect_never_falls_back(http_server):
    http_server.replies = [error(400, "response_format json_schema is not supported")]
    with pytest.raises(ModelError):
        await fast(http_server.url, dialect="openai").request(ask(SCHEMA))
    assert len(http_server.requests) == 1


def test_response_formats_per_dialect():
    assert response_format_for("openai", SCHEMA, "judge verdict")["json_schema"] == {
        "name": "judge_verdict",
        "schema": SCHEMA,
        "strict": True,
    }
    loose = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert response_format_for("openai", loose, "o")["json_schema"]["strict"] is False
    assert response_format_for("llamacpp", SCHEMA, "o") == {"type": "json_object", "schema": SCHEMA}
    assert response_format_for("json_mode", SCHEMA, "o") == {"type": "json_object"}
    with pytest.raises(ValueError):
        response_format_for("xml", SCHEMA, "o")


async def test_assistant_content_none_is_sent_as_empty_string(http_server):
    http_server.replies = [Reply(body=completion())]
    msgs = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    await fast(http_server.url).request(ModelRequest(messages=msgs))
    assert http_server.requests[0]["messages"][1]["content"] == ""
    assert msgs[1]["content"] is None  # the caller's messages are not mutated


async def test_usage_cached_tokens_and_cost(http_server):
    http_server.replies = [
        Reply(body=completion(prompt=1_000_000, completion_tokens=1_000_000, cached=500_000))
    ]
    r = await fast(http_server.url).request(ask())
    assert r.usage.cached_tokens == 500_000
    # gpt-4o-mini: 0.15 input, 0.075 cached input, 0.60 output per 1M tokens
    assert r.usage.cost == pytest.approx(0.5 * 0.15 + 0.5 * 0.075 + 0.60)


async def test_native_tool_calls_are_parsed(http_server):
    tc = [
        {
            "id": "call_9",
            "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'},
        }
    ]
    http_server.replies = [Reply(body=completion(tool_calls=tc))]
    tools = [
        {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}
    ]
    r = await fast(http_server.url).request(
        ModelRequest(messages=[UserMessage(content="x")], tools=tools, tool_choice="auto")
    )
    assert [(c.id, c.name, json.loads(c.arguments)) for c in r.tool_calls] == [
        ("call_9", "calculator", {"expression": "2+2"})
    ]
    assert http_server.requests[0]["tool_choice"] == "auto"


async def test_text_tool_calls_become_tool_calls(http_server):
    http_server.replies = [
        Reply(body=completion('{"name": "calculator", "arguments": {"expression": "3*4"}}'))
    ]
    tools = [
        {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}
    ]
    r = await fast(http_server.url).request(
        ModelRequest(messages=[UserMessage(content="x")], tools=tools, tool_choice="auto")
    )
    assert r.content == "" and r.finish_reason == "tool_calls"
    assert (r.tool_calls[0].name, json.loads(r.tool_calls[0].arguments)) == (
        "calculator",
        {"expression": "3*4"},
    )


def test_parse_text_tool_calls_variants():
    names = {"calc", "python"}
    two = '<tool_call>\n{"name": "calc", "arguments": {"e": "1"}}\n</tool_call>\n<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"}}\n</tool_call>'
    assert [c.name for c in parse_text_tool_calls(two, names)] == ["calc", "python"]
    assert (
        parse_text_tool_calls('```json\n{"name": "calc", "arguments": "{}"}\n```', names)[
            0
        ].arguments
        == "{}"
    )
    assert parse_text_tool_calls('{"name": "other", "arguments": {}}', names) == []
    assert parse_text_tool_calls("The answer is 4.", names) == []
    assert parse_text_tool_calls('{"answer": 4}', names) == []


async def test_required_tool_choice_maps_to_forced_tool_for_llamacpp(http_server):
    http_server.replies = [Reply(body=completion())]
    tools = [
        {"type": "function", "function": {"name": "final_answer", "parameters": {"type": "object"}}}
    ]
    m = OpenAIModel("local", base_url=http_server.url, local=True)
    await m.request(
        ModelRequest(messages=[UserMessage(content="x")], tools=tools, tool_choice="required")
    )
    assert http_server.requests[0]["tool_choice"] == {
        "type": "function",
        "function": {"name": "final_answer"},
    }


def test_missing_key_for_openai_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-4o-mini")
    assert OpenAIModel("llama", base_url="http://127.0.0.1:1/v1").name == "llama"


def test_unknown_dialect_rejected():
    with pytest.raises(ValueError, match="dialect"):
        OpenAIModel("m", base_url="http://127.0.0.1:1/v1", dialect="xml")  # type: ignore[arg-type]


async def test_max_tokens_cap_bounds_every_request(http_server, monkeypatch):
    http_server.replies = [Reply(body=completion("ok"))]
    capped = fast(http_server.url, max_tokens_cap=1024)
    await capped.request(ask(settings=GenerationSettings(max_tokens=2048)))
    await capped.request(ask(settings=GenerationSettings(max_tokens=100)))
    await capped.request(ask())
    await fast(http_server.url).request(ask(settings=GenerationSettings(max_tokens=2048)))
    assert [r.get("max_tokens") for r in http_server.requests] == [1024, 100, 1024, 2048]

    from verimap.policies.small_model import reply_cap

    monkeypatch.delenv("VERIMAP_LOCAL_MAX_TOKENS", raising=False)
    assert reply_cap() == 1024
    monkeypatch.setenv("VERIMAP_LOCAL_MAX_TOKENS", "lots")
    with pytest.raises(ModelError, match="VERIMAP_LOCAL_MAX_TOKENS"):
        reply_cap()


@pytest.mark.parametrize("blank", ["", "  "])
async def test_blank_key_and_url_in_the_environment_mean_unset(http_server, monkeypatch, blank):
    monkeypatch.setenv("OPENAI_API_KEY", blank)
    monkeypatch.setenv("OPENAI_BASE_URL", blank)
    http_server.replies = [Reply(body=completion("ok"))]
    local = OpenAIModel("local", base_url=http_server.url, local=True)
    assert (await local.request(ask())).content == "ok"
    sent = {k.lower(): v for k, v in http_server.headers[0].items()}
    assert sent["authorization"] == "Bearer sk-no-key-required"
    assert OpenAIModel("llama", base_url=http_server.url).base_url == http_server.url
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-4o-mini")


async def test_blank_org_and_project_send_no_headers(http_server, monkeypatch):
    http_server.replies = [Reply(body=completion("ok"))]
    monkeypatch.setenv("OPENAI_ORG_ID", "")
    monkeypatch.setenv("OPENAI_PROJECT_ID", " ")
    await fast(http_server.url).request(ask())
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-1")
    await fast(http_server.url).request(ask())
    sent = [{k.lower(): v for k, v in h.items()} for h in http_server.headers]
    assert "openai-organization" not in sent[0] and "openai-project" not in sent[0]
    assert (sent[1]["openai-organization"], sent[1]["openai-project"]) == ("org-1", "proj-1")


async def test_the_local_client_sends_its_server_token_never_openai_api_key(
    http_server, monkeypatch
):
    # Before, the local client sent OPENAI_API_KEY to whatever held the local server's port.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak-1234")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-private")
    http_server.replies = [Reply(body=completion("ok"))]
    with_token = OpenAIModel("local", base_url=http_server.url, api_key="server-token", local=True)
    await with_token.request(ask())
    await OpenAIModel("local", base_url=http_server.url, local=True).request(ask())
    sent = [{k.lower(): v for k, v in h.items()} for h in http_server.headers]
    assert not any("sk-must-not-leak" in str(h) or "org-private" in str(h) for h in sent)
    assert [h["authorization"] for h in sent] == [
        "Bearer server-token",
        "Bearer sk-no-key-required",
    ]
    with_token.set_base_url(http_server.url, api_key="restarted-token")  # a restarted server
    await with_token.request(ask())
    last = {k.lower(): v for k, v in http_server.headers[-1].items()}
    assert last["authorization"] == "Bearer restarted-token"


async def test_cost_comes_from_the_price_library_and_the_local_model_is_known_free(http_server):
    from verimap.base.accounting import Budget, Ledger, MeteredModel

    http_server.replies = [Reply(body=completion("ok", prompt=1_000_000, completion_tokens=0))]
    remote = OpenAIModel("gpt-4o", base_url=http_server.url, api_key="sk-x")
    assert remote.price_known and (await remote.request(ask())).usage.cost >= 2.5  # was $0
    local = OpenAIModel("gpt-4o", base_url=http_server.url, local=True)
    assert local.price_known and (await local.request(ask())).usage.cost == 0.0
    # A cost budget needs a known price: the local model has one, an unknown model does not.
    await MeteredModel(local, Ledger(Budget(max_cost=0.01))).request(ask())
    unknown = OpenAIModel("my-vllm-model", base_url=http_server.url)
    assert not unknown.price_known


async def test_a_request_s_purpose_never_reaches_the_endpoint(http_server):
    """The purpose is for traces and doubles: the body holds what the model needs, no more."""
    from verimap.base.purpose import ExecuteCall, JudgeCall, PlanCall, SolveCall

    http_server.replies = [Reply(body=completion("ok"))]
    purposes = [
        PlanCall(kind="replan", task="TASK-MARK"),
        ExecuteCall(
            node_id="NODE-MARK",
            attempt=2,
            final_call=True,
            inputs={"INPUT-MARK": 1},
            outputs={"OUTPUT-MARK": "number"},
        ),
        JudgeCall(node_id="NODE-MARK", criteria={"VF-MARK": "CRITERION-MARK"}, outputs={"x": 1}),
        SolveCall(kind="program", framing=1, task="TASK-MARK"),
    ]
    model = fast(http_server.url)
    for purpose in purposes:
        await model.request(ask(SCHEMA, purpose=purpose))
    await model.request(ask(SCHEMA))
    bodies = [json.dumps(body) for body in http_server.requests]
    assert len(bodies) == 5 and len(set(bodies)) == 1  # the same body, with or without a purpose
    assert "purpose" not in bodies[0] and "MARK" not in bodies[0]


async def _trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An endpoint that answers at once, then sends its body a byte every 0.2 s: no read
    waits long, so only a deadline on the whole request ends it. After 20 bytes it waits for
    the client to hang up (a client without a deadline does after its read timeout)."""
    await reader.readuntil(b"\r\n\r\n")
    body = json.dumps(completion("slow")).encode()
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
    writer.write(f"content-length: {len(body)}\r\n\r\n".encode())
    try:
        for i in range(20):
            if reader.at_eof():
                return
            writer.write(body[i : i + 1])
            await writer.drain()
            await asyncio.sleep(0.2)
        await reader.read()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def test_a_trickling_endpoint_is_ended_at_the_request_s_deadline():
    server = await asyncio.start_server(_trickle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    waits: list[float] = []

    async def no_wait(s: float) -> None:
        waits.append(s)

    try:
        m = fast(f"http://127.0.0.1:{port}/v1", timeout=1.0, max_retries=1, sleep=no_wait)
        t0 = time.monotonic()
        with pytest.raises(ModelError) as ei:
            await m.request(ask())
        took = time.monotonic() - t0
    finally:
        server.close()
    assert took < 2 * 1.0 + 1.5  # two attempts of 1 s each, and slack
    assert "timed out after 2 attempts (no complete reply within 1 s)" in str(ei.value)
    assert len(waits) == 1  # retried once, as a timeout is
    assert (ei.value.usage.calls, ei.value.usage.failed_calls) == (2, 2)


def test_the_deadline_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("VERIMAP_REQUEST_TIMEOUT", "42")
    assert fast("http://127.0.0.1:1/v1").request_timeout == 42
    assert fast("http://127.0.0.1:1/v1", timeout=3).request_timeout == 3
    monkeypatch.setenv("VERIMAP_REQUEST_TIMEOUT", "0")
    with pytest.raises(ModelError, match="VERIMAP_REQUEST_TIMEOUT must be a number of seconds"):
        fast("http://127.0.0.1:1/v1")
    monkeypatch.delenv("VERIMAP_REQUEST_TIMEOUT")
    assert fast("http://127.0.0.1:1/v1").request_timeout == 600
