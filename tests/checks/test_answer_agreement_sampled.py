"""The answer-agreement check with `SAMPLED_BALLOT`: the first attempt put to sampled replies
alone, and no retry confirmed (D23)."""

import pytest

from verimap.base.check_names import ANSWER_AGREEMENT as NAME
from verimap.base.events import CROSS_CHECK, RETRIES_STOPPED
from verimap.base.model import ModelError
from verimap.base.run_context import RunContext
from verimap.base.verification import CheckTools, Submission
from verimap.checks.answer_agreement import SAMPLED_BALLOT, AnswerAgreement, Vote
from verimap.planning.plan import parse_plan
from verimap.testing import ScriptedWorld

from .agreement_world import PLAN, events, judge_calls, returning, run, saying, totals, under

TOTAL = parse_plan(PLAN).nodes[0]
BALLOT = under("sampled")


async def test_an_attempt_two_samples_agree_with_is_verified_and_no_program_is_written(
    process_sandbox,
):
    world = ScriptedWorld([PLAN], totals(391), solve=returning(999), sample=saying(391))
    bus, seen = events()
    r = await run(world, process_sandbox, BALLOT, bus=bus)
    assert r.status == "success" and r.verified and r.answer == 391
    check = {v.name: v for v in r.nodes["solve"].verdicts}[NAME]
    assert check.outcome == "PASS" and check.strength == "strong"
    assert [e.data["kind"] for e in seen if e.type == CROSS_CHECK] == ["sample", "sample"]
    asked = [q for q in world.model.requests if q.role == "judge"]
    assert [q.purpose.label for q in asked] == ["solve:sample", "solve:sample"]
    assert all(q.settings.temperature == 0.7 for q in asked)
    assert "step by step" in asked[0].messages[0].content


@pytest.mark.parametrize(("third", "verified"), [(391, True), (400, False)])
async def test_one_dissenting_sample_is_answered_by_a_third(process_sandbox, third, verified):
    world = ScriptedWorld([PLAN], totals(391), sample=saying(391, 17, third))
    r = await run(world, process_sandbox, BALLOT)
    assert r.answer == 391 and r.verified is verified and judge_calls(world) == 3
    assert len(r.nodes["solve"].attempts) == 1


async def test_two_dissenting_samples_end_the_draws_and_the_majority_is_kept(process_sandbox):
    """The samples agree on 391 against the attempt's 340: no third sample could confirm 340,
    a retry could not be confirmed, and the answer most votes give is kept, unverified."""
    world = ScriptedWorld([PLAN], totals(340, 391), sample=saying(391))
    bus, seen = events()
    r = await run(world, process_sandbox, BALLOT, bus=bus)
    assert not r.verified and r.answer == 391 and r.nodes["solve"].status == "unconfirmed"
    assert judge_calls(world) == 2 and len(r.nodes["solve"].attempts) == 1
    [stopped] = [e for e in seen if e.type == RETRIES_STOPPED]
    assert "a retry after a dispute is not confirmed" in stopped.data["reason"]


async def test_a_retry_is_not_confirmed_even_by_a_full_quorum():
    """A retry that lands on the samples' number after a dispute was verified wrong about one
    time in four on the draws measured: the first attempt alone can be confirmed."""
    check, ctx = AnswerAgreement(**SAMPLED_BALLOT), RunContext()
    ballot = check._ballot(ctx)
    ballot.votes += [Vote(340, "attempt"), Vote(391, "sample"), Vote(391, "sample")]
    ballot.samples = 2
    retry = Submission("17 pens at 23 dollars", TOTAL, {}, {"total": 391})
    got = await check.check(retry, CheckTools(), ctx)
    assert got is not None and got.outcome == "FAIL" and "not confirmed" in got.message
    assert check.settled(TOTAL, ctx) is not None
    assert AnswerAgreement(**{**SAMPLED_BALLOT, "confirm_retries": True}).confirmed(ballot, 391)


async def test_no_sample_that_gives_a_number_means_no_judgement(process_sandbox):
    def dead(task: str) -> str:
        raise ModelError("the endpoint is down")

    world = ScriptedWorld([PLAN], totals(391), sample=dead)
    r = await run(world, process_sandbox, BALLOT)
    assert r.status == "success" and r.answer == 391 and not r.verified
    check = {v.name: v for v in r.nodes["solve"].verdicts}[NAME]
    assert "no sample drawn for the task gave a number" in check.message
