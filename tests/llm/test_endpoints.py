"""Endpoints in practice, over real HTTP on loopback: connections per endpoint, the reply
limit's field, seeds, and `provider/model` names."""

from __future__ import annotations

import asyncio

import pytest

from verimap.base.messages import GenerationSettings, ModelRequest, UserMessage
from verimap.base.model import ModelError
from verimap.llm import limits
from verimap.llm.openai_model import OpenAIModel
from verimap.llm.providers import (
    UnknownProvider,
    is_reasoning_model,
    other_field_if_refused,
    resolve,
    sampling_refused,
    token_limit_field,
)

from .conftest import Reply, completion, error


def ask(text: str = "hi", **settings) -> ModelRequest:
    return ModelRequest(
        messages=[UserMessage(content=text)], settings=GenerationSettings(**settings)
    )


async def test_no_more_than_max_connections_are_in_flight_at_one_endpoint(http_server):
    http_server.replies = [Reply(body=completion(), delay=0.2)]
    # Two models on one endpoint (two roles' names) share its two connections.
    a = OpenAIModel("a", base_url=http_server.url, api_key="k", max_connections=2)
    b = OpenAIModel("b", base_url=http_server.url + "/", api_key="k", max_connections=2)
    await asyncio.wait_for(
        asyncio.gather(*(m.request(ask(str(i))) for i in range(4) for m in (a, b))), timeout=20
    )
    assert len(http_server.requests) == 8
    assert http_server.max_in_flight == 2


async def test_the_local_server_gets_one_connection_and_a_remote_one_sixteen(http_server):
    local = OpenAIModel("m", base_url=http_server.url, api_key="t", local=True)
    remote = OpenAIModel("m", base_url="https://api.example.com/v1", api_key="k")
    assert (local.max_connections, remote.max_connections) == (1, 16)
    http_server.replies = [Reply(body=completion(), delay=0.1)]
    await asyncio.wait_for(asyncio.gather(*(local.request(ask(str(i))) for i in range(4))), 20)
    assert http_server.max_in_flight == 1
    with pytest.raises(ValueError):
        OpenAIModel("m", base_url=http_server.url, max_connections=0)


async def test_a_retry_wait_holds_no_connection(http_server):
    """While one request waits out a 429, the endpoint's only connection serves another."""
    http_server.replies = [
        Reply(status=429, body={"error": {"message": "slow"}}, headers={"retry-after": "0.5"}),
        Reply(body=completion("second")),
        Reply(body=completion("first")),
    ]
    m = OpenAIModel("m", base_url=http_server.url, api_key="k", max_connections=1)
    first = asyncio.create_task(m.request(ask("1")))
    await asyncio.sleep(0.2)
    second = await asyncio.wait_for(m.request(ask("2")), timeout=0.25)
    assert second.content == "second" and (await first).content == "first"


def test_endpoint_keys_leave_out_credentials_and_queries():
    assert limits.endpoint_key("https://u:pw@Api.Example.com:8443/v1/?x=1") == (
        "https://api.example.com:8443/v1"
    )


def test_the_reply_limit_goes_where_the_endpoint_wants_it():
    assert token_limit_field("auto", "https://api.openai.com/v1", "gpt-4o-mini") == (
        "max_completion_tokens"
    )
    assert (
        token_limit_field("auto", "http://localhost:8000/v1", "o3-mini") == "max_completion_tokens"
    )
    for name in ("o1", "o4-mini-2025-04-16", "gpt-5", "gpt-5.1", "GPT-5-mini"):
        assert is_reasoning_model(name), name
    for name in ("gpt-4o", "qwen2.5:7b", "o1x", "gpt-50"):
        assert not is_reasoning_model(name), name
    assert token_limit_field("auto", "http://127.0.0.1:11434/v1", "qwen2.5:7b") == "max_tokens"
    assert token_limit_field("max_tokens", "https://api.openai.com/v1", "o3") == "max_tokens"
    with pytest.raises(ValueError):
        token_limit_field("max_new_tokens", "http://x", "m")
    openai_says = (
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead."
    )
    assert other_field_if_refused("max_tokens", openai_says) == "max_completion_tokens"
    unknown = "Unrecognized request argument supplied: max_completion_tokens"
    assert other_field_if_refused("max_completion_tokens", unknown) == "max_tokens"
    assert other_field_if_refused("max_tokens", "context length exceeded") is None


async def test_a_refused_limit_field_is_switched_once_and_remembered(http_server):
    refusal = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    http_server.replies = [error(400, refusal), Reply(body=completion())]
    m = OpenAIModel("reasoner", base_url=http_server.url, api_key="k")
    assert m.token_limit_field == "max_tokens"
    await m.request(ask(max_tokens=50))
    await m.request(ask("again", max_tokens=50))
    sent = http_server.requests
    assert ("max_tokens" in sent[0], sent[1].get("max_completion_tokens")) == (True, 50)
    assert "max_tokens" not in sent[2] and sent[2]["max_completion_tokens"] == 50
    http_server.requests.clear()
    http_server.replies = [error(400, refusal)]
    fixed = OpenAIModel("m", base_url=http_server.url, api_key="k", max_tokens_param="max_tokens")
    with pytest.raises(ModelError, match="HTTP 400"):
        await fixed.request(ask(max_tokens=50))
    assert len(http_server.requests) == 1  # an override is never second-guessed


async def test_sampling_a_model_refuses_is_dropped_once_and_remembered(http_server):
    """OpenAI's reasoning models take no temperature but the default: they are sent none, and
    an endpoint that refuses one for another model is sent none from its first refusal on."""
    assert "temperature" not in OpenAIModel(
        "o3-mini", base_url=http_server.url, api_key="k"
    )._kwargs(ask(temperature=0.0, top_p=1.0), "openai")
    refusal = "Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value is supported."
    assert sampling_refused(refusal)
    assert sampling_refused("Unsupported parameter: 'top_p' is not supported with this model.")
    assert not sampling_refused("max_tokens is too large: the context length is 8192")
    http_server.replies = [error(400, refusal), Reply(body=completion())]
    m = OpenAIModel("proxied-reasoner", base_url=http_server.url, api_key="k")
    await m.request(ask(temperature=0.0, top_p=1.0))
    await m.request(ask("again", temperature=0.7))
    sent = http_server.requests
    assert len(sent) == 3 and sent[0]["temperature"] == 0.0
    assert all("temperature" not in r and "top_p" not in r for r in sent[1:])
    http_server.requests.clear()
    http_server.replies = [error(400, refusal)]
    with pytest.raises(ModelError, match="HTTP 400"):  # refused with none sent: not resent
        await m.request(ask("third", temperature=0.7))
    assert len(http_server.requests) == 1


async def test_requests_refused_together_are_all_sent_again(http_server):
    refusal = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    refused = Reply(status=400, body={"error": {"message": refusal}}, delay=0.2)
    http_server.replies = [refused, refused, Reply(body=completion())]
    m = OpenAIModel("reasoner", base_url=http_server.url, api_key="k")
    await asyncio.wait_for(
        asyncio.gather(m.request(ask("1", max_tokens=5)), m.request(ask("2", max_tokens=5))), 20
    )
    later = http_server.requests[2:]
    assert len(later) == 2 and all("max_tokens" not in r for r in later)


async def test_openai_s_endpoint_is_sent_max_completion_tokens(http_server):
    m = OpenAIModel("gpt-4o-mini", base_url="https://api.openai.com/v1", api_key="k")
    kw = m._kwargs(ask(max_tokens=64), "openai")
    assert kw["max_completion_tokens"] == 64 and "max_tokens" not in kw
    local = OpenAIModel("m", base_url=http_server.url, api_key="k", max_tokens_cap=32)
    assert local._kwargs(ask(max_tokens=64), "llamacpp")["max_tokens"] == 32


async def test_a_seed_is_sent_and_a_repeated_request_gets_the_next_one(http_server):
    http_server.replies = [Reply(body=completion())]
    m = OpenAIModel("m", base_url=http_server.url, api_key="k")
    for text in ("vote", "vote", "other", "vote"):
        await m.request(ask(text, temperature=0.7, seed=7))
    await m.request(ask("unseeded", temperature=0.7))
    seeds = [r.get("seed") for r in http_server.requests]
    assert seeds == [7, 8, 7, 9, None]


def test_provider_model_names_name_their_endpoint():
    t = resolve("openai/gpt-4o-mini")
    assert t is not None and (t.model, t.base_url, t.key_env) == (
        "gpt-4o-mini",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
    )
    t = resolve("ollama/qwen2.5:7b")
    assert t is not None and (t.model, t.base_url, t.key_env) == (
        "qwen2.5:7b",
        "http://localhost:11434/v1",
        None,
    )
    t = resolve("local/qwen2.5-coder-1.5b")
    assert t is not None and (t.provider, t.model, t.base_url) == (
        "local",
        "qwen2.5-coder-1.5b",
        None,
    )
    t = resolve("openrouter/meta-llama/llama-3.1-8b-instruct")
    assert t is not None and t.model == "meta-llama/llama-3.1-8b-instruct"
    assert resolve("gpt-4o-mini") is None
    with pytest.raises(UnknownProvider, match=r"unknown provider 'anthropic'.*--base-url"):
        resolve("anthropic/claude-sonnet-4")


@pytest.fixture
def no_endpoint(monkeypatch):
    for var in (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "OPENROUTER_API_KEY",
        "VERIMAP_MAX_TOKENS_PARAM",
    ):
        monkeypatch.delenv(var, raising=False)


async def test_connect_sends_each_provider_s_model_to_its_endpoint(no_endpoint, monkeypatch):
    from verimap.local.endpoint import connect, is_remote

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-key-42")
    async with connect(model="ollama/qwen2.5:7b", planner_model="openai/gpt-4.1") as models:
        planner, executor = models["planner"], models["executor"]
        assert (planner.name, planner.base_url) == ("gpt-4.1", "https://api.openai.com/v1")
        assert (executor.name, executor.base_url) == ("qwen2.5:7b", "http://localhost:11434/v1")
        assert executor._key != "sk-test-openai-key-42"  # never sent to another provider
        assert models["judge"] is executor and executor.max_connections == 16
    assert not is_remote("local/qwen2.5-coder-1.5b", None) and is_remote("ollama/x", None)


async def test_connect_takes_names_as_they_are_at_a_configured_endpoint(no_endpoint):
    from verimap.local.endpoint import connect

    url = "http://127.0.0.1:9/v1"
    async with connect(model="Qwen/Qwen2.5-7B-Instruct", base_url=url, max_connections=3) as models:
        m = models["executor"]
        assert (m.name, m.base_url, m.max_connections) == ("Qwen/Qwen2.5-7B-Instruct", url, 3)


async def test_connect_refuses_unknown_providers_and_missing_keys(no_endpoint, monkeypatch):
    from verimap.local.endpoint import connect

    with pytest.raises(ModelError, match="unknown provider 'mistral'"):
        async with connect(model="mistral/mistral-large"):
            pass
    with pytest.raises(ModelError, match="set OPENROUTER_API_KEY"):
        async with connect(model="openrouter/openai/gpt-4o"):
            pass
    monkeypatch.setenv("VERIMAP_MAX_TOKENS_PARAM", "tokens")
    with pytest.raises(ModelError, match="VERIMAP_MAX_TOKENS_PARAM"):
        async with connect(model="ollama/x"):
            pass
