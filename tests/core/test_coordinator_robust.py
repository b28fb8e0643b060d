"""Runs that verification makes better, not worse: typed outputs, vacuous VFs, the fallback
plan, replan blame, feedback that fits, and the best unverified answer of a failed run."""

import json

import pytest

import verimap
from verimap.base.accounting import Budget
from verimap.base.events import EventBus
from verimap.base.model import ModelError
from verimap.base.sandbox import SandboxUnavailable
from verimap.config import Execution, Loop, Planning, RunConfig, Sampling, Verify
from verimap.planning.fixed_planners import TemplatePlanner
from verimap.planning.planner import LLMPlanner, PlannerOptions
from verimap.testing import InProcessSandboxDouble, ScriptedModel, ScriptedWorld, tool_call_reply


def node(id, outputs, vfs, inputs=("USER_TASK",), instruction=None):
    return {
        "id": id,
        "instruction": instruction or f"do {id}",
        "inputs": list(inputs),
        "outputs": outputs,
        "verification": vfs,
    }


def py(name, code):
    return {"name": name, "type": "python", "code": code}


POSITIVE = py("positive", "assert outputs['price'] > 0, 'price must be positive'")
VACUOUS = py("typed", "assert isinstance(outputs['price'], (int, float))")


def run(world, config=None, sandbox=None, events=None):
    config = config or RunConfig()
    coord = verimap.build(
        world.models(), sandbox or InProcessSandboxDouble(), config=config, events=events
    )
    return coord.run("task")


def recorded(bus: EventBus) -> list:
    seen: list = []
    bus.subscribe(seen.append)
    return seen


async def test_an_output_that_does_not_fit_its_type_fails_the_attempt_before_any_vf():
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    world = ScriptedWorld(
        [plan], lambda nid, k, inp, p: {"price": {"value": 17}} if k < 2 else {"price": "17"}
    )
    sandbox = InProcessSandboxDouble()
    r = await run(
        world, RunConfig(loop=Loop(max_retries=3), verify=Verify(vacuity_check=False)), sandbox
    )
    assert r.status == "success" and r.answer == 17 and isinstance(r.answer, int)
    first, _, third = r.nodes["ex"].attempts
    assert third.passed and third.verdicts[0].passed
    assert first.error == 'price: expected number, got object {"value": 17}' and not first.verdicts
    assert 'price: expected number, got object {"value": 17}' in world.executor_prompts["ex"][1]
    # The VF ran on the well-typed answer only (and on a nearby wrong one, probing its strength).
    assert [c[2] for c in sandbox.calls] == [{"price": 17}, {"price": 18}]
    assert "Required outputs: price (number)" in world.executor_prompts["ex"][0]


async def test_consumers_see_the_producers_type_beside_each_input():
    plan = {
        "nodes": [
            node("ex", {"price": "number"}, [POSITIVE]),
            node(
                "tw",
                {"total": "number"},
                [py("dbl", "assert approx(outputs['total'], 2 * inputs['ex.price'])")],
                inputs=["ex.price"],
            ),
        ]
    }
    world = ScriptedWorld(
        [plan],
        lambda nid, k, inp, p: {"price": 4} if nid == "ex" else {"total": 2 * inp["ex.price"]},
    )
    r = await run(world)
    assert r.status == "success" and r.answer == 8
    assert "Input ex.price (number):\n4\n" in world.executor_prompts["tw"][0]


async def test_a_vacuous_vf_goes_back_to_the_planner_once_then_the_repair_runs():
    bad = {"nodes": [node("ex", {"price": "number"}, [VACUOUS])]}
    good = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    world = ScriptedWorld([bad, good], lambda nid, k, inp, p: {"price": 3})
    r = await run(world)
    assert r.status == "success" and world.planner_calls == 2 and r.dropped_vfs == []
    assert [v.name for v in r.plans[0].nodes[0].verification] == ["positive"]
    repair = world.plan_prompts()[1]
    assert "python VF 'typed' passes on empty outputs and on absurd ones" in repair


async def test_a_vf_still_vacuous_after_repair_is_dropped_and_recorded():
    bad = {"nodes": [node("ex", {"price": "number"}, [VACUOUS, POSITIVE])]}
    world = ScriptedWorld([bad], lambda nid, k, inp, p: {"price": 3})
    bus = EventBus()
    seen = recorded(bus)
    r = await run(world, events=bus)
    assert r.status == "success" and r.dropped_vfs == ["1:ex.typed (vacuous)"]
    assert [v.name for v in r.plans[0].nodes[0].verification] == ["positive"]
    assert [(e.node_id, e.data["vf"]) for e in seen if e.type == "vf_vacuous"] == [("ex", "typed")]
    assert [v.name for v in r.nodes["ex"].verdicts] == ["positive"]


async def test_vfs_that_check_something_are_not_vacuous():
    vfs = [
        POSITIVE,
        py("bounded", "assert outputs['price'] >= 0"),
        py("examples", "f = load_function(outputs['impl'], 'f')"),
        py("inputs_only", "assert inputs['USER_TASK']"),
    ]
    plan = {"nodes": [node("ex", {"price": "number", "impl": "code"}, vfs)]}
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": 3})
    verifier = verimap.build(world.models(), InProcessSandboxDouble()).verifier
    found = await verifier.vacuous_vfs(verimap.parse_plan(plan), "a task")
    assert found == [("ex", "inputs_only")]


async def test_no_valid_plan_falls_back_to_one_typed_node_and_the_result_says_so():
    planner = LLMPlanner(
        ScriptedModel(['{"nodes": []}'] * 4), None, PlannerOptions(max_repairs=3, think_first=False)
    )
    executor = ScriptedModel(['{"answer": "42"}'])
    bus = EventBus()
    seen = recorded(bus)
    coord = verimap.build(
        {"executor": executor}, InProcessSandboxDouble(), planner=planner, events=bus
    )
    r = await coord.run("What is six times seven?")
    assert r.status == "success" and r.answer == 42 and executor.calls == 1
    # A finite number is all the fallback's VF checks: the answer is not thereby verified.
    assert not r.verified and "only weak checks passed (finite_number)" in r.unverified_reason
    assert r.fallback_iterations == [1] and len(r.plans) == 1
    assert r.plans[0].nodes[0].outputs == {"answer": "number"}
    assert [e.type for e in seen].count("plan_fallback") == 1


async def test_an_executor_error_keeps_the_plan_once_before_a_replan():
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": "a lot"})
    bus = EventBus()
    seen = recorded(bus)
    config = RunConfig(loop=Loop(max_retries=2, max_iterations=3, max_plan_repeats=None))
    r = await run(world, config, events=bus)
    types = [e.type for e in seen]
    assert r.status == "failed" and r.iterations == 3
    assert types.count("plan_kept") == 1 and types.count("replan") == 1
    assert world.planner_calls == 2
    # The kept iteration starts from the last feedback rather than from scratch.
    assert "This is a retry" in world.executor_prompts["ex"][2]


@pytest.mark.parametrize("limit", [0, 1, 2, None])
async def test_a_replan_that_returns_failed_work_unchanged_ends_the_run(limit):
    plan = {
        "nodes": [node("ex", {"price": "number"}, [py("big", "assert outputs['price'] > 100")])]
    }
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": 3})
    config = RunConfig(loop=Loop(max_retries=1, max_iterations=5, max_plan_repeats=limit))
    r = await run(world, config)
    assert r.status == "failed" and not r.verified and r.final_output == {"price": 3}
    runs = 5 if limit is None else min(limit + 1, 5)
    assert r.iterations == runs == len(r.plans) == len(world.executor_prompts["ex"])
    assert ("returned its work unchanged" in r.error) == (limit is not None)


async def test_a_changed_replan_is_not_a_repeat():
    plans = [
        {"nodes": [node("ex", {"price": "number"}, [py("big", f"assert outputs['price'] > {b}")])]}
        for b in (100, 200, 300)
    ]
    world = ScriptedWorld(plans, lambda nid, k, inp, p: {"price": 3})
    r = await run(world, RunConfig(loop=Loop(max_retries=1, max_iterations=3, max_plan_repeats=0)))
    assert r.iterations == 3 and "spent" in r.error


async def test_feedback_is_cut_to_fit_the_context():
    huge = py("huge", "assert outputs['price'] > 100, 'x' * 50000")
    plan = {"nodes": [node("ex", {"price": "number"}, [huge])]}
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": 3})
    r = await run(world, RunConfig(loop=Loop(max_retries=2, max_iterations=2)))
    assert r.status == "failed"
    retry = world.executor_prompts["ex"][1]
    assert len(retry) < 6000 and "characters cut" in retry
    replan = world.plan_prompts()[1]
    assert len(replan) < 16000 and "characters cut" in replan


async def test_a_failed_run_keeps_its_best_answer_unverified():
    plan = {
        "nodes": [
            node(
                "ex", {"price": "number"}, [py("big", "assert outputs['price'] > 100, 'too small'")]
            )
        ]
    }
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": 3 + k})
    r = await run(
        world,
        RunConfig(
            loop=Loop(max_retries=2, max_iterations=1), verify=Verify(unverified_answer="last")
        ),
    )
    assert r.status == "failed" and not r.verified and r.final_output == {"price": 4}


async def test_an_unverified_answer_is_the_one_most_attempts_gave_first_on_a_tie():
    plan = {
        "nodes": [
            node(
                "ex", {"price": "number"}, [py("big", "assert outputs['price'] > 100, 'too small'")]
            )
        ]
    }
    answers = [7, 5, 5.0, 9, 7, 8]
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": answers[k]})
    r = await run(world, RunConfig(loop=Loop(max_retries=3, max_iterations=2)))
    assert r.status == "failed" and not r.verified and r.iterations == 2
    assert r.final_output == {"price": 7}  # 7 twice, 5 twice (5.0 is 5): 7 came first
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": answers[k]})
    r = await run(world, RunConfig(loop=Loop(max_retries=3, max_iterations=1)))
    assert r.final_output == {"price": 5}


async def test_the_judge_is_not_asked_once_a_python_vf_failed():
    judge_asked = []
    plan = {
        "nodes": [
            node(
                "ex",
                {"price": "number"},
                [
                    py("big", "assert outputs['price'] > 100"),
                    {"name": "j", "type": "llm", "content": "plausible"},
                ],
            )
        ]
    }
    world = ScriptedWorld(
        [plan],
        lambda nid, k, inp, p: {"price": 3 if k == 0 else 300},
        judge=lambda nid, c, o: (judge_asked.append(o) or True, "ok"),
    )
    r = await run(world, RunConfig(loop=Loop(max_retries=2)))
    assert r.status == "success" and judge_asked == [{"price": 300}]
    skipped = r.nodes["ex"].attempts[0].verdicts[1]
    assert skipped.outcome == "SKIPPED" and "not judged" in skipped.message


async def test_retries_sample_at_the_retry_temperature():
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": -1 if k < 2 else 2})
    r = await run(
        world,
        RunConfig(
            sampling=Sampling(temperature=0.0, retry_temperature=0.7),
            verify=Verify(vacuity_check=False),
        ),
    )
    assert r.status == "success" and len(r.nodes["ex"].attempts) == 3
    temps = [q.settings.temperature for q in world.model.requests if q.role == "executor"]
    assert temps == [0.0, 0.7, 0.7]


async def test_vfs_the_planner_dropped_are_in_the_result():
    noop = py("noop", "x = outputs['price']")
    bad = {"nodes": [node("ex", {"price": "number"}, [POSITIVE, noop])]}
    planner = LLMPlanner(
        ScriptedModel([json.dumps(bad)] * 2), None, PlannerOptions(max_repairs=1, think_first=False)
    )
    executor = ScriptedModel(['{"price": 3}'])
    coord = verimap.build({"executor": executor}, InProcessSandboxDouble(), planner=planner)
    r = await coord.run("task")
    assert r.status == "success" and r.dropped_vfs and r.dropped_vfs[0].startswith("1:ex.noop (")


# -- infrastructure failures: never an answer of the method -----------------------------------


class _BrokenSandbox(InProcessSandboxDouble):
    """A sandbox that cannot run anything: VFs and programs raise SandboxUnavailable."""

    async def run_vf(self, code, inputs, outputs, *, timeout=10.0):
        raise SandboxUnavailable("Docker daemon did not answer within 5s")

    async def run_program(self, code, *, timeout=10.0, files=None, argv=None, stdin=""):
        raise SandboxUnavailable("Docker daemon did not answer within 5s")


def _outage(*a):
    raise ModelError("the model endpoint http://127.0.0.1:9/v1 is unreachable after 3 attempts")


async def test_a_model_error_ends_the_run_as_an_infrastructure_failure():
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    r = await run(ScriptedWorld([plan], _outage), RunConfig(verify=Verify(vacuity_check=False)))
    assert r.status == "failed" and r.error_kind == "infrastructure"
    assert r.error.startswith("model error: ") and "unreachable after 3 attempts" in r.error


async def test_a_sandbox_that_cannot_run_a_tool_ends_the_run_as_an_infrastructure_failure():
    executor = ScriptedModel([tool_call_reply("python", {"code": "print(6*7)"}), '{"answer": 42}'])
    planner = TemplatePlanner.single_node(outputs=["answer"])
    coord = verimap.build({"executor": executor}, _BrokenSandbox(), planner=planner)
    r = await coord.run("task")
    assert r.status == "failed" and r.error_kind == "infrastructure"
    assert r.error == "sandbox unavailable: Docker daemon did not answer within 5s"


async def test_a_vf_the_sandbox_could_not_judge_makes_a_failed_run_an_infrastructure_failure():
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": 3})
    cfg = RunConfig(loop=Loop(max_retries=2, max_iterations=1), verify=Verify(vacuity_check=False))
    r = await run(world, cfg, _BrokenSandbox())
    assert r.status == "failed" and r.error_kind == "infrastructure"
    assert r.error.startswith("sandbox error in VF 'positive' of node 'ex': SandboxUnavailable")
    assert "(and 1 more); the run then ended: node 'ex' failed verification" in r.error


async def test_a_judge_outage_the_verifier_absorbed_still_marks_a_failed_run():
    plan = {
        "nodes": [
            node(
                "ex",
                {"price": "number"},
                [{"name": "plausible", "type": "llm", "content": "a plausible price"}],
            )
        ]
    }
    calls = []

    def judge(nid, criterion, outs):
        calls.append(criterion)
        if len(calls) == 1:
            _outage()
        return True, "plausible"

    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": 3}, judge)
    once = await run(
        world,
        RunConfig(loop=Loop(max_retries=1, max_iterations=1), verify=Verify(vacuity_check=False)),
    )
    assert once.status == "failed" and once.error_kind == "infrastructure"
    assert once.error.startswith("judge model error: the model endpoint")
    # The same outage, then a retry that verified: the answer stands and is scored.
    calls.clear()
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": 3}, judge)
    again = await run(
        world,
        RunConfig(loop=Loop(max_retries=2, max_iterations=1), verify=Verify(vacuity_check=False)),
    )
    assert again.status == "success" and again.error_kind is None and again.retries == 1


async def test_a_verification_failure_is_no_infrastructure_failure():
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": -1})
    r = await run(
        world,
        RunConfig(loop=Loop(max_retries=1, max_iterations=1), verify=Verify(vacuity_check=False)),
    )
    assert r.status == "failed" and r.error_kind is None and r.answer == -1


# -- agreement (opt-in): a final numeric answer must come out the same twice -----------------


async def test_a_final_answer_verifies_once_an_independent_attempt_agrees():
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    answers = [7, 9, 9.0]
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": answers[k]})
    bus = EventBus()
    seen = recorded(bus)
    r = await run(
        world,
        RunConfig(
            verify=Verify(agreement=2), sampling=Sampling(temperature=0.0, retry_temperature=0.7)
        ),
        events=bus,
    )
    assert r.status == "success" and r.final_output == {"price": 9}
    assert len(r.nodes["ex"].attempts) == 3 and r.iterations == 1
    # later attempts are fresh samples: no feedback, the retry temperature
    temps = [q.settings.temperature for q in world.model.requests if q.role == "executor"]
    assert temps == [0.0, 0.7, 0.7]
    assert all("This is a retry" not in prompt for prompt in world.executor_prompts["ex"])
    assert [e.type for e in seen].count("agreement") == 2


async def test_answers_that_never_agree_end_the_run_unverified_without_a_replan():
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    answers = [7, 8, 9, 10]
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": answers[k]})
    r = await run(
        world, RunConfig(verify=Verify(agreement=2), loop=Loop(max_retries=3, max_iterations=5))
    )
    assert r.status == "failed" and not r.verified and world.planner_calls == 1
    assert r.final_output == {"price": 7}  # no answer twice: the first (greedy) one
    assert r.nodes["ex"].status == "unconfirmed" and len(r.nodes["ex"].attempts) == 4
    assert "did not agree" in (r.error or "")


async def test_agreement_leaves_vf_retries_alone_and_skips_what_cannot_be_compared():
    # A VF failure still costs one of max_retries; agreement only adds attempts after a pass.
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": -1})
    r = await run(
        world, RunConfig(verify=Verify(agreement=2), loop=Loop(max_retries=2, max_iterations=1))
    )
    assert len(r.nodes["ex"].attempts) == 2 and r.nodes["ex"].status == "failed"
    # Code and text answers, and nodes that are not final, verify on one passing attempt.
    nonempty = py("nonempty", "assert outputs['code'].strip()")
    code = {"nodes": [node("ex", {"code": "code"}, [nonempty])]}
    world = ScriptedWorld([code], lambda nid, k, inp, p: {"code": f"x = {k}\n"})
    r = await run(world, RunConfig(verify=Verify(agreement=2)))
    assert r.status == "success" and len(r.nodes["ex"].attempts) == 1
    chain = {
        "nodes": [
            node("a", {"price": "number"}, [POSITIVE]),
            node("b", {"price": "number"}, [POSITIVE], inputs=["a.price"]),
        ]
    }
    world = ScriptedWorld([chain], lambda nid, k, inp, p: {"price": 5})
    r = await run(world, RunConfig(verify=Verify(agreement=2)))
    assert r.status == "success" and [len(r.nodes[n].attempts) for n in "ab"] == [1, 2]


async def test_plan_repairs_bound_the_planner_before_the_fallback():
    planner = ScriptedModel(['{"nodes": []}'] * 4)
    executor = ScriptedModel(['{"answer": "42"}'])
    config = RunConfig(planning=Planning(plan_repairs=1))
    coord = verimap.build(
        {"planner": planner, "executor": executor}, InProcessSandboxDouble(), config=config
    )
    r = await coord.run("What is six times seven?")
    assert r.answer == 42 and r.fallback_iterations == [1] and planner.calls == 2


async def test_fresh_code_retries_alternate_repair_and_a_fresh_start_across_iterations():
    returns_one = py("two", "assert 'return 2' in outputs['code'], 'f() is 1, expected 2'")
    plan = {"nodes": [node("ex", {"code": "code"}, [returns_one])]}

    def code(nid, k, inp, p):
        return {"code": f"def f():\n    # attempt {k}\n    return {2 if k == 3 else 1}\n"}

    world = ScriptedWorld([plan], code)
    config = RunConfig(
        execution=Execution(fresh_code_retries=True),
        loop=Loop(max_retries=2, max_iterations=3),
        verify=Verify(vacuity_check=False),
    )
    r = await run(world, config)
    assert r.verified and r.iterations == 2 and len(r.nodes["ex"].attempts) == 4
    prompts_ = world.executor_prompts["ex"]
    # Failures 1 and 3 are repaired (their code shown), 2 starts afresh; the turn goes on
    # across the iteration boundary (attempt 3 is the next plan's first).
    shown = [
        "# attempt 0" in prompts_[1],
        "# attempt 1" in prompts_[2],
        "# attempt 2" in prompts_[3],
    ]
    assert shown == [True, False, True]
    fresh = prompts_[2]
    assert "This is a new attempt" in fresh and "expected 2" in fresh
    assert "def f()" not in fresh and "why the previous code fails" not in fresh
    assert "why the previous code fails" in prompts_[3]
    # Off (the paper), every retry repairs; a node whose answer is not code always does.
    world = ScriptedWorld([plan], code)
    await run(world, RunConfig(loop=Loop(max_retries=5), verify=Verify(vacuity_check=False)))
    assert all(f"# attempt {k}" in p for k, p in enumerate(world.executor_prompts["ex"][1:]))
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": -k - 1 if k < 3 else 3})
    await run(
        world,
        RunConfig(
            execution=Execution(fresh_code_retries=True),
            verify=Verify(vacuity_check=False),
            loop=Loop(max_retries=4),
        ),
    )
    assert all(
        f"-{k}" in p and "new attempt" not in p
        for k, p in enumerate(world.executor_prompts["ex"][1:], 1)
    )


async def test_a_run_its_budget_stops_keeps_its_best_answer_so_far_unverified():
    """Nothing is lost: an attempt paid for still answers, marked unverified."""
    plan = {"nodes": [node("ex", {"price": "number"}, [POSITIVE])]}
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"price": -1})
    config = RunConfig(verify=Verify(vacuity_check=False), budget=Budget(max_llm_calls=2))
    r = await run(world, config)
    assert r.status == "budget_exhausted" and r.answer == -1 and not r.verified
    assert r.unverified_reason == "the run ended budget_exhausted"
