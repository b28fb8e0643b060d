"""The code-agreement check: final code against reference solutions on generated inputs, run
in the real process sandbox, with the judge model scripted."""

from __future__ import annotations

import ast

import pytest

import verimap
from verimap.base.events import CROSS_CHECK
from verimap.base.messages import GenerationSettings
from verimap.base.purpose import SolveCall
from verimap.base.run_context import RunContext
from verimap.base.sandbox import ExecResult, Outcome
from verimap.base.usage import JUDGE
from verimap.base.verdicts import ABSTAINED
from verimap.base.verification import Check, CheckTools, Chooser, Submission
from verimap.checks.code_agreement import CodeAgreement
from verimap.config import Loop, RunConfig, Verify
from verimap.planning.plan import parse_plan
from verimap.testing import ScriptedModel, ScriptedWorld

TASK = '''Complete the following Python function.

```python
def add_up(xs: list[int], k: int) -> int:
    """Return the sum of the elements of xs that are greater than k.
    >>> add_up([1, 5, 3], 2)
    8
    >>> add_up([4, 4], 4)
    0
    """
```'''
RIGHT = "def add_up(xs, k):\n    return sum(x for x in xs if x > k)\n"
# Also right, written another way.
RIGHT_TOO = "def add_up(xs, k):\n    total = 0\n    for x in xs:\n        if x > k:\n            total += x\n    return total\n"
# Passes both examples, and forgets every element after the third.
WRONG = "def add_up(xs, k):\n    return sum(x for x in xs[:3] if x > k)\n"
# Fails the second example.
FAILS_EXAMPLES = "def add_up(xs, k):\n    return sum(x for x in xs if x >= k)\n"
NODE = parse_plan(
    {
        "nodes": [
            {
                "id": "solve",
                "instruction": "write it",
                "inputs": ["USER_TASK"],
                "outputs": {"code": "code"},
            }
        ]
    }
).nodes[0]


def reply(code: str, marker: str = "") -> str:
    return f"Here it is.\n```python\n{marker}{code}```\n"


def submission(code: str, *, final: bool = True, task: str = TASK) -> Submission:
    return Submission(
        task=task, node=NODE, inputs={"USER_TASK": task}, outputs={"code": code}, final=final
    )


class Harness:
    """One run: the check, its context and events, and the scripted judge."""

    def __init__(self, sandbox, replies, check=None):
        self.check = check or CodeAgreement()
        self.events = []
        self.ctx = RunContext(sink=self.events.append)
        self.model = ScriptedModel(list(replies), name="judge")
        self.tools = CheckTools(
            sandbox=sandbox,
            model=self.model,
            settings=GenerationSettings(temperature=0.0),
            retry_temperature=0.7,
        )

    async def __call__(self, code: str):
        return await self.check.check(submission(code), self.tools, self.ctx)

    def cross_checks(self) -> list[dict]:
        return [e.data for e in self.events if e.type == CROSS_CHECK]


def test_it_is_a_strong_disputing_check_that_chooses():
    check = CodeAgreement()
    assert isinstance(check, Check) and isinstance(check, Chooser)
    assert (check.name, check.strength, check.disputes) == ("code_agreement", "strong", True)


def test_it_applies_to_final_code_of_a_task_with_a_function():
    check = CodeAgreement()
    assert check.applies(submission(RIGHT))
    assert not check.applies(submission(RIGHT, final=False))
    assert not check.applies(submission(RIGHT, task="How much do 23 pens at $17 cost?"))
    number = parse_plan(
        {"nodes": [{"id": "n", "instruction": "x", "outputs": {"total": "number"}}]}
    )
    sub = Submission(task=TASK, node=number.nodes[0], inputs={}, outputs={"total": 3})
    assert not check.applies(sub)


async def test_agreeing_with_a_reference_passes_strong(process_sandbox):
    run = Harness(process_sandbox, [reply(RIGHT_TOO)])
    v = await run(RIGHT)
    assert v.outcome == "PASS" and v.strength == "strong" and v.type == "check"
    assert "24 generated inputs" in v.message and "1 of 1" in v.message
    assert run.model.calls == 1
    request = run.model.requests[0]
    assert request.role == JUDGE and request.settings.temperature == 0.0
    assert request.purpose == SolveCall(kind="reference", task=TASK)
    assert "`add_up`" in request.messages[0].content and "```python" in request.messages[0].content
    assert run.cross_checks() == [
        {"kind": "code", "reference": 0, "valid": True, "reason": ""},
        {"kind": "code", "reference": 0, "agreed": True, "compared": 24, "input": None},
    ]
    # a retry in the same run reuses the inputs and the reference
    assert (await run(RIGHT)).passed and run.model.calls == 1


async def test_a_reference_that_fails_the_examples_is_discarded_and_another_drawn(
    process_sandbox,
):
    run = Harness(process_sandbox, [reply(FAILS_EXAMPLES), reply(RIGHT_TOO)])
    v = await run(RIGHT)
    assert v.passed
    assert run.model.calls == 2
    assert run.model.requests[1].settings.temperature == 0.7  # a fresh sample
    drawn = [e for e in run.cross_checks() if "valid" in e]
    assert [e["valid"] for e in drawn] == [False, True]
    assert "fails the task's examples" in drawn[0]["reason"]


async def test_disagreeing_fails_with_one_input_and_both_outputs(process_sandbox):
    run = Harness(
        process_sandbox,
        [reply(RIGHT, marker="# reference_secret\n")],
        check=CodeAgreement(max_references=1),
    )
    v = await run(WRONG)
    assert v.outcome == "FAIL"
    assert v.message.startswith("on add_up([")
    assert (
        "your code returns" in v.message and "independently written solution returns" in v.message
    )
    assert "fix your code if it is yours" in v.message
    assert "reference_secret" not in v.message and "sum(x for x" not in v.message
    compared = run.cross_checks()[-1]
    assert compared["agreed"] is False and compared["input"].startswith("add_up([")
    # the input shown is one where the two really differ
    args = ast.literal_eval(compared["input"][len("add_up") :])
    assert run_code(RIGHT, args) != run_code(WRONG, args)


async def test_code_that_agrees_only_after_a_dispute_is_not_confirmed(process_sandbox):
    """The retry was shown the reference's output: agreeing with it now is no independent
    evidence, so the check abstains (the code is kept, unverified)."""
    run = Harness(process_sandbox, [reply(RIGHT)], check=CodeAgreement(max_references=1))
    disputed = await run(WRONG)
    assert disputed.outcome == "FAIL"
    shown = run.cross_checks()[-1]["input"]
    v = await run(RIGHT_TOO)
    assert v.outcome == ABSTAINED and not v.judged
    assert f"only after it was shown that solution's output on {shown}" in v.message
    assert run.model.calls == 1
    assert run.cross_checks()[-1]["agreed"] is True  # it does agree; that is not the point


async def test_a_run_whose_code_agrees_only_after_a_dispute_ends_unverified(process_sandbox):
    """Through the coordinator: the retry is shown the input and both outputs, its code is kept
    as the answer, and the result says why it is not verified."""
    plan = {
        "nodes": [
            {
                "id": "solve",
                "instruction": "write it",
                "inputs": ["USER_TASK"],
                "outputs": {"code": "code"},
            }
        ]
    }
    codes = [WRONG, RIGHT]
    world = ScriptedWorld(
        [plan],
        lambda nid, k, inp, p: {"code": codes[min(k, 1)]},
        solve=lambda task: reply(RIGHT_TOO),
    )
    config = RunConfig(
        verify=Verify(checks=["code_agreement"], vacuity_check=False), loop=Loop(max_retries=3)
    )
    r = await verimap.build(world.models(), process_sandbox, config=config).run(TASK)
    assert r.status == "success" and r.final_output == {"code": RIGHT}
    assert not r.verified and "only after it was shown" in (r.unverified_reason or "")
    assert "your code returns" in world.executor_prompts["solve"][1]
    assert len(r.nodes["solve"].attempts) == 2  # an abstention is no failure: no third attempt


def run_code(code: str, args: tuple):
    namespace: dict = {}
    exec(code, namespace)
    return namespace["add_up"](*args)


async def test_a_second_opinion_is_drawn_before_failing(process_sandbox):
    """The first reference is wrong: the right code agrees with the second, and passes."""
    run = Harness(process_sandbox, [reply(WRONG), reply(RIGHT_TOO)])
    v = await run(RIGHT)
    assert v.passed and "1 of 2" in v.message
    agreed = [e["agreed"] for e in run.cross_checks() if "agreed" in e]
    assert agreed == [False, True]


async def test_no_valid_reference_abstains(process_sandbox):
    run = Harness(process_sandbox, ["I cannot write that.", reply(FAILS_EXAMPLES)])
    v = await run(RIGHT)
    assert v.outcome == ABSTAINED and not v.passed
    assert "no independently written solution" in v.message
    assert "holds no function" in v.message and "fails the task's examples" in v.message
    assert run.model.calls == 2
    # the run's budget is spent: a retry draws no more
    assert (await run(RIGHT)).outcome == ABSTAINED and run.model.calls == 2


async def test_without_a_model_it_abstains(process_sandbox):
    run = Harness(process_sandbox, [])
    run.tools = CheckTools(sandbox=process_sandbox)
    v = await run(RIGHT)
    assert v.outcome == ABSTAINED and "no model" in v.message


async def test_inputs_the_reference_rejects_do_not_dispute(process_sandbox):
    """The reference raises when k is 0; the code returns there, and still agrees."""
    strict = "def add_up(xs, k):\n    assert k > 0\n    return sum(x for x in xs if x > k)\n"
    run = Harness(process_sandbox, [reply(strict)])
    v = await run(RIGHT)
    assert v.passed, v.message
    agreed = run.cross_checks()[-1]
    assert agreed["agreed"] is True and agreed["compared"] < 24


async def test_code_runs_after_the_tasks_imports(process_sandbox):
    task = TASK.replace("```python\n", "```python\nfrom typing import List\n\n", 1)
    typed = "def add_up(xs: List[int], k: int) -> int:\n    return sum(x for x in xs if x > k)\n"
    run = Harness(process_sandbox, [reply(typed)])
    v = await run.check.check(submission(typed, task=task), run.tools, run.ctx)
    assert v.passed


async def test_code_that_does_not_load_fails_without_a_model_call(process_sandbox):
    run = Harness(process_sandbox, [reply(RIGHT)])
    v = await run("def add_up(xs, k):\n    return (\n")
    assert v.outcome == "FAIL" and "could not be loaded" in v.message
    assert run.model.calls == 0


async def test_a_broken_sandbox_is_no_verdict_on_the_code(process_sandbox):
    class Broken(type(process_sandbox)):
        def __init__(self):
            pass

        async def run_program(self, code, **kwargs):
            return ExecResult(outcome=Outcome.SANDBOX_ERROR, message="the pool is gone")

    run = Harness(Broken(), [reply(RIGHT)])
    v = await run(RIGHT)
    assert v.outcome == Outcome.SANDBOX_ERROR.value and "the pool is gone" in v.message


async def test_choose_returns_the_largest_group(process_sandbox):
    run = Harness(process_sandbox, [reply(WRONG), reply(RIGHT_TOO)])
    for code in (WRONG, RIGHT, FAILS_EXAMPLES):
        await run(code)
    candidates = [{"code": WRONG}, {"code": FAILS_EXAMPLES}, {"code": RIGHT}]
    # WRONG + its reference, RIGHT + its reference: a tie, and the earlier attempt's group
    # wins; FAILS_EXAMPLES contradicts an example and is no member
    assert run.check.choose(NODE, candidates, run.ctx) == {"code": WRONG}
    # a second right attempt makes the right group the largest
    candidates.append({"code": RIGHT_TOO})
    assert run.check.choose(NODE, candidates, run.ctx) == {"code": RIGHT}


async def test_choose_takes_a_references_code_when_no_attempt_is_in_the_largest_group(
    process_sandbox,
):
    run = Harness(process_sandbox, [reply(RIGHT), reply(RIGHT_TOO)])
    run.check = CodeAgreement()
    await run(WRONG)
    # WRONG disagreed with the first reference and drew a second; both references agree
    assert run.model.calls == 2
    assert run.check.choose(NODE, [{"code": WRONG}], run.ctx) == {"code": RIGHT}


def test_choose_without_anything_checked_chooses_nothing():
    assert CodeAgreement().choose(NODE, [{"code": RIGHT}], RunContext()) is None


@pytest.mark.parametrize("replies", [[reply(RIGHT_TOO)]])
async def test_events_are_small(process_sandbox, replies):
    run = Harness(process_sandbox, replies)
    await run(RIGHT)
    for event in run.cross_checks():
        assert len(repr(event)) < 300 and "return" not in repr(event)
