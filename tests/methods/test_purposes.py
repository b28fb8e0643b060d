"""Every model request a method makes says what it is for, and its `model_call` event names it.

The doubles answer by the purpose alone, so a request without one would fail the run; these
tests also pin which kinds of request each method makes."""

import json

import pytest

import verimap
from tests.evals.conftest import SAMPLES, chat_endpoint, fast_model  # noqa: F401
from verimap.base.check_names import ANSWER_AGREEMENT, MIXED
from verimap.base.events import MODEL_CALL, EventBus
from verimap.base.purpose import ExecuteCall, JudgeCall, PlanCall, SolveCall
from verimap.config import RunConfig, Verify
from verimap.evals.tasksets import get_benchmark
from verimap.testing import ScriptedWorld, oracle_models
from verimap.tools.registry import ToolRegistry, calculator_tool
from verimap.wiring import build

KINDS = {
    "react": {"execute"},
    "verimap": {"plan", "execute", "judge"},
    "map": {"plan", "execute"},
    "map-v": {"plan", "execute", "judge"},
    "bare": {"solve"},
    "sc": {"solve"},
    "program": {"solve"},
}


def requests_of(models):
    unique = {id(m.model if hasattr(m, "model") else m): m for m in models.values()}
    return [r for m in unique.values() for r in m.requests]


@pytest.mark.parametrize("method", list(KINDS))
async def test_every_request_of_a_scripted_run_carries_its_purpose(method, sandbox):
    task = get_benchmark("gsm8k", SAMPLES).tasks()[0]
    models = oracle_models([task])
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    runner = build(
        models, sandbox, ToolRegistry([calculator_tool()]), method=method, domain="math", events=bus
    )
    result = await runner.run(task.prompt)
    assert result.status == "success", result.error
    asked = requests_of(models)
    assert asked and all(r.purpose is not None for r in asked)
    assert {r.purpose.type for r in asked} == KINDS[method]
    for role, kinds in (("planner", (PlanCall,)), ("judge", (JudgeCall, SolveCall))):
        assert all(isinstance(r.purpose, kinds) for r in models[role].requests)
    labels = sorted(e.data["purpose"] for e in seen if e.type == MODEL_CALL)
    assert labels == sorted(r.purpose.label for r in asked)


@pytest.mark.parametrize(
    ("method", "label"),
    [("bare", "solve:sample"), ("sc", "solve:sample"), ("program", "solve:program:0")],
)
async def test_a_baseline_solves_the_task_on_its_own(method, label, sandbox):
    task = get_benchmark("gsm8k", SAMPLES).tasks()[0]
    models = oracle_models([task])
    runner = build(models, sandbox, ToolRegistry(), method=method, domain="math")
    await runner.run(task.prompt)
    asked = models["executor"].requests
    assert {r.purpose.label for r in asked} == {label}
    assert all(
        r.purpose == SolveCall(kind=r.purpose.kind, framing=r.purpose.framing, task=task.prompt)
        for r in asked
    )


CHAIN = {
    "nodes": [
        {
            "id": "a",
            "instruction": "Read the price.",
            "inputs": ["USER_TASK"],
            "outputs": {"price": "number"},
            "verification": [
                {"name": "positive", "type": "python", "code": "assert outputs['price'] > 0"}
            ],
        },
        {
            "id": "b",
            "instruction": "Multiply it by 23.",
            "inputs": ["a.price"],
            "outputs": {"total": "number"},
            "verification": [
                {"name": "sensible", "type": "llm", "content": "The total is a cost."},
                {"name": "whole", "type": "llm", "content": "The total is whole."},
            ],
        },
    ]
}


async def test_a_world_is_told_each_node_its_inputs_and_each_judge_its_criteria(process_sandbox):
    """The scripted world needs no prompt to answer: the node, its inputs, the criteria and the
    outputs judged all come with the request, and so does the task of each program."""
    judged, solved = [], []

    def judge(node_id, criterion, outputs):
        judged.append((node_id, criterion, outputs))
        return True, "fine"

    def solve(task):
        solved.append(task)
        return "```python\ndef solution():\n    return 17 * 23\n```"

    def outputs(node_id, k, inputs, prompt):
        return {"price": 17} if node_id == "a" else {"total": inputs["a.price"] * 23}

    def sample(task):
        solved.append(task)
        return "23 pens at 17 dollars: 391 dollars. The answer is 391."

    world = ScriptedWorld([CHAIN], outputs, judge, solve=solve, sample=sample)
    config = RunConfig(
        verify=Verify(checks=[ANSWER_AGREEMENT], ballot=MIXED, vacuity_check=False)
    )  # programs
    task = "Pens cost 17 dollars. What do 23 pens cost?"
    r = await verimap.build(world.models(), process_sandbox, config=config).run(task)
    assert r.answer == 391
    assert judged == [
        ("b", "The total is a cost.", {"total": 391}),
        ("b", "The total is whole.", {"total": 391}),
    ]
    assert solved and set(solved) == {task}
    labels = [q.purpose.label for q in world.model.requests]
    assert "judge:b:sensible,whole" in labels and "judge:b:sensible,whole:final" in labels
    assert [p for p in labels if p.startswith("solve")] == ["solve:program:0", "solve:sample"]
    executed = [q.purpose for q in world.model.requests if isinstance(q.purpose, ExecuteCall)]
    assert [(p.node_id, p.inputs) for p in executed] == [
        ("a", {"USER_TASK": task}),
        ("b", {"a.price": 17}),
    ]


async def test_a_run_on_the_real_client_sends_no_purpose(chat_endpoint, sandbox):  # noqa: F811
    """Over HTTP to a loopback endpoint: the purposes stay on this side."""
    task = get_benchmark("gsm8k", SAMPLES).tasks()[0]
    endpoint = chat_endpoint([task])
    endpoint.down = lambda task_id: False
    model = fast_model(endpoint.url)
    runner = build(
        {"executor": model},
        sandbox,
        ToolRegistry([calculator_tool()]),
        method="react",
        domain="math",
    )
    try:
        result = await runner.run(task.prompt)
    finally:
        await model.aclose()
    assert result.status == "success" and len(endpoint.requests) >= 2
    for body in endpoint.requests:
        assert "purpose" not in body and "execute:solve" not in json.dumps(body)
