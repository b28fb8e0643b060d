"""Every method end to end on scripted models, checking what makes each method what it is."""

import itertools
import json

import pytest

from tests.evals.conftest import SAMPLES
from verimap.base.messages import to_openai
from verimap.evals.runner import run_eval
from verimap.evals.tasksets import EvalTask, get_benchmark
from verimap.methods.presets import METHODS
from verimap.testing import ScriptedModel, ScriptedWorld
from verimap.tools.registry import ToolRegistry, calculator_tool
from verimap.wiring import build, resolve

ALWAYS_FAILS = {
    "name": "always_fails",
    "type": "python",
    "code": "assert outputs['x'] == 'never', 'planted failure'",
}


def chain_plan(vf_on_a=None):
    vfs = [vf_on_a or {"name": "has_x", "type": "python", "code": "assert outputs['x']"}]
    return {
        "nodes": [
            {
                "id": "a",
                "instruction": "Step A: extract the numbers.",
                "inputs": ["USER_TASK"],
                "outputs": ["x"],
                "verification": vfs,
            },
            {
                "id": "b",
                "instruction": "Step B: combine them.",
                "inputs": ["a.x"],
                "outputs": ["y"],
                "verification": [
                    {"name": "has_y", "type": "python", "code": "assert outputs['y']"}
                ],
            },
            {
                "id": "c",
                "instruction": "Step C: state the answer.",
                "inputs": ["b.y"],
                "outputs": ["answer"],
                "verification": [
                    {"name": "sensible", "type": "llm", "content": "The answer is a number."}
                ],
            },
        ],
        "edges": [],
    }


def scripted(plan):
    """Model doubles answering by each request's purpose: node a, node b, any other node."""

    def executor(req):
        if req.purpose.node_id == "a":
            return json.dumps({"x": "ALPHA-RAW-OUTPUT"})
        if req.purpose.node_id == "b":
            return json.dumps({"y": "beta"})
        return json.dumps({"answer": "42"})

    def judge(req):
        return {"passed": True, "explanation": "fine"} if req.purpose.final_call else "Looks fine."

    return {
        "planner": ScriptedModel(
            plan if callable(plan) else lambda req: plan, name="planner-double"
        ),
        "executor": ScriptedModel(executor, name="executor-double"),
        "judge": ScriptedModel(judge, name="judge-double"),
    }


async def run(method, plan, sandbox):
    models = scripted(plan)
    coord = build(models, sandbox, ToolRegistry([calculator_tool()]), method=method)
    return await coord.run("What is 6 times 7?"), models


def executor_prompt_for(models, node_id):
    return [
        json.dumps(to_openai(r.messages))
        for r in models["executor"].requests
        if r.purpose.node_id == node_id
    ]


async def test_react_is_one_node_and_never_plans_or_judges(sandbox):
    res, models = await run("react", chain_plan(), sandbox)
    assert models["planner"].calls == 0 and models["judge"].calls == 0
    assert [n.id for n in res.plans[0].nodes] == ["solve"] and res.answer == "42"
    assert resolve(method="react").config.execution.executor_max_steps == 20


async def test_map_skips_verification_and_answers_with_the_final_reply_as_written(sandbox):
    res, models = await run("map", chain_plan(ALWAYS_FAILS), sandbox)
    assert res.status == "success" and res.answer == '{"answer": "42"}'
    assert models["judge"].calls == 0
    assert "ALPHA-RAW-OUTPUT" in executor_prompt_for(models, "c")[0]
    # no structured final call: one reply per node
    assert all(r.response_schema is None for r in models["executor"].requests)


FOUR_GENERATIONS = {
    "nodes": [
        {
            "id": "a",
            "instruction": "Step A: read the two prices.",
            "inputs": ["USER_TASK"],
            "outputs": {"prices": "list[number]"},
        },
        {
            "id": "b",
            "instruction": "Step B: add the prices up.",
            "inputs": ["a.prices"],
            "outputs": {"total": "number"},
        },
        {
            "id": "c",
            "instruction": "Step C: take off the discount.",
            "inputs": ["b.total", "USER_TASK"],
            "outputs": {"discounted": "number"},
        },
        {
            "id": "d",
            "instruction": "Step D: state the answer.",
            "inputs": ["c.discounted"],
            "outputs": {"answer": "number"},
        },
    ]
}
REPLIES = {
    "a": "The prices are 3 and 4 (reply of A).",
    "b": "Together they cost 7 (reply of B).",
    "c": "With one dollar off it is 6 (reply of C).",
    "d": "The answer is 6.",
}


async def test_map_executors_see_text_two_generations_back_and_never_json(sandbox):
    """The paper's MAP (App. B.5): no structured I/O. An executor hears its parents' and
    grandparents' instructions and replies as written, never a named JSON value."""
    world = ScriptedWorld([FOUR_GENERATIONS], lambda nid, k, inputs, prompt: REPLIES[nid])
    coord = build(world.models(), sandbox, ToolRegistry([calculator_tool()]), method="map")
    res = await coord.run("Pens cost 3 and 4 dollars, and one dollar is taken off. Total?")
    assert res.status == "success" and res.answer == "The answer is 6."
    asked = [r for r in world.model.requests if r.role == "executor"]
    assert len(asked) == 4 and all(r.response_schema is None for r in asked)
    for r in asked:
        for m in r.messages:
            assert "{" not in m.content and "Required outputs" not in m.content
            assert not any(ref in m.content for ref in ("a.prices", "b.total", "c.discounted"))
    d = world.executor_prompts["d"][0]
    assert "[parent] Subtask: Step C: take off the discount.\nReply:\n" + REPLIES["c"] in d
    assert "[grandparent] Subtask: Step B: add the prices up.\nReply:\n" + REPLIES["b"] in d
    assert "reply of A" not in d and "Step A" not in d  # a great-grandparent
    assert "Pens cost" not in d  # d does not take USER_TASK
    c = world.executor_prompts["c"][0]
    assert "Pens cost 3 and 4" in c and "reply of A" in c and "reply of B" in c
    assert [e for e in world.order] == ["a", "b", "c", "d"]
    assert not any(r.role == "judge" for r in world.model.requests)


async def test_other_methods_keep_named_json_inputs(sandbox):
    world = ScriptedWorld(
        [FOUR_GENERATIONS],
        lambda nid, k, inputs, prompt: {
            "a": {"prices": [3, 4]},
            "b": {"total": 7},
            "c": {"discounted": 6},
            "d": {"answer": 6},
        }[nid],
    )
    coord = build(world.models(), sandbox, ToolRegistry(), method="map-v")
    res = await coord.run("Pens cost 3 and 4 dollars, and one dollar is taken off. Total?")
    assert res.status == "success" and res.answer == 6
    d = world.executor_prompts["d"][0]
    assert "Input c.discounted (number):\n6" in d and "Step C" not in d and "Step B" not in d


async def test_verimap_gives_executors_only_their_parents(sandbox):
    res, models = await run("verimap", chain_plan(), sandbox)
    assert res.status == "success"
    assert "ALPHA-RAW-OUTPUT" not in executor_prompt_for(models, "c")[0]
    judged = [json.dumps(to_openai(r.messages)) for r in models["judge"].requests]
    assert any("The answer is a number." in j for j in judged)


@pytest.mark.parametrize("method", ["map", "map-v", "map-v-1it"])
async def test_map_methods_plan_without_vfs(method, sandbox):
    res, models = await run(method, chain_plan(ALWAYS_FAILS), sandbox)
    assert res.status == "success"
    assert all(not n.verification for n in res.plans[0].nodes)
    asked = json.dumps(to_openai(models["planner"].requests[0].messages))
    assert "verification functions" not in asked


@pytest.mark.parametrize("method", ["verimap", "verimap-1it"])
async def test_verimap_methods_ask_for_vfs_and_keep_them(method, sandbox):
    res, models = await run(method, chain_plan(), sandbox)
    assert all(n.verification for n in res.plans[0].nodes)
    assert "verification functions (VFs)" in json.dumps(
        to_openai(models["planner"].requests[0].messages)
    )


async def test_map_v_judges_against_the_instruction_and_ignores_plan_vfs(sandbox):
    res, models = await run("map-v", chain_plan(ALWAYS_FAILS), sandbox)
    assert res.status == "success"
    judged = [json.dumps(to_openai(r.messages)) for r in models["judge"].requests]
    assert any("Step A: extract the numbers." in j for j in judged)
    assert not any("The answer is a number." in j for j in judged)


def plan_calls(models) -> int:
    """Calls that asked for a plan (the planner first reasons in a call of its own)."""
    return sum(r.purpose.kind != "think" for r in models["planner"].requests)


def replanned(vf_on_a):
    """A planner double that changes the failing node at every replan, as a replan must."""
    calls = itertools.count(1)

    def reply(req):
        plan = chain_plan(vf_on_a)
        plan["nodes"][0]["instruction"] += f" (plan {next(calls)})"
        return plan

    return reply


async def test_verimap_retries_and_replans_on_a_failing_vf(sandbox):
    res, models = await run("verimap", replanned(ALWAYS_FAILS), sandbox)
    assert res.status == "failed"
    assert res.iterations == 5 and plan_calls(models) == 5
    assert len(executor_prompt_for(models, "a")) == 15  # 3 attempts x 5 iterations
    assert not executor_prompt_for(models, "b")


async def test_verimap_asks_a_replanner_that_repeats_the_failed_node_for_a_change(sandbox):
    res, models = await run("verimap", chain_plan(ALWAYS_FAILS), sandbox)
    # The unchanged plan runs once more; its third return ends the run (max_plan_repeats=1).
    assert res.status == "failed" and res.iterations == 2
    assert "max_plan_repeats=1" in res.error
    assert plan_calls(models) == 1 + 2 * 2  # each replan: the reply, asked once for a change
    repairs = [
        r
        for r in models["planner"].requests
        if "exactly as in the plan that failed" in json.dumps(to_openai(r.messages))
    ]
    assert len(repairs) == 2
    assert len(executor_prompt_for(models, "a")) == 6  # the repeated plan ran once more


@pytest.mark.parametrize("method", ["verimap-1it", "map-v-1it"])
async def test_one_pass_methods_let_failed_outputs_flow_on(method, sandbox):
    plan = chain_plan(ALWAYS_FAILS)
    if method == "map-v-1it":
        models = scripted(plan)
        models["judge"] = ScriptedModel(
            lambda r: {"passed": False, "explanation": "no"} if r.purpose.final_call else "No.",
            name="strict-judge",
        )
        coord = build(models, sandbox, ToolRegistry(), method=method)
        res = await coord.run("What is 6 times 7?")
    else:
        res, models = await run(method, plan, sandbox)
    assert res.iterations == 1 and plan_calls(models) == 1
    assert len(executor_prompt_for(models, "a")) == 1
    assert res.status == "partial" and res.answer == "42"
    assert res.nodes["a"].status == "fail-accepted"


def test_every_method_has_the_paper_sampling_defaults():
    for m in METHODS:
        cfg = resolve(method=m).config
        assert (cfg.sampling.temperature, cfg.sampling.top_p) == (1.0, 1.0)
    assert (
        resolve({"sampling": {"temperature": 0.2}}, method="verimap").config.sampling.temperature
        == 0.2
    )
    assert (
        resolve({"loop": {"max_retries": 3}}, method="verimap-1it").config.loop.max_retries == 1
    )  # the method's own knob wins
    tuned = resolve(
        {"loop": {"max_retries": 2, "max_iterations": 2}, "verify": {"verification": "none"}},
        method="verimap",
    ).config
    assert (tuned.loop.max_retries, tuned.loop.max_iterations, tuned.verify.verification) == (
        2,
        2,
        "full",
    )
    assert (
        resolve(method="map-v").config.loop.max_retries == 3
        and resolve(method="verimap").config.loop.max_iterations == 5
    )


# The baselines (no coordinator, no tools) have their own end-to-end tests (test_baselines.py).
ENGINE_METHODS = [m for m, spec in METHODS.items() if spec.planner != "baseline"]


@pytest.mark.parametrize("method", ENGINE_METHODS)
@pytest.mark.parametrize("bench_name", ["gsm8k", "humaneval", "multihoprag", "mbpp"])
async def test_every_method_on_every_benchmark_end_to_end(method, bench_name, sandbox, tmp_path):
    from tests.evals.test_retrieval import HashingEmbedderDouble
    from verimap.testing import oracle_models

    kw = {"embedder": HashingEmbedderDouble()} if bench_name == "multihoprag" else {}
    data = SAMPLES / "full" if bench_name == "mbpp" else SAMPLES  # MBPP has no sample
    bench = get_benchmark(bench_name, data, **kw)
    if bench_name == "multihoprag":
        from verimap.evals.retrieval import CorpusIndex

        bench.index = CorpusIndex.build(
            bench.corpus, embedder=kw["embedder"], cache_dir=tmp_path / "cache"
        )
    models = oracle_models(bench.tasks(), wrong_every=3)
    out = await run_eval(bench, method, models, sandbox, tmp_path / "out", limit=3, progress=False)
    assert out.tally.done == 3 and out.tally.errors == 0
    assert out.tally.correct == 2  # the oracle double answers the third task wrongly
    wrong = [r for r in out.records if not r["correct"]]
    assert [r["task_id"] for r in wrong] == [bench.tasks()[2].id]
    tools_called = [m for r in models["executor"].requests for m in r.messages if m.role == "tool"]
    assert tools_called, "the executor double calls one domain tool per task"


def test_multihoprag_tasks_carry_question_type():
    bench = get_benchmark("multihoprag", SAMPLES)
    assert isinstance(bench.tasks()[0], EvalTask)
    assert {t.meta["question_type"] for t in bench.tasks()} >= {"null_query", "temporal_query"}
