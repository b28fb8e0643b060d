"""The answer-agreement check under the mixed ballot: votes from attempts, programs written
independently for the task and sampled replies, drawn in turn (the default ballot's own tests:
test_answer_agreement_strict.py)."""

import pytest

from verimap.base.check_names import ANSWER_AGREEMENT as NAME
from verimap.base.check_names import MIXED
from verimap.base.events import CROSS_CHECK, RETRIES_STOPPED
from verimap.base.model import ModelError
from verimap.checks.answer_agreement import (
    MIXED_BALLOT,
    STRICT_BALLOT,
    AnswerAgreement,
    Ballot,
    Vote,
    agree,
    numeric_answer,
)
from verimap.checks.programs import number_in
from verimap.checks.registry import get_check
from verimap.config import Loop, RunConfig, Verify
from verimap.planning.plan import parse_plan
from verimap.testing import EngineGoneSandboxDouble, InProcessSandboxDouble, ScriptedWorld

from .agreement_world import (
    PLAN,
    events,
    judge_calls,
    program,
    returning,
    run,
    saying,
    silent,
    totals,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("17 * 23 = 391.\nThe answer is 391.", 391.0), ("**$1,250.50**", 1250.5), ("none", None)],
)
def test_the_number_a_text_ends_on(text, expected):
    assert number_in(text) == expected


def test_only_a_single_number_answer_is_voted_on():
    def first(outputs, values):
        n = parse_plan({"nodes": [{"id": "a", "instruction": "x", "outputs": outputs}]}).nodes[0]
        return numeric_answer(n, values)

    assert first({"total": "number"}, {"total": 391}) == ("total", 391.0)
    assert first({"total": "integer"}, {"total": True}) is None
    assert first({"total": "string"}, {"total": "391"}) is None
    assert first({"a": "number", "b": "number"}, {"a": 1, "b": 2}) is None


def test_answers_agree_up_to_rounding_only():
    assert agree(91.6667, 91.67) and agree(391, 391.0)
    assert not agree(100, 101) and not agree(1_000_000, 1_000_100)


async def test_an_answer_two_programs_agree_with_is_verified(process_sandbox):
    world = ScriptedWorld([PLAN], totals(391), solve=returning("17 * 23"), sample=saying(391))
    bus, seen = events()
    r = await run(world, process_sandbox, bus=bus)
    assert r.status == "success" and r.verified and r.answer == 391
    check = {v.name: v for v in r.nodes["solve"].verdicts}[NAME]
    assert check.outcome == "PASS" and check.strength == "strong"
    assert judge_calls(world) == 2  # the quorum of 3 is reached: nothing more is drawn
    drawn = [(e.data["kind"], e.data["answer"]) for e in seen if e.type == CROSS_CHECK]
    assert drawn == [("program", 391.0), ("sample", 391.0)]
    # a program, then a sampled reasoning reply asked as the sc baseline asks
    first, second = [q for q in world.model.requests if q.role == "judge"]
    assert [first.purpose.label, second.purpose.label] == ["solve:program:0", "solve:sample"]
    assert "step by step" in second.messages[0].content
    assert not first.settings.temperature and second.settings.temperature == 0.7


async def test_a_sample_that_computes_with_code_votes_with_what_its_code_prints(process_sandbox):
    """The 1.5B often writes its sum as a program and then an "output" it made up."""

    def coded(task: str) -> str:
        return "```python\nprint(17 * 23)\n```\n```output\n400\n```\nThe answer is 400."

    world = ScriptedWorld([PLAN], totals(391), solve=returning("17 * 23"), sample=coded)
    bus, seen = events()
    r = await run(world, process_sandbox, bus=bus)
    assert r.verified and r.answer == 391
    [sample] = [e.data for e in seen if e.type == CROSS_CHECK and e.data["kind"] == "sample"]
    assert sample["answer"] == 391.0 and sample["printed"] == "391"
    assert "400" in sample["reply"]


async def test_a_sample_is_sampled_even_when_the_run_is_greedy(process_sandbox):
    world = ScriptedWorld([PLAN], totals(391), solve=returning(391), sample=saying(391))
    greedy = RunConfig(
        verify=Verify(checks=[NAME], ballot=MIXED, vacuity_check=False), loop=Loop(max_retries=3)
    )
    assert greedy.sampling.retry_temperature is None
    r = await run(world, process_sandbox, config=greedy)
    assert r.verified
    (sample,) = [q for q in world.model.requests if q.purpose.label == "solve:sample"]
    assert sample.settings.temperature == 0.7


async def test_programs_and_samples_are_drawn_in_turn_while_a_quorum_is_possible(
    process_sandbox,
):
    world = ScriptedWorld([PLAN], totals(5), solve=returning(1, 2, 3), sample=saying(4, 6))
    bus, seen = events()
    r = await run(world, process_sandbox, bus=bus)
    assert not r.verified and len(r.nodes["solve"].attempts) == 1
    kinds = [e.data["kind"] for e in seen if e.type == CROSS_CHECK]
    # five answers after four draws: with one draw left none can reach the quorum of three
    assert kinds == ["program", "sample", "program", "sample"]


async def test_a_disputed_answer_is_retried_without_being_told_the_other_number(process_sandbox):
    world = ScriptedWorld([PLAN], totals(340, 391), solve=returning("17 * 23"), sample=saying(391))
    r = await run(world, process_sandbox)
    assert r.status == "success" and r.verified and r.answer == 391
    first, second = r.nodes["solve"].attempts
    check = {v.name: v for v in first.verdicts}[NAME]
    assert check.outcome == "FAIL" and "do not confirm total = 340" in check.message
    retry_prompt = world.executor_prompts["solve"][1]
    assert "do not confirm total = 340" in retry_prompt and "391" not in retry_prompt
    assert second.passed  # the retry joins the programs' and the sample's 391


async def test_one_program_is_no_oracle_when_the_attempts_scatter(process_sandbox):
    """Attempts 2800, 2000, 5800; a program that returns an intermediate value (4800) and
    others that do not run: the earliest attempt's answer is kept, not the program's."""
    solve = returning("4800", "1 / 0", "1 / 0")
    world = ScriptedWorld([PLAN], totals(2800, 2000, 5800), solve=solve, sample=silent)
    r = await run(world, process_sandbox)
    assert r.status == "failed" and not r.verified and r.answer == 2800
    assert r.nodes["solve"].status == "unconfirmed" and r.iterations == 1
    assert "answer_agreement did not confirm any of its answers" in r.error


async def test_an_answer_both_kinds_gave_wins_a_tie(process_sandbox):
    world = ScriptedWorld(
        [PLAN], totals(2800, 2000, 5800), solve=returning(4800, 2800, 4800), sample=silent
    )
    r = await run(world, process_sandbox)
    assert not r.verified and r.answer == 2800  # 2800 by an attempt and a program; 4800 twice


async def test_programs_that_outvote_scattered_attempts_decide(process_sandbox):
    world = ScriptedWorld([PLAN], totals(340, 350, 360), solve=returning(391), sample=silent)
    r = await run(world, process_sandbox)
    assert not r.verified and r.answer == 391


async def test_a_program_that_fails_goes_back_once_with_its_error(process_sandbox):
    replies = iter([program("    return price * 23"), program("    return 17 * 23")] * 3)
    world = ScriptedWorld([PLAN], totals(391), solve=lambda task: next(replies), sample=saying(391))
    bus, seen = events()
    r = await run(world, process_sandbox, bus=bus)
    assert r.verified and r.answer == 391
    fix = [q for q in world.model.requests if q.role == "judge"][1]
    assert "NameError" in fix.messages[-1].content
    assert [e.data["tries"] for e in seen if e.type == CROSS_CHECK and "tries" in e.data] == [2]


async def test_no_program_that_runs_means_no_confirmation():
    world = ScriptedWorld([PLAN], totals(343), solve=returning("17 * 23"), sample=silent)
    r = await run(world, EngineGoneSandboxDouble())
    assert r.status == "success" and r.answer == 343 and not r.verified
    assert "answer_agreement could not judge" in r.unverified_reason
    # two programs and two samples: a fault is not the program's to fix, one call each
    assert judge_calls(world) == 4


async def test_agreeing_samples_without_a_program_that_runs_are_no_dispute():
    """The sandbox is gone: the samples still vote, but a confirmation needs a program, and an
    engine fault is no evidence against the answer, so the attempt is not retried."""
    world = ScriptedWorld([PLAN], totals(343), solve=returning("17 * 23"), sample=saying(343))
    r = await run(world, EngineGoneSandboxDouble())
    assert r.status == "success" and r.answer == 343 and not r.verified
    assert len(r.nodes["solve"].attempts) == 1
    assert "no program drawn for the task gave a number" in r.unverified_reason


async def test_a_dead_endpoint_is_no_vote_and_no_crash():
    world = ScriptedWorld([PLAN], totals(391), sample=silent)

    def dead(task: str) -> str:
        raise ModelError("the endpoint is down")

    world.solve = dead
    r = await run(world, InProcessSandboxDouble())
    assert r.status == "success" and r.answer == 391 and not r.verified


async def test_the_check_runs_only_where_configured_or_asked_for(process_sandbox):
    world = ScriptedWorld([PLAN], totals(391), solve=returning(391), sample=silent)
    r = await run(world, process_sandbox, RunConfig(verify=Verify(checks=[], vacuity_check=False)))
    assert r.status == "success" and not r.verified and judge_calls(world) == 0
    asked = {
        "nodes": [
            {
                **PLAN["nodes"][0],
                "verification": [{"name": "agrees", "type": "check", "check": NAME}],
            }
        ]
    }
    world = ScriptedWorld([asked], totals(391), solve=returning(391), sample=saying(391))
    r = await run(world, process_sandbox, RunConfig(verify=Verify(checks=[], vacuity_check=False)))
    assert r.verified and {v.name for v in r.nodes["solve"].verdicts} == {"answer_agreement"}


async def test_a_program_that_returns_nothing_is_told_so_and_fixed(process_sandbox):
    replies = iter([program("    total = 17 * 23"), program("    return 17 * 23")] * 3)
    world = ScriptedWorld([PLAN], totals(391), solve=lambda task: next(replies), sample=saying(391))
    r = await run(world, process_sandbox)
    assert r.verified
    fix = [q for q in world.model.requests if q.role == "judge"][1]
    assert "solution() returned 'None', not a number" in fix.messages[-1].content


def test_three_votes_against_two_are_a_split_not_a_confirmation():
    """1260 from an attempt, a sample and a program against two programs for 180: the quorum,
    but not twice its rival's votes. One vote fewer for 180 confirms it."""
    check = AnswerAgreement(**MIXED_BALLOT)
    split = Ballot(
        [
            Vote(1260, "attempt"),
            Vote(180, "program"),
            Vote(1260, "sample"),
            Vote(180, "program"),
            Vote(1260, "program"),
        ]
    )
    assert not check.confirmed(split, 1260)
    split.votes.pop(1)
    assert check.confirmed(split, 1260)
    # attempts and samples are one family: reasoning alone confirms nothing
    prose = Ballot([Vote(7, "attempt"), Vote(7, "sample"), Vote(7, "sample"), Vote(7, "attempt")])
    assert not check.confirmed(prose, 7)


async def test_retries_stop_when_no_answer_is_one_vote_short(process_sandbox):
    world = ScriptedWorld([PLAN], totals(1, 12, 63), solve=returning(61, 9), sample=silent)
    bus, seen = events()
    r = await run(world, process_sandbox, bus=bus)
    assert not r.verified and r.answer == 1 and len(r.nodes["solve"].attempts) == 1
    stopped = [e for e in seen if e.type == RETRIES_STOPPED]
    assert len(stopped) == 1 and "one vote short" in stopped[0].data["reason"]
    assert "61 x1" in stopped[0].data["reason"] and "9 x1" in stopped[0].data["reason"]


async def test_a_retry_that_could_complete_a_quorum_is_still_made(process_sandbox):
    """A program and a sample give 694 against the first attempt, and the other draws scatter:
    one more attempt may confirm it."""
    solve, sample = returning(694, 7, 9), saying(694, "none")  # the second sample ends on 23
    world = ScriptedWorld([PLAN], totals(8448, 694), solve=solve, sample=sample)
    r = await run(world, process_sandbox)
    assert r.verified and r.answer == 694 and len(r.nodes["solve"].attempts) == 2


def test_the_attempt_is_no_witness_for_itself():
    """An attempt and two programs agree on 3 and the sample says -1: three votes, both
    families, yet no sampled reply gave 3, and the attempt and the first program are greedy
    readings of one model that misread tasks alike. A sample that agrees confirms it."""
    check = AnswerAgreement(**MIXED_BALLOT)
    ballot = Ballot(
        [Vote(3, "attempt"), Vote(3, "program"), Vote(-1, "sample"), Vote(3, "program")],
        programs=2,
        samples=1,
    )
    assert not check.confirmed(ballot, 3) and check._worth_a_draw(ballot, 3)
    ballot.votes.append(Vote(3, "sample"))
    assert check.confirmed(ballot, 3)
    ballot.votes[-1] = Vote(1, "sample")
    ballot.samples = 2
    assert not check._worth_a_draw(ballot, 3) and not check.confirmed(ballot, 3)


@pytest.mark.parametrize(("second", "verified"), [(3, True), (1, False)])
async def test_a_dissenting_sample_is_answered_by_another_sample(process_sandbox, second, verified):
    world = ScriptedWorld([PLAN], totals(3), solve=returning(3), sample=saying(-1, second))
    bus, seen = events()
    r = await run(world, process_sandbox, bus=bus)
    assert r.answer == 3 and r.verified is verified and len(r.nodes["solve"].attempts) == 1
    kinds = [e.data["kind"] for e in seen if e.type == CROSS_CHECK]
    assert kinds[:4] == ["program", "sample", "program", "sample"]
    if not verified:  # no retry: no answer is one vote short with a sample among its votes
        stopped = [e for e in seen if e.type == RETRIES_STOPPED]
        assert len(stopped) == 1 and "one vote short" in stopped[0].data["reason"]


def test_the_strict_ballot_is_the_default():
    """By the rule written before seed 872998 was drawn, the strict ballot replaced the mixed
    one (D28); the mixed and sampled ballots are options (`--ballot`)."""
    assert AnswerAgreement() == AnswerAgreement(**STRICT_BALLOT)
    assert get_check(NAME) == AnswerAgreement()
