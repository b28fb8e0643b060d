import asyncio
import json

import pytest

from verimap.base.messages import ModelRequest, ModelResponse
from verimap.base.model import ModelError
from verimap.base.purpose import ExecuteCall, JudgeCall, PlanCall, SolveCall
from verimap.base.usage import Price, Usage
from verimap.testing import ScriptedModel, ScriptedWorld, tool_call_reply


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


def asked(purpose, text="any wording at all", schema=None):
    return ModelRequest(
        messages=[{"role": "user", "content": text}], purpose=purpose, response_schema=schema
    )


async def test_the_world_answers_by_purpose_whatever_the_prompt_says():
    """Routing reads the purpose only: a prompt in any wording gets the same answers."""
    plan = {
        "nodes": [{"id": "a", "instruction": "Do it.", "inputs": ["USER_TASK"], "outputs": ["x"]}]
    }
    world = ScriptedWorld(
        [plan],
        lambda nid, k, inputs, prompt: {"x": f"{nid}{k}:{inputs['USER_TASK']}"},
        lambda nid, criterion, outs: (outs["x"] == "a0:T", f"{nid} {criterion}"),
        solve=lambda task: f"solved {task}",
    )
    m = world.model
    assert (await m.request(asked(PlanCall(kind="think")))).content.startswith("Let me")
    assert json.loads((await m.request(asked(PlanCall()))).content)["nodes"][0]["id"] == "a"
    run = ExecuteCall(node_id="a", inputs={"USER_TASK": "T"})
    assert json.loads((await m.request(asked(run))).content) == {"x": "a0:T"}
    one = JudgeCall(node_id="a", criteria={"c": "crit"}, outputs={"x": "a0:T"}, final_call=True)
    assert json.loads((await m.request(asked(one))).content) == {
        "passed": True,
        "explanation": "a crit",
    }
    two = JudgeCall(
        node_id="a", criteria={"c": "one", "d": "two"}, outputs={"x": "no"}, final_call=True
    )
    assert set(json.loads((await m.request(asked(two))).content)) == {"c", "d"}
    solved = await m.request(asked(SolveCall(kind="reference", task="the task")))
    assert solved.content == "solved the task"
    assert world.planner_calls == 1 and world.executor_calls == {"a": 1}
    with pytest.raises(LookupError, match="carries a purpose"):
        await m.request(asked(None))


def test_a_purpose_labels_its_call_and_is_never_serialised():
    labels = [
        PlanCall(kind="replan").label,
        ExecuteCall(node_id="a", final_call=True).label,
        JudgeCall(node_id="b", criteria={"c": "x", "d": "y"}).label,
        SolveCall(kind="program", framing=1).label,
    ]
    assert labels == ["plan:replan", "execute:a:final", "judge:b:c,d", "solve:program:1"]
    req = asked(ExecuteCall(node_id="a", inputs={"secret": 1}))
    assert "purpose" not in req.model_dump() and "secret" not in req.model_dump_json()
    assert "secret" not in repr(req.purpose)
