"""The checks by name: the built-in ones a plan may ask for and a policy may add, and the
catalog's, which a plan names with arguments."""

from __future__ import annotations

from collections.abc import Callable

from verimap.base.check_names import (
    ANSWER_AGREEMENT,
    ARITHMETIC,
    BUILTIN_CHECKS,
    CATALOG,
    CODE_AGREEMENT,
    DATE,
    DEFAULT_BALLOT,
    ENTITY,
    NUMBER_IN_RANGE,
    RUN_EXAMPLES,
    SHOWN_WORK,
    YES_NO,
)
from verimap.base.plan import CheckVF
from verimap.base.verification import Check
from verimap.checks.answer_agreement import AnswerAgreement
from verimap.checks.answer_form import answer_form
from verimap.checks.arithmetic import Arithmetic
from verimap.checks.code_agreement import CodeAgreement
from verimap.checks.evidence import evidence_check
from verimap.checks.examples import RunExamples
from verimap.checks.shown_work import ShownWork

FACTORIES: dict[str, Callable[[], Check]] = {
    RUN_EXAMPLES: RunExamples,
    ARITHMETIC: Arithmetic,
    SHOWN_WORK: ShownWork,
    CODE_AGREEMENT: CodeAgreement,
}


def get_check(name: str, ballot: str = DEFAULT_BALLOT) -> Check:
    """A new instance of the built-in check `name`; `answer_agreement` under `ballot`."""
    if name == ANSWER_AGREEMENT:
        return AnswerAgreement.with_ballot(ballot)
    try:
        return FACTORIES[name]()
    except KeyError:
        raise ValueError(
            f"unknown check {name!r}; the built-in checks are: {', '.join(BUILTIN_CHECKS)}"
        ) from None


def plan_check(vf: CheckVF) -> Check:
    """The check a plan's VF asks for: a catalog check with the VF's arguments, under the VF's
    name (a plan may name one catalog check twice, on two outputs), or a built-in one."""
    if vf.check not in CATALOG:
        return get_check(vf.check)
    if vf.check in (YES_NO, ENTITY, NUMBER_IN_RANGE, DATE):
        return answer_form(vf.name, vf.check, vf.args)
    return evidence_check(vf.name, vf.check, vf.args)


def describe() -> dict[str, str]:
    """Every check a plan may name with what it does, for `--help` and the planner's prompt."""
    return {**BUILTIN_CHECKS, **{n: s.description for n, s in CATALOG.items()}}
