import asyncio

import pytest

from verimap.llm.base import ModelError, ModelRequest, ModelResponse
from verimap.testing import ScriptedModel, tool_call_reply
from verimap.usage import Price, Usage


def req(text="hello world", role="executor"):
    return ModelRequest(messages=[{"role": "user", "content": text}], role=role)


async def test_list_script_and_recording():
    m = ScriptedModel(["one", {"k": 1}, tool_call_reply("calculator", {"expression": "1+1"})])
    assert (await m.request(req("a"))).content == "one"
    assert (await m.request(req("b"))).content == '{"k": 1}'
    r = await m.request(req("c"))
    assert r.tool_calls[0].name == "calculator"
    assert [q.messages[0].content for q in m.requests] == ["a", "b", "c"]
    with pytest.raises(ModelError, match="exhausted"):
        await m.request(req())


async def test_function_script_sees_request():
    m = ScriptedModel(lambda r: r.role.upper())
    assert (await m.request(req(role="judge"))).content == "JUDGE"


async def test_usage_and_cost_from_price_table():
    m = ScriptedModel(
        [
            ModelResponse(
                content="x", usage=Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000)
            )
        ],
        name="priced",
        prices={"priced": Price(input=1.0, output=2.0)},
    )
    r = await m.request(req())
    assert r.usage.calls == 1 and r.usage.cost == pytest.approx(3.0)
    assert m.total_usage().cost == pytest.approx(3.0)


async def test_exception_reply_is_model_error():
    m = ScriptedModel([TimeoutError("slow")])
    with pytest.raises(ModelError, match="slow"):
        await m.request(req())


async def test_fixed_latency_does_not_block_other_requests():
    m = ScriptedModel(lambda r: "ok", latency_s=0.05)
    pending = asyncio.gather(*(m.request(req()) for _ in range(4)))
    await asyncio.sleep(0.01)
    assert m.calls == 4 and m.responses == []  # all four wait at the same time
    await pending
    assert len(m.responses) == 4
