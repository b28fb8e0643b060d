"""The ballots answer agreement may vote with, chosen by name (`RunConfig.verify.ballot`,
`--ballot`): each name reaches the check that runs, and an unknown one is refused early."""

import pytest

from verimap.base.check_names import ANSWER_AGREEMENT as NAME
from verimap.base.check_names import ARITHMETIC, BALLOTS, DEFAULT_BALLOT
from verimap.base.events import CROSS_CHECK
from verimap.checks.answer_agreement import BALLOT_SETTINGS, STRICT_BALLOT, AnswerAgreement
from verimap.checks.registry import get_check
from verimap.config import RunConfig, Verify
from verimap.core.verifier import Verifier
from verimap.testing import ScriptedWorld

from .agreement_world import PLAN, events, returning, run, saying, totals, under


def test_every_named_ballot_has_settings_and_the_default_is_the_plain_check():
    assert set(BALLOT_SETTINGS) == set(BALLOTS) and DEFAULT_BALLOT in BALLOTS
    assert get_check(NAME) == AnswerAgreement() == get_check(NAME, DEFAULT_BALLOT)
    for ballot in BALLOTS:
        assert get_check(NAME, ballot) == AnswerAgreement(**BALLOT_SETTINGS[ballot])
    assert get_check(ARITHMETIC, "strict").name == ARITHMETIC  # a ballot is answer agreement's


def test_an_unknown_ballot_is_refused_naming_the_known_ones():
    with pytest.raises(
        ValueError, match="unknown ballot 'lenient'; the ballots are: strict, mixed, sampled"
    ):
        RunConfig(verify=Verify(ballot="lenient"))
    with pytest.raises(ValueError, match="the ballots are"):
        AnswerAgreement.with_ballot("lenient")


def test_the_configured_ballot_is_the_verifier_s_check():
    config = RunConfig(verify=Verify(checks=[ARITHMETIC, NAME], ballot="strict"))
    verifier = Verifier.from_config(None, None, config)
    (check,) = [c for c in verifier.checks if c.name == NAME]
    assert check == AnswerAgreement(**STRICT_BALLOT)
    assert config.verify.ballot == "strict" and RunConfig().verify.ballot == DEFAULT_BALLOT


async def test_a_run_under_the_strict_ballot_votes_with_samples_alone(process_sandbox):
    """The mixed ballot writes a program first; the strict one asks samples only, and confirms
    with four votes."""
    world = ScriptedWorld([PLAN], totals(391), solve=returning(391), sample=saying(391))
    bus, seen = events()
    r = await run(world, process_sandbox, under("strict"), bus=bus)
    assert r.verified and r.answer == 391
    assert [e.data["kind"] for e in seen if e.type == CROSS_CHECK] == ["sample"] * 3
    world = ScriptedWorld([PLAN], totals(391), solve=returning(391), sample=saying(391))
    bus, seen = events()
    r = await run(world, process_sandbox, bus=bus)
    assert r.verified and "program" in [e.data["kind"] for e in seen if e.type == CROSS_CHECK]


async def test_a_run_that_names_no_ballot_votes_with_samples_alone(process_sandbox):
    """The default ballot is the strict one (D28): samples only, no program drawn."""
    world = ScriptedWorld([PLAN], totals(391), solve=returning(391), sample=saying(391))
    bus, seen = events()
    r = await run(
        world,
        process_sandbox,
        RunConfig(verify=Verify(checks=[NAME], vacuity_check=False)),
        bus=bus,
    )
    assert r.verified and r.answer == 391
    assert [e.data["kind"] for e in seen if e.type == CROSS_CHECK] == ["sample"] * 3
