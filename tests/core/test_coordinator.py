import json
from pathlib import Path

import pytest

import verimap
from verimap.base.accounting import Budget
from verimap.base.events import read_trace
from verimap.base.execution import ExecutorOutput
from verimap.base.messages import AssistantMessage, UserMessage
from verimap.base.run_context import RunContext
from verimap.config import Execution, Loop, RunConfig, Verify
from verimap.observe.picture import run_to_mermaid
from verimap.planning.fixed_planners import TemplatePlanner
from verimap.planning.planner import LLMPlanner, PlannerOptions
from verimap.testing import InProcessSandboxDouble, ScriptedModel, ScriptedWorld

PRESENT = {
    "name": "present",
    "type": "python",
    "code": "assert all(v is not None for v in outputs.values())",
}


def n(id, inputs=("USER_TASK",), outputs=("x",), vfs=(PRESENT,), instruction=None, **kw):
    return {
        "id": id,
        "instruction": instruction or f"do {id}",
        "inputs": list(inputs),
        "outputs": list(outputs),
        "verification": list(vfs),
        **kw,
    }


def pos(var="x"):
    return {
        "name": f"{var}_pos",
        "type": "python",
        "code": f"assert outputs['{var}'] > 0, '{var} must be positive'",
    }


CHAIN = {"nodes": [n("a", vfs=[pos()]), n("b", inputs=["a.x"], outputs=["y"], vfs=[pos("y")])]}


def coordinator(world, config=None, **kw):
    return verimap.build(
        world.models(), InProcessSandboxDouble(), config=config or RunConfig(), **kw
    )


async def test_success_chain_passes_values_downstream():
    world = ScriptedWorld(
        [CHAIN], lambda nid, k, inp, p: {"x": 5} if nid == "a" else {"y": inp["a.x"] * 2}
    )
    r = await coordinator(world).run("task")
    assert r.status == "success" and r.answer == 10 and r.final_node == "b"
    assert {k: v.status for k, v in r.nodes.items()} == {"a": "verified", "b": "verified"}
    assert r.iterations == 1 and r.retries == 0 and len(r.plans) == 1


async def test_only_the_final_node_is_free_of_the_do_just_your_part_sentence():
    world = ScriptedWorld(
        [CHAIN], lambda nid, k, inp, p: {"x": 5} if nid == "a" else {"y": inp["a.x"] * 2}
    )
    await coordinator(world).run("task")
    assert "nothing more" in world.executor_prompts["a"][0]
    assert "nothing more" not in world.executor_prompts["b"][0]


async def test_retry_then_pass_and_retry_prompt_has_traceback():
    world = ScriptedWorld(
        [CHAIN], lambda nid, k, inp, p: {"x": -1 if k == 0 else 3} if nid == "a" else {"y": 1}
    )
    r = await coordinator(world).run("task")
    assert r.status == "success" and r.retries == 1 and len(r.nodes["a"].attempts) == 2
    retry_prompt = world.executor_prompts["a"][1]
    assert "AssertionError: x must be positive" in retry_prompt and '{"x": -1}' in retry_prompt
    assert r.nodes["a"].attempts[0].verdicts[0].outcome == "FAIL"


async def test_replan_reuses_verified_unchanged_nodes():
    fixed = {
        "nodes": [
            CHAIN["nodes"][0],
            n("b", inputs=["a.x"], outputs=["y"], vfs=[pos("y")], instruction="do b better"),
        ]
    }

    def outputs(nid, k, inp, p):
        return {"x": 5} if nid == "a" else {"y": -1 if "better" not in p else 7}

    world = ScriptedWorld([CHAIN, fixed], outputs)
    r = await coordinator(world, RunConfig(loop=Loop(max_retries=2))).run("task")
    assert r.status == "success" and r.answer == 7 and r.iterations == 2
    assert world.executor_calls["a"] == 1  # reused, not re-run
    assert r.nodes["a"].status == "reused" and len(r.plans) == 2
    replan_prompt = world.plan_prompts()[1]
    assert "y must be positive" in replan_prompt and "a [verified]" in replan_prompt


async def test_restart_without_reuse_reruns_everything():
    fixed = {
        "nodes": [
            CHAIN["nodes"][0],
            n("b", inputs=["a.x"], outputs=["y"], vfs=[pos("y")], instruction="do b better"),
        ]
    }

    def outputs(nid, k, inp, p):
        return {"x": 5} if nid == "a" else {"y": -1 if "better" not in p else 7}

    world = ScriptedWorld([CHAIN, fixed], outputs)
    r = await coordinator(world, RunConfig(loop=Loop(max_retries=1, reuse_verified=False))).run(
        "task"
    )
    assert r.status == "success" and world.executor_calls["a"] == 2


async def test_failed_after_all_iterations():
    world = ScriptedWorld([CHAIN], lambda nid, k, inp, p: {"x": -1})
    r = await coordinator(world, RunConfig(loop=Loop(max_retries=2, max_iterations=2))).run("task")
    assert r.status == "failed" and r.iterations == 2 and r.final_output is None
    assert "'a' failed verification" in r.error
    assert world.executor_calls["a"] == 4 and "b" not in world.executor_calls
    assert r.nodes["b"].status == "skipped"


async def test_fail_accepted_continues_and_is_partial():
    world = ScriptedWorld([CHAIN], lambda nid, k, inp, p: {"x": -1} if nid == "a" else {"y": 2})
    r = await coordinator(
        world, RunConfig(loop=Loop(max_retries=1, max_iterations=1, fail_accepted=True))
    ).run("task")
    assert r.status == "partial" and r.answer == 2
    assert r.nodes["a"].status == "fail-accepted" and r.nodes["b"].status == "verified"
    assert "Input a.x:\n-1" in world.executor_prompts["b"][0]  # failed output flowed downstream


async def test_parallel_nodes_run_concurrently_and_sequential_does_not():
    plan = {
        "nodes": [n(f"p{i}") for i in range(4)]
        + [n("z", inputs=[f"p{i}.x" for i in range(4)], outputs=["y"])]
    }
    for sequential, limit, expected in ((False, 4, 4), (False, 2, 2), (True, 4, 1)):
        world = ScriptedWorld(
            [plan], lambda nid, k, inp, p: {"y": 1} if nid == "z" else {"x": 1}, latency_s=0.02
        )
        in_flight, peak = 0, 0

        def track(e):
            nonlocal in_flight, peak
            if e.type == "attempt":
                in_flight += 1
                peak = max(peak, in_flight)
            elif e.type == "attempt_result":
                in_flight -= 1

        bus = verimap.EventBus()
        bus.subscribe(track)
        r = await coordinator(
            world, RunConfig(loop=Loop(sequential=sequential, max_parallel=limit)), events=bus
        ).run("t")
        assert r.status == "success" and peak == expected
        if sequential:
            assert world.order == ["p0", "p1", "p2", "p3", "z"]


async def test_call_budget_stops_with_report():
    world = ScriptedWorld([CHAIN], lambda nid, k, inp, p: {"x": -1})
    r = await coordinator(world, RunConfig(budget=Budget(max_llm_calls=3))).run("task")
    assert r.status == "budget_exhausted" and "call budget" in r.error
    assert r.usage.total.calls == 3 == world.model.calls


async def test_wall_clock_budget():
    world = ScriptedWorld(
        [CHAIN], lambda nid, k, inp, p: {"x": 1} if nid == "a" else {"y": 1}, latency_s=0.3
    )
    r = await coordinator(world, RunConfig(budget=Budget(timeout_s=0.5))).run("task")
    assert r.status == "budget_exhausted" and "wall-clock" in r.error
    assert r.nodes.get("b") is None or r.nodes["b"].status != "verified"  # cut off mid-run


async def test_planning_and_model_errors_are_reported():
    bad = ScriptedModel(['{"nodes": []}'] * 10)
    strict = LLMPlanner(bad, None, PlannerOptions(fallback=False))
    r = await verimap.build({"executor": bad}, None, planner=strict).run("t")
    assert r.status == "failed" and "planning failed" in r.error and "empty plan" in r.error
    dead = ScriptedModel([RuntimeError("connection refused")])
    r = await verimap.build({"executor": dead}, None, planner=TemplatePlanner.single_node()).run(
        "t"
    )
    assert (
        r.status == "failed" and "connection refused" in r.error and r.usage.total.failed_calls == 1
    )


async def test_trace_events_and_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-abcdefghijklmnop")
    world = ScriptedWorld(
        [CHAIN], lambda nid, k, inp, p: {"x": -1 if k == 0 else 1} if nid == "a" else {"y": 1}
    )
    seen = []
    bus = verimap.EventBus()
    bus.subscribe(seen.append)
    r = await coordinator(world, events=bus, trace_dir=tmp_path).run(
        "use sk-test-SECRET-abcdefghijklmnop please"
    )
    text = Path(r.trace_path).read_text()
    assert "SECRET" not in text
    types = [e.type for e in read_trace(r.trace_path)]
    for t in (
        "run_start",
        "plan",
        "node_start",
        "attempt",
        "vf_verdict",
        "retry",
        "node_finish",
        "finish",
    ):
        assert t in types
    assert [e.type for e in seen] == types


async def test_every_model_call_reaches_the_trace_inside_its_attempt(tmp_path):
    world = ScriptedWorld(
        [CHAIN], lambda nid, k, inp, p: {"x": -1 if k == 0 else 1} if nid == "a" else {"y": 1}
    )
    r = await coordinator(world, trace_dir=tmp_path).run("task")
    calls = [e for e in read_trace(r.trace_path) if e.type == "model_call"]
    assert len(calls) == world.model.calls == r.usage.total.calls
    planner = [e for e in calls if e.data["role"] == "planner"]
    executor = [(e.node_id, e.attempt) for e in calls if e.data["role"] == "executor"]
    assert planner and all(e.node_id is None and e.iteration == 1 for e in planner)
    assert executor == [("a", 1), ("a", 2), ("b", 1)]
    assert sum(e.data["prompt_tokens"] for e in calls) == r.usage.total.prompt_tokens
    assert all(e.data["model"] == "scripted-world" and e.data["duration_s"] >= 0 for e in calls)
    # What was said stays out: the instruction is in every executor prompt.
    assert not any("do a" in json.dumps(e.data) for e in calls)


async def test_context_generations_show_grandparents():
    plan = {"nodes": [n("a"), n("b", inputs=["a.x"]), n("c", inputs=["b.x"], outputs=["y"])]}
    world = ScriptedWorld(
        [plan], lambda nid, k, inp, p: {"y": 1} if nid == "c" else {"x": f"val-{nid}"}
    )
    await coordinator(world, RunConfig(execution=Execution(context_generations=2))).run("task")
    assert "val-a" in world.executor_prompts["c"][0]
    world2 = ScriptedWorld(
        [plan], lambda nid, k, inp, p: {"y": 1} if nid == "c" else {"x": f"val-{nid}"}
    )
    await coordinator(world2).run("task")
    assert "val-a" not in world2.executor_prompts["c"][0]


async def test_picture_colours_nodes_by_status():
    world = ScriptedWorld([CHAIN], lambda nid, k, inp, p: {"x": -1})
    r = await coordinator(world, RunConfig(loop=Loop(max_retries=1, max_iterations=1))).run("task")
    m = run_to_mermaid(r)
    assert "class a failed" in m and "class b skipped" in m and "classDef verified" in m


def test_run_sync_outside_loop():
    world = ScriptedWorld([CHAIN], lambda nid, k, inp, p: {"x": 1} if nid == "a" else {"y": 2})
    assert coordinator(world).run_sync("t").answer == 2


GSM_PLAN = {
    "nodes": [
        n(
            "extract",
            outputs=["a", "b"],
            vfs=[
                {
                    "name": "ints",
                    "type": "python",
                    "code": "assert all(isinstance(outputs[k], int) for k in ('a', 'b'))",
                }
            ],
        ),
        n(
            "add",
            inputs=["extract.a", "extract.b"],
            outputs=["answer"],
            vfs=[
                {
                    "name": "sum",
                    "type": "python",
                    "code": "assert outputs['answer'] == inputs['a'] + inputs['b']",
                },
                {"name": "sane", "type": "llm", "content": "answer is the sum"},
            ],
        ),
    ]
}


def gsm_outputs(nid, k, inp, p):
    return {"a": 2, "b": 3} if nid == "extract" else {"answer": inp["extract.a"] + inp["extract.b"]}


@pytest.mark.parametrize(
    "method,config,planner",
    [
        (
            "react",
            RunConfig(verify=Verify(verification="none")),
            TemplatePlanner.single_node(outputs=["answer"]),
        ),
        (
            "map",
            RunConfig(
                verify=Verify(verification="none"), execution=Execution(context_generations=2)
            ),
            None,
        ),
        ("map-v", RunConfig(verify=Verify(verification="instruction")), None),
        ("verimap", RunConfig(), None),
        (
            "verimap-1it",
            RunConfig(loop=Loop(max_retries=1, max_iterations=1, fail_accepted=True)),
            None,
        ),
    ],
)
async def test_eval_presets_end_to_end(method, config, planner):
    """The eval methods are presets of RunConfig and planners; each runs end to end."""
    judged = []

    def judge(nid, criterion, outs):
        judged.append(criterion)
        return True, "ok"

    world = ScriptedWorld(
        [GSM_PLAN],
        lambda nid, k, inp, p: {"answer": 5} if nid == "solve" else gsm_outputs(nid, k, inp, p),
        judge,
    )
    if planner is not None:
        world.plans = [await planner.plan("t", ctx=RunContext())]
    r = await verimap.build(
        world.models(), InProcessSandboxDouble(), config=config, planner=planner
    ).run("2+3?")
    assert r.status == "success" and r.answer == 5
    if method in ("react", "map"):
        assert judged == []
    elif method == "map-v":
        assert judged and all(c.startswith("The outputs correctly") for c in judged)
    else:
        assert judged == ["answer is the sum"]
    assert r.usage.total.calls == world.model.calls
    assert json.loads(r.model_dump_json())["status"] == "success"


async def test_broken_custom_components_still_yield_a_report(tmp_path):
    class BrokenPlanner:
        async def plan(self, task, *, ctx):
            raise RuntimeError("planner bug")

        async def replan(self, task, previous, failure, *, ctx):
            raise AssertionError

    m = ScriptedModel([])
    r = await verimap.build({"executor": m}, None, planner=BrokenPlanner(), trace_dir=tmp_path).run(
        "t"
    )
    assert r.status == "failed" and r.error == "internal error: RuntimeError: planner bug"
    assert [e.type for e in read_trace(r.trace_path)][-2:] == ["error", "finish"]
    bad_template = TemplatePlanner(lambda task: {"nodes": []})
    r = await verimap.build({"executor": m}, None, planner=bad_template).run("t")
    assert r.status == "failed" and "empty plan" in r.error


async def test_rejected_plans_are_events():
    no_vfs = {"nodes": [n("a", vfs=[])]}
    world = ScriptedWorld(
        [no_vfs, CHAIN], lambda nid, k, inp, p: {"x": 1} if nid == "a" else {"y": 1}
    )
    seen = []
    bus = verimap.EventBus()
    bus.subscribe(seen.append)
    r = await coordinator(world, events=bus).run("t")
    assert r.status == "success"
    invalid = [e for e in seen if e.type == "plan_invalid"]
    assert len(invalid) == 1 and "no verification functions" in invalid[0].data["problems"][0]


async def test_a_stray_timeout_error_is_not_mistaken_for_the_budget():
    class TimingOutPlanner:
        async def plan(self, task, *, ctx):
            raise TimeoutError("socket read")

        async def replan(self, task, previous, failure, *, ctx):
            raise AssertionError

    cfg = RunConfig(budget=Budget(timeout_s=30))
    r = await verimap.build(
        {"executor": ScriptedModel([])}, None, planner=TimingOutPlanner(), config=cfg
    ).run("t")
    assert r.status == "failed" and "TimeoutError: socket read" in r.error


async def test_end_to_end_with_the_process_sandbox():
    """The same run through the real (process) sandbox backend, not the in-process double."""
    import warnings

    from verimap.sandbox import get_sandbox

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sandbox = get_sandbox("process")
    world = ScriptedWorld(
        [CHAIN], lambda nid, k, inp, p: {"x": -2 if k == 0 else 4} if nid == "a" else {"y": 8}
    )
    try:
        r = await verimap.build(world.models(), sandbox).run("task")
    finally:
        await sandbox.aclose()
    assert r.status == "success" and r.answer == 8 and r.retries == 1
    first = r.nodes["a"].attempts[0].verdicts[0]
    assert (
        first.outcome == "FAIL"
        and first.message == "x must be positive"
        and "AssertionError" in first.traceback
    )


async def test_executor_tool_calls_reach_the_trace(tmp_path):
    from verimap.testing import tool_call_reply

    m = ScriptedModel(
        [tool_call_reply("calculator", {"expression": "6*7"}), "It is 42.", '{"answer": 42}']
    )
    trace = tmp_path / "t.jsonl"
    coord = verimap.build(
        {"executor": m},
        None,
        config=RunConfig(verify=Verify(verification="none")),
        planner=TemplatePlanner.single_node(outputs=["answer: number"]),
    )
    r = await coord.run("What is 6*7?", trace_path=trace)
    assert r.final_output == {"answer": 42}
    calls = [e for e in read_trace(trace) if e.type == "tool_call"]
    assert len(calls) == 1 and calls[0].node_id == "solve" and calls[0].attempt == 1
    assert calls[0].data["tool"] == "calculator" and calls[0].data["result"] == "42"
    assert json.loads(calls[0].data["arguments"]) == {"expression": "6*7"}


async def test_each_attempt_in_the_trace_carries_what_the_executor_wrote():
    """A wrong answer that passed its VFs is understood only from the executor's working, so
    every attempt_result event has it."""
    world = ScriptedWorld(
        [CHAIN], lambda nid, k, inp, p: {"x": -1 if k == 0 else 5} if nid == "a" else {"y": 2}
    )
    results = []
    bus = verimap.EventBus()
    bus.subscribe(lambda e: results.append(e.data) if e.type == "attempt_result" else None)
    r = await coordinator(world, RunConfig(loop=Loop(max_retries=2)), events=bus).run("task")
    assert r.status == "success"
    assert [(d["passed"], d["reply"]) for d in results[:2]] == [
        (False, '{"x": -1}'),
        (True, '{"x": 5}'),
    ]
    long = ExecutorOutput(
        messages=[AssistantMessage(content="w" * 5000), UserMessage(content="USERTEXT")]
    )
    assert 3900 <= len(long.reply()) <= 4000 and "USERTEXT" not in long.reply()


async def test_a_replan_that_keeps_the_failed_work_goes_on_from_its_last_feedback():
    """Under greedy decoding an unchanged node restarted from nothing repeats its first failed
    answer; it starts from what its last retry was told instead. Changed work starts fresh."""
    one = {"nodes": [n("a", vfs=[pos()])]}
    changed = {"nodes": [n("a", vfs=[pos()], instruction="do a better")]}
    for plans, carried in (([one, one], True), ([one, changed], False)):
        world = ScriptedWorld(plans, lambda nid, k, inp, p: {"x": 5 if k >= 3 else -1})
        r = await coordinator(world, RunConfig(loop=Loop(max_retries=2, max_iterations=2))).run(
            "task"
        )
        assert world.executor_calls["a"] == 4 and r.iterations == 2 and r.status == "success"
        first_of_second = world.executor_prompts["a"][2]
        assert ("This is a retry" in first_of_second) is carried
        assert ("x must be positive" in first_of_second) is carried
