"""Typed messages and generation settings: what validates into them, and what reaches the wire."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from verimap.base.messages import (
    AssistantMessage,
    GenerationSettings,
    ModelRequest,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    as_messages,
    to_openai,
)
from verimap.core.agent import tool_loop
from verimap.llm.openai_model import OpenAIModel
from verimap.tools.registry import ToolRegistry, calculator_tool

from .conftest import Reply, completion

CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'},
}


def model(url: str) -> OpenAIModel:
    return OpenAIModel("m", base_url=url, api_key="sk-test", max_retries=0)


def test_openai_dicts_validate_into_typed_messages():
    req = ModelRequest(
        messages=[
            {"role": "system", "content": "s"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ]
    )
    assert req.messages == [
        SystemMessage(content="s"),
        UserMessage(content="q"),
        AssistantMessage(
            tool_calls=[ToolCall(id="c1", name="calculator", arguments='{"expression": "6*7"}')]
        ),
        ToolMessage(tool_call_id="c1", content="42"),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "critic", "content": "x"},
        {"role": "user", "content": "x", "nmae": "typo"},
        {"role": "tool", "content": "x"},
    ],
)
def test_a_malformed_message_fails_where_it_is_made(bad):
    with pytest.raises(ValidationError):
        ModelRequest(messages=[bad])


def test_messages_are_frozen():
    with pytest.raises(ValidationError):
        UserMessage(content="a").content = "b"  # type: ignore[misc]


def test_to_openai_round_trips_tool_calls():
    typed = [
        UserMessage(content="q"),
        AssistantMessage(
            content="",
            tool_calls=[ToolCall(id="c1", name="calculator", arguments='{"expression": "6*7"}')],
        ),
        ToolMessage(tool_call_id="c1", content="42"),
        AssistantMessage(content="42"),
    ]
    wire = to_openai(typed)
    assert json.dumps(wire) == json.dumps(
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {"role": "assistant", "content": "42"},
        ]
    )
    assert as_messages(wire) == typed


def test_a_tool_message_name_is_sent_only_when_given():
    named = to_openai([ToolMessage(tool_call_id="c1", name="calculator", content="42")])
    assert named == [{"role": "tool", "tool_call_id": "c1", "name": "calculator", "content": "42"}]


def test_a_sampling_keyword_outside_settings_is_refused():
    with pytest.raises(ValidationError, match="temperature"):
        ModelRequest(messages=[], temperature=0.2)  # type: ignore[call-arg]
    req = ModelRequest(messages=[], settings={"temperature": 0.2, "max_tokens": 5})  # type: ignore[arg-type]
    assert req.settings == GenerationSettings(temperature=0.2, max_tokens=5)


def test_replace_validates():
    s = GenerationSettings(max_tokens=100)
    assert s.replace(temperature=0.7) == GenerationSettings(temperature=0.7, max_tokens=100)
    with pytest.raises(ValidationError):
        s.replace(temprature=0.7)


async def test_settings_reach_the_request_payload(http_server):
    http_server.replies = [Reply(body=completion())]
    m = model(http_server.url)
    settings = GenerationSettings(temperature=0.3, top_p=0.9, max_tokens=77, stop=("\n\n",))
    await m.request(ModelRequest(messages=[UserMessage(content="q")], settings=settings))
    await m.request(ModelRequest(messages=[UserMessage(content="q")]))
    sent, bare = http_server.requests
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"]) == (0.3, 0.9, 77)
    assert sent["stop"] == ["\n\n"]
    assert not {"temperature", "top_p", "max_tokens", "stop"} & set(bare)
    with pytest.raises(ValidationError):
        GenerationSettings(stop=("a", "b", "c", "d", "e"))


async def test_a_tool_loop_sends_the_openai_transcript(http_server):
    http_server.replies = [
        Reply(body=completion(tool_calls=[CALL])),
        Reply(body=completion("The answer is 42.")),
    ]
    messages = [SystemMessage(content="s"), UserMessage(content="q")]
    loop = await tool_loop(
        model(http_server.url),
        ToolRegistry([calculator_tool()]),
        messages,
        role="executor",
        max_steps=3,
        settings=GenerationSettings(temperature=0.0),
    )
    assert loop.answered and loop.tool_calls == 1
    second = http_server.requests[1]
    assert json.dumps(second["messages"]) == json.dumps(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ]
    )
    assert second["temperature"] == 0.0 and second["tool_choice"] == "auto"
