import pytest

import verimap
from verimap.config import RunConfig
from verimap.cross_check import NAME, agree, answer_from, numeric_answer
from verimap.events import CROSS_CHECK, EventBus
from verimap.llm.base import ModelError
from verimap.plan import parse_plan
from verimap.sandbox.base import ExecResult, Outcome
from verimap.sandbox.process import ProcessSandbox
from verimap.testing import InProcessSandboxDouble, ScriptedWorld

POSITIVE = {"name": "positive", "type": "python", "code": "assert outputs['total'] > 0"}
PLAN = {
    "nodes": [
        {"id": "extract", "instruction": "extract", "inputs": ["USER_TASK"],
         "outputs": {"price": "number"},
         "verification": [{"name": "pos", "type": "python", "code": "assert outputs['price'] > 0"}]},
        {"id": "solve", "instruction": "solve", "inputs": ["USER_TASK", "extract.price"],
         "outputs": {"total": "number"}, "verification": [POSITIVE]},
    ]
}  # fmt: skip
CONFIG = RunConfig(
    cross_check=True, cross_check_by="reply", vacuity_check=False, check_arithmetic=False,
    max_retries=3,
)  # fmt: skip
BY_PROGRAM = CONFIG.model_copy(update={"cross_check_by": "program"})


def run(world, config=CONFIG, events=None, sandbox=None):
    coordinator = verimap.build(
        world.models(), sandbox or InProcessSandboxDouble(), config=config, events=events
    )
    return coordinator.run("17 pens?")


@pytest.fixture
async def programs():
    """The real process backend: the check runs the model's program as the Docker one would."""
    sandbox = ProcessSandbox(warn=False, pool_size=1)
    yield sandbox
    await sandbox.aclose()


def solved_as(answer):
    return lambda task: f"{task.strip()} costs 17 each.\n17 * 23 = 391.\nThe answer is {answer}."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("17 * 23 = 391.\nThe answer is 391.", 391.0),
        ("So the total is $1,250.50, and the answer is: **$1,250.50**", 1250.5),
        ("First 3 boxes, then 12 more, 15 in all", 15.0),
        ("The answer is -4.", -4.0),
        ("I cannot tell.", None),
    ],
)
def test_the_number_a_solution_ends_on(text, expected):
    assert answer_from(text) == expected


def test_only_a_single_number_answer_can_be_compared():
    def first(outputs, values):
        n = parse_plan({"nodes": [{"id": "a", "instruction": "x", "outputs": outputs}]}).nodes[0]
        return numeric_answer(n, values)

    assert first({"total": "number"}, {"total": 391}) == ("total", 391.0)
    assert first(["total"], {"total": 2.5}) == ("total", 2.5)
    assert first({"total": "integer"}, {"total": True}) is None
    assert first({"total": "string"}, {"total": "391"}) is None
    assert first({"a": "number", "b": "number"}, {"a": 1, "b": 2}) is None
    assert first({"code": "code"}, {"code": "def f(): pass"}) is None


def test_answers_agree_up_to_rounding_only():
    assert agree(91.6667, 91.67) and agree(391, 391.0) and agree(1e-9, 0)
    assert not agree(100, 101) and not agree(20, 60) and not agree(1_000_000, 1_000_100)


async def test_an_answer_that_agrees_passes_and_the_solution_is_asked_once():
    world = ScriptedWorld(
        [PLAN], lambda nid, k, inp, p: {"price": 17} if nid == "extract" else {"total": 391},
        solve=solved_as(391),
    )  # fmt: skip
    r = await run(world)
    assert r.status == "success" and r.answer == 391
    verdicts = {v.name: v.outcome for v in r.nodes["solve"].verdicts}
    assert verdicts == {"positive": "PASS", NAME: "PASS"}
    assert NAME not in {v.name for v in r.nodes["extract"].verdicts}
    assert [q.role for q in world.model.requests].count("judge") == 1
    assert r.usage.roles["judge"].calls == 1


async def test_a_disagreeing_answer_fails_and_its_retry_is_not_told_the_other_number():
    world = ScriptedWorld(
        [PLAN], lambda nid, k, inp, p: {"price": 17} if nid == "extract" else {"total": [340, 391][min(k, 1)]},
        solve=solved_as(391),
    )  # fmt: skip
    bus = EventBus()
    seen: list = []
    bus.subscribe(seen.append)
    r = await run(world, events=bus)
    assert r.status == "success" and r.answer == 391 and r.iterations == 1
    first, second = r.nodes["solve"].attempts
    (check,) = [v for v in first.verdicts if v.name == NAME]
    assert check.type == "check" and check.outcome == "FAIL" and not first.passed
    assert "gives another number than total = 340" in check.message
    retry_prompt = world.executor_prompts["solve"][1]
    assert "gives another number than total = 340" in retry_prompt
    assert "391" not in retry_prompt  # a retry shown the other number copies it
    assert second.passed
    (event,) = [e for e in seen if e.type == CROSS_CHECK]
    assert event.data["answer"] == 391 and "The answer is 391." in event.data["reply"]
    assert event.node_id == "solve" and event.attempt == 1
    assert [q.role for q in world.model.requests].count("judge") == 1


async def test_answers_that_never_agree_end_the_run_unverified_without_a_replan():
    world = ScriptedWorld(
        [PLAN], lambda nid, k, inp, p: {"price": 17} if nid == "extract" else {"total": [340, 350][k % 2]},
        solve=solved_as(391),
    )  # fmt: skip
    r = await run(world)
    assert r.status == "failed" and not r.verified and r.answer == 340
    assert r.iterations == 1 and world.planner_calls == 1
    assert r.nodes["solve"].status == "unconfirmed" and len(r.nodes["solve"].attempts) == 3
    assert "none of its answers agreed with the independent solution (391)" in r.error
    assert [q.role for q in world.model.requests].count("judge") == 1


async def test_a_disputed_answer_stands_unconfirmed_when_a_later_attempt_fails_a_vf():
    world = ScriptedWorld(
        [PLAN], lambda nid, k, inp, p: {"price": 17} if nid == "extract" else {"total": [340, -1][k % 2]},
        solve=solved_as(391),
    )  # fmt: skip
    r = await run(world, CONFIG.model_copy(update={"max_iterations": 2, "max_retries": 2}))
    assert r.nodes["solve"].status == "unconfirmed" and r.answer == 340
    assert r.iterations == 1


async def test_no_check_when_off_when_vfs_failed_or_when_the_solution_states_no_number():
    def outputs(nid, k, inp, p):
        return {"price": 17} if nid == "extract" else {"total": [-1, 340][min(k, 1)]}

    off = ScriptedWorld([PLAN], outputs, solve=solved_as(391))
    r = await run(off, CONFIG.model_copy(update={"cross_check": False}))
    assert r.status == "success" and NAME not in {v.name for v in r.nodes["solve"].verdicts}
    assert off.model.requests and all(q.role != "judge" for q in off.model.requests)

    silent = ScriptedWorld([PLAN], outputs, solve=lambda task: "I cannot tell.")
    r = await run(silent)
    first, second = r.nodes["solve"].attempts
    assert NAME not in {v.name for v in first.verdicts}  # the VF failed: AND is decided
    assert r.status == "success" and NAME not in {v.name for v in second.verdicts}


async def test_a_failed_solution_call_is_an_error_verdict_not_a_crash():
    world = ScriptedWorld(
        [PLAN], lambda nid, k, inp, p: {"price": 17} if nid == "extract" else {"total": 391},
    )  # fmt: skip

    def dead(task):
        raise ModelError("the endpoint is down")

    world.solve = dead
    r = await run(world, CONFIG.model_copy(update={"max_iterations": 1, "max_retries": 1}))
    (check,) = [v for v in r.nodes["solve"].verdicts if v.name == NAME]
    assert check.outcome == "ERROR" and "the endpoint is down" in check.message
    assert r.status == "failed" and r.answer == 391


def program(body: str):
    return lambda task: f"Here it is.\n```python\ndef solution():\n{body}\n```"


def totals(*answers):
    return lambda nid, k, inp, p: (
        {"price": 17} if nid == "extract" else {"total": answers[k % len(answers)]}
    )


async def test_a_program_solution_is_run_and_an_answer_that_agrees_passes(programs):
    world = ScriptedWorld(
        [PLAN], totals(391), solve=program("    price = 17\n    return price * 23")
    )
    bus = EventBus()
    seen: list = []
    bus.subscribe(seen.append)
    r = await run(world, BY_PROGRAM, events=bus, sandbox=programs)
    assert r.status == "success" and r.answer == 391
    assert {v.name: v.outcome for v in r.nodes["solve"].verdicts}[NAME] == "PASS"
    (event,) = [e for e in seen if e.type == CROSS_CHECK]
    assert event.data["kind"] == "program" and event.data["answer"] == 391
    assert event.data["printed"] == "391"


async def test_a_disagreement_with_a_program_names_the_program_not_its_number(programs):
    world = ScriptedWorld([PLAN], totals(343, 391), solve=program("    return 17 * 23"))
    r = await run(world, BY_PROGRAM, sandbox=programs)
    assert r.status == "success" and r.answer == 391
    (check,) = [v for v in r.nodes["solve"].attempts[0].verdicts if v.name == NAME]
    assert (
        check.outcome == "FAIL" and "a program written for this task gives another" in check.message
    )
    assert "391" not in world.executor_prompts["solve"][1]


async def test_a_program_breaks_a_tie_among_scattered_answers_but_not_a_repeated_one(programs):
    scattered = ScriptedWorld([PLAN], totals(343, 350, 360), solve=program("    return 17 * 23"))
    r = await run(scattered, BY_PROGRAM, sandbox=programs)
    assert r.status == "failed" and not r.verified and r.answer == 391
    assert r.nodes["solve"].status == "unconfirmed"
    assert "agreed with the computed solution (391)" in r.error
    assert "the computed one on a tie" in r.error

    repeated = ScriptedWorld([PLAN], totals(343, 350), solve=program("    return 17 * 23"))
    r = await run(repeated, BY_PROGRAM, sandbox=programs)
    assert r.status == "failed" and r.answer == 343  # 343, 350, 343: given twice


async def test_a_program_that_does_not_run_or_has_no_function_stands_aside(programs):
    for solve in (program("    return 17 / 0"), lambda task: "17 * 23 = 391"):
        world = ScriptedWorld([PLAN], totals(343), solve=solve)
        bus = EventBus()
        seen: list = []
        bus.subscribe(seen.append)
        r = await run(world, BY_PROGRAM, events=bus, sandbox=programs)
        assert r.status == "success" and r.answer == 343
        assert NAME not in {v.name for v in r.nodes["solve"].verdicts}
        (event,) = [e for e in seen if e.type == CROSS_CHECK]
        assert event.data["answer"] is None and event.data["error"] and event.data["tries"] == 2
        assert [q.role for q in world.model.requests].count("judge") == 2


async def test_a_program_that_fails_goes_back_once_with_its_error(programs):
    replies = iter([program("    return price * 23")(""), program("    return 17 * 23")("")])
    world = ScriptedWorld([PLAN], totals(343, 391), solve=lambda task: next(replies))
    bus = EventBus()
    seen: list = []
    bus.subscribe(seen.append)
    r = await run(world, BY_PROGRAM, events=bus, sandbox=programs)
    assert r.status == "success" and r.answer == 391
    (check,) = [v for v in r.nodes["solve"].attempts[0].verdicts if v.name == NAME]
    assert check.outcome == "FAIL"
    fix = [q for q in world.model.requests if q.role == "judge"][1]
    assert "NameError" in fix.messages[-1].content and "price" in fix.messages[-1].content
    (event,) = [e for e in seen if e.type == CROSS_CHECK]
    assert event.data["answer"] == 391 and event.data["tries"] == 2


async def test_a_program_that_prints_on_its_own_is_read_by_its_last_line(programs):
    world = ScriptedWorld(
        [PLAN], totals(391), solve=program("    print('working...')\n    return 391.0")
    )  # fmt: skip
    r = await run(world, BY_PROGRAM, sandbox=programs)
    assert r.status == "success"
    assert {v.name: v.outcome for v in r.nodes["solve"].verdicts}[NAME] == "PASS"


async def test_a_sandbox_fault_is_not_sent_to_the_model_as_the_programs_error():
    class FaultyDouble(InProcessSandboxDouble):
        async def run_program(self, code, *, timeout=10.0, files=None, argv=None, stdin=""):
            return ExecResult(outcome=Outcome.SANDBOX_ERROR, message="the daemon went away")

    world = ScriptedWorld([PLAN], totals(343), solve=program("    return 17 * 23"))
    bus = EventBus()
    seen: list = []
    bus.subscribe(seen.append)
    r = await run(world, BY_PROGRAM, events=bus, sandbox=FaultyDouble())
    assert r.status == "success" and r.answer == 343  # the check stands aside
    (event,) = [e for e in seen if e.type == CROSS_CHECK]
    assert "the daemon went away" in event.data["error"] and event.data["tries"] == 1
    assert [q.role for q in world.model.requests].count("judge") == 1
