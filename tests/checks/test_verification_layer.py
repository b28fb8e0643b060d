"""One verification layer: the plan's VFs and the checks end in one report, under strict AND,
and an answer is confirmed only on evidence."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verimap.base.accounting import BudgetExceeded
from verimap.base.run_context import RunContext
from verimap.base.verdicts import ABSTAINED, VFVerdict
from verimap.base.verification import CheckTools, Strength, Submission, verdict
from verimap.core.verifier import Verifier
from verimap.planning.plan import parse_plan
from verimap.testing import InProcessSandboxDouble

OUTCOMES = ["PASS", "FAIL", ABSTAINED, None]


@dataclass
class Fixed:
    """A test double: a check that always gives one outcome (None: nothing to say)."""

    name: str
    outcome: str | None
    strength: Strength = "strong"
    disputes: bool = False

    def applies(self, sub: Submission) -> bool:
        return True

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict | None:
        return None if self.outcome is None else verdict(self, self.outcome)


NODE = parse_plan(
    {
        "nodes": [
            {"id": "n", "instruction": "x", "inputs": ["USER_TASK"], "outputs": {"a": "number"}}
        ]
    }
).nodes[0]


def verify(checks, node=NODE, outputs=None, final=True, sandbox=None):
    verifier = Verifier(sandbox, None, checks=checks)
    return asyncio.run(
        verifier.verify(
            node, {"USER_TASK": "t"}, outputs or {"a": 1}, task="t", final=final, ctx=RunContext()
        )
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(OUTCOMES), st.booleans(), st.booleans()), max_size=6))
def test_the_verdict_is_the_and_of_the_checks_in_any_order(spec):
    checks = [
        Fixed(f"c{i}", o, "strong" if strong else "weak", disputes)
        for i, (o, strong, disputes) in enumerate(spec)
    ]
    report = verify(checks)
    reversed_report = verify(list(reversed(checks)))
    cheap_failed = any(c.outcome == "FAIL" for c in checks if not c.disputes)
    # costly (disputing) checks are not asked once a cheap one failed: AND is decided
    ran = [c for c in checks if c.outcome is not None and not (c.disputes and cheap_failed)]
    expected = all(c.outcome != "FAIL" for c in ran)
    assert report.passed == reversed_report.passed == expected
    confirmed = (
        expected
        and any(c.outcome == "PASS" and c.strength == "strong" for c in ran)
        and not any(c.outcome == ABSTAINED for c in ran)
    )
    assert report.confirmed == reversed_report.confirmed == confirmed


def test_weak_checks_alone_leave_the_answer_unconfirmed_and_say_why():
    report = verify([Fixed("finite", "PASS", "weak"), Fixed("sum", "PASS", "weak")])
    assert report.passed and not report.confirmed
    assert report.why_unconfirmed().startswith("only weak checks passed (finite, sum)")
    assert verify([]).why_unconfirmed() == "no check ran"
    abstained = verify([Fixed("agree", ABSTAINED), Fixed("examples", "PASS")])
    assert abstained.passed and not abstained.confirmed
    assert "agree could not judge" in abstained.why_unconfirmed()


def test_a_python_vf_is_strong_only_when_it_fails_a_nearby_wrong_answer():
    node = parse_plan(
        {
            "nodes": [
                {
                    "id": "n",
                    "instruction": "x",
                    "inputs": ["USER_TASK"],
                    "outputs": {"a": "number"},
                    "verification": [
                        {"name": "positive", "type": "python", "code": "assert outputs['a'] > 0"},
                        {"name": "exact", "type": "python", "code": "assert outputs['a'] == 391"},
                    ],
                }
            ]
        }
    ).nodes[0]
    report = verify([], node, {"a": 391}, sandbox=InProcessSandboxDouble())
    assert {v.name: v.strength for v in report.verdicts} == {"positive": "weak", "exact": "strong"}
    assert report.confirmed
    not_final = verify([], node, {"a": 391}, final=False, sandbox=InProcessSandboxDouble())
    assert {v.strength for v in not_final.verdicts} == {None}


def test_a_check_that_the_answer_is_not_empty_is_weak():
    node = parse_plan(
        {
            "nodes": [
                {
                    "id": "n",
                    "instruction": "x",
                    "inputs": ["USER_TASK"],
                    "outputs": {"answer": "string"},
                    "verification": [
                        {
                            "name": "answered",
                            "type": "python",
                            "code": "assert outputs['answer'].strip()",
                        },
                        {
                            "name": "exact",
                            "type": "python",
                            "code": "assert outputs['answer'] == 'Alameda'",
                        },
                    ],
                }
            ]
        }
    ).nodes[0]
    report = verify([], node, {"answer": "Alameda"}, sandbox=InProcessSandboxDouble())
    assert {v.name: v.strength for v in report.verdicts} == {"answered": "weak", "exact": "strong"}


@dataclass
class Broken(Fixed):
    """A test double: a check with a bug (or one that hits a verimap error)."""

    error: Exception = field(default_factory=lambda: ValueError("boom"))

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict | None:
        raise self.error


def test_a_check_with_a_bug_abstains_so_the_answer_is_kept_unverified():
    report = verify([Fixed("good", "PASS"), Broken("broken", None)])
    assert report.passed and not report.confirmed
    broken = next(v for v in report.verdicts if v.name == "broken")
    assert broken.outcome == ABSTAINED and "ValueError: boom" in broken.message


def test_a_verimap_error_in_a_check_still_ends_the_run():
    with pytest.raises(BudgetExceeded):
        verify([Broken("costly", None, error=BudgetExceeded("calls", "over budget"))])


# ---- every kind under one protocol ---------------------------------------------------------------
# A plan's Python VF, its natural-language VF (the judge's), a catalog check it names with
# arguments, and the framework's checks (cheap and disputing) end in one AND, in any order.

KINDS = ["python", "llm", "catalog", "check", "disputing"]


def _judge(req):
    """A judge double: it passes a criterion whose name says "pass"."""
    if req.response_schema is None:
        return "Let me look at the outputs."
    names = list(req.purpose.criteria)
    verdicts = {
        n: {"passed": "pass" in n, "explanation": "" if "pass" in n else "no"} for n in names
    }
    return verdicts[names[0]] if req.schema_name == "verdict" else verdicts


def _mixed(spec: list[tuple[str, bool]]):
    """The node and the framework checks that `spec` describes (kind, passes)."""
    vfs: list[dict[str, Any]] = []
    checks: list[Fixed] = []
    for i, (kind, ok) in enumerate(spec):
        tag = f"{'pass' if ok else 'fail'}_{i}"
        if kind == "python":
            vfs.append(
                {
                    "name": f"py_{tag}",
                    "type": "python",
                    "code": f"assert {ok}, 'no'\nassert outputs",
                }
            )
        elif kind == "llm":
            vfs.append({"name": f"llm_{tag}", "type": "llm", "content": "the answer is right"})
        elif kind == "catalog":
            vfs.append(
                {
                    "name": f"form_{tag}",
                    "type": "check",
                    "check": "yes_no",
                    "args": {"output": "yes" if ok else "maybe"},
                }
            )
        else:
            checks.append(Fixed(f"c_{tag}", "PASS" if ok else "FAIL", disputes=kind == "disputing"))
    node = parse_plan(
        {
            "nodes": [
                {
                    "id": "n",
                    "instruction": "x",
                    "inputs": ["USER_TASK"],
                    "outputs": {"a": "number", "yes": "string", "maybe": "string"},
                    "verification": vfs,
                }
            ]
        }
    ).nodes[0]
    return node, checks


def _verify_mixed(node, checks):
    from verimap.testing import ScriptedModel

    verifier = Verifier(InProcessSandboxDouble(), ScriptedModel(_judge), checks=checks)
    outputs = {"a": 1, "yes": "Yes", "maybe": "Maybe"}
    return asyncio.run(
        verifier.verify(node, {"USER_TASK": "t"}, outputs, task="t", final=True, ctx=RunContext())
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(KINDS), st.booleans()), min_size=1, max_size=6),
    st.randoms(use_true_random=False),
)
def test_the_verdict_is_the_and_of_every_vf_and_check_whatever_their_kind(spec, rnd):
    shuffled = list(spec)
    rnd.shuffle(shuffled)
    reports = [_verify_mixed(*_mixed(s)) for s in (spec, shuffled)]
    expected = all(ok for _, ok in spec)
    assert [r.passed for r in reports] == [expected, expected]
    for report in reports:
        ran = {v.name: v for v in report.verdicts}
        # every failing verdict is one that was meant to fail, and, when the cheap kinds all
        # pass, every judge criterion was asked and answered
        assert all("fail" in v.name for v in report.failures)
        cheap_ok = all(ok for kind, ok in spec if kind in ("python", "catalog", "check"))
        judged = [n for n in ran if n.startswith("llm_")]
        if cheap_ok:
            assert all(ran[n].outcome in ("PASS", "FAIL") for n in judged)
        else:
            assert all(ran[n].outcome == "SKIPPED" for n in judged)


def test_a_plan_vf_a_catalog_check_and_a_framework_check_are_one_kind_of_object():
    from verimap.base.verification import Check
    from verimap.core.vf_checks import CHEAP_TIER as CHEAP
    from verimap.core.vf_checks import DISPUTING_TIER as DISPUTING
    from verimap.core.vf_checks import JUDGE_TIER as JUDGE
    from verimap.core.vf_checks import tier_of

    node, checks = _mixed(
        [
            ("python", True),
            ("llm", True),
            ("llm", False),
            ("catalog", True),
            ("check", True),
            ("disputing", True),
        ]
    )
    verifier = Verifier(InProcessSandboxDouble(), None, checks=checks)
    sub = Submission("t", node, {"USER_TASK": "t"}, {"a": 1, "yes": "Yes"})
    every = verifier.all_checks(sub)
    assert all(isinstance(c, Check) for c in every)
    tiers = {c.name: tier_of(c) for c in every}
    assert tiers == {
        "py_pass_0": CHEAP,
        "form_pass_3": CHEAP,
        "c_pass_4": CHEAP,
        "c_pass_5": DISPUTING,
        # no judge model: each criterion is its own check, and says so in its verdict
        "llm_pass_1": JUDGE,
        "llm_fail_2": JUDGE,
    }
