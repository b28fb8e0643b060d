"""The answer-agreement check with `STRICT_BALLOT`: the first attempt and three sampled replies
must agree with at most one against, no retry is confirmed, and a disputed attempt is settled by
the majority of up to five samples (D24: measured, an option)."""

import pytest

from verimap.base.check_names import ANSWER_AGREEMENT as NAME
from verimap.base.events import CROSS_CHECK, RETRIES_STOPPED
from verimap.base.run_context import RunContext
from verimap.checks.answer_agreement import STRICT_BALLOT, AnswerAgreement, Ballot, Vote
from verimap.testing import ScriptedWorld

from .agreement_world import PLAN, events, judge_calls, run, saying, totals, under

BALLOT = under("strict")


async def test_three_agreeing_samples_verify_the_attempt_and_no_program_is_written(
    process_sandbox,
):
    world = ScriptedWorld([PLAN], totals(391), sample=saying(391))
    bus, seen = events()
    r = await run(world, process_sandbox, BALLOT, bus=bus)
    assert r.status == "success" and r.verified and r.answer == 391
    check = {v.name: v for v in r.nodes["solve"].verdicts}[NAME]
    assert check.outcome == "PASS" and "4 independent solutions agree" in check.message
    assert [e.data["kind"] for e in seen if e.type == CROSS_CHECK] == ["sample"] * 3


@pytest.mark.parametrize(
    ("samples", "verified", "drawn", "answer"),
    [
        ((17, 391, 391, 391), True, 4, 391),  # one dissent is outvoted four to one
        ((391, 17, 391, 391), True, 4, 391),
        ((391, 391, 17, 391), True, 4, 391),
        ((391, 391, 17, 400), False, 4, 391),  # a second dissent: the majority is settled
        ((17, 18, 391, 391), False, 4, 391),  # drawn on until no vote left could change it
        ((17, 17, 391, 391, 391), False, 5, 391),  # four of six is a majority, not a quorum
        ((17, 17, 17, 17), False, 4, 17),  # the samples outvote the attempt
        ((17, 17, 17, 391), False, 5, 391),  # three to three: the attempt's answer
    ],
)
async def test_at_most_one_dissent_and_a_disputed_attempt_settled_by_the_majority(
    process_sandbox, samples, verified, drawn, answer
):
    world = ScriptedWorld([PLAN], totals(391), sample=saying(*samples))
    r = await run(world, process_sandbox, BALLOT)
    assert r.verified is verified and judge_calls(world) == drawn and r.answer == answer
    assert len(r.nodes["solve"].attempts) == 1


async def test_a_disputed_attempt_is_not_retried_and_the_majority_is_kept(process_sandbox):
    world = ScriptedWorld([PLAN], totals(340, 391), sample=saying(391))
    bus, seen = events()
    r = await run(world, process_sandbox, BALLOT, bus=bus)
    assert not r.verified and r.answer == 391 and r.nodes["solve"].status == "unconfirmed"
    assert judge_calls(world) == 4 and len(r.nodes["solve"].attempts) == 1
    assert any(e.type == RETRIES_STOPPED for e in seen)
    votes = "votes: 391 x4, 340 x1 (the first attempt)"  # the reader sees how strong it was
    assert r.nodes["solve"].unconfirmed == votes and r.error is not None
    assert r.error.endswith(f"is kept, unverified ({votes})")


async def test_a_sample_whose_written_sum_slips_does_not_vote(process_sandbox):
    """Three samples that slip the attempt's own way (17 * 23 = 381) would confirm it: a sample
    is held to the bar the attempt is, and a slipped one is drawn but does not vote (D29)."""
    slipped, sound = "17 * 23 = 381.\nThe answer is 381.", "17 * 23 = 391.\nThe answer is 391."
    replies = iter([slipped, slipped, slipped])
    world = ScriptedWorld([PLAN], totals(381), sample=lambda task: next(replies, sound))
    bus, seen = events()
    r = await run(world, process_sandbox, BALLOT, bus=bus)
    assert not r.verified and r.answer == 391 and judge_calls(world) == 5
    drawn = [e.data for e in seen if e.type == CROSS_CHECK]
    assert [d.get("slip") for d in drawn] == ["17 * 23 = 381 is wrong: 17 * 23 = 391"] * 3 + [
        None
    ] * 2
    assert r.nodes["solve"].unconfirmed == "votes: 391 x2, 381 x1 (the first attempt)"


async def test_a_sample_with_a_claim_too_big_to_check_still_votes(process_sandbox):
    """`3 * 10**400 = 7` cannot be compared in floating point: the claim is unverifiable, and
    the sample votes on its answer rather than make the whole check abstain."""
    reply = "Not 3 * 10**400 = 7: 17 * 23 = 391.\nThe answer is 391."
    world = ScriptedWorld([PLAN], totals(391), sample=lambda task: reply)
    r = await run(world, process_sandbox, BALLOT)
    assert r.verified and r.answer == 391 and judge_calls(world) == 3


def test_under_the_mixed_ballot_a_slipped_sample_still_votes():
    assert AnswerAgreement.with_ballot("mixed").sound_samples is False
    assert AnswerAgreement().sound_samples is True


def test_the_tally_lists_each_answer_most_votes_first_and_marks_the_first_attempt():
    check, ctx = AnswerAgreement(**STRICT_BALLOT), RunContext()
    assert check.tally(ctx) is None  # nothing cast yet
    ballot = check._ballot(ctx)
    ballot.votes += [
        Vote(343, "attempt"),
        Vote(391, "sample"),
        Vote(401.0, "sample"),
        Vote(391.00001, "sample"),
        Vote(391, "sample"),
    ]
    assert check.tally(ctx) == "391 x3, 343 x1 (the first attempt), 401 x1"
    ballot.votes.append(Vote(401, "attempt"))  # a retry: only the first attempt is marked
    assert check.tally(ctx) == "391 x3, 401 x2, 343 x1 (the first attempt)"


def test_a_quorum_of_samples_without_the_attempt_is_three_not_four():
    check, ballot = AnswerAgreement(**STRICT_BALLOT), Ballot()
    ballot.votes += [Vote(391, "attempt"), Vote(391, "sample"), Vote(391, "sample")]
    assert not check.confirmed(ballot, 391)
    ballot.votes.append(Vote(17, "sample"))
    assert not check.confirmed(ballot, 391)
    ballot.votes.append(Vote(391, "sample"))
    assert check.confirmed(ballot, 391)
    ballot.votes.append(Vote(18, "sample"))
    assert not check.confirmed(ballot, 391)  # two against: a majority, not a confirmation
