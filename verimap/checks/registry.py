"""The built-in checks by name: what a plan may ask for and what a policy may add."""

from __future__ import annotations

from collections.abc import Callable

from verimap.check_names import (
    ANSWER_AGREEMENT,
    ARITHMETIC,
    BUILTIN_CHECKS,
    CODE_AGREEMENT,
    DEFAULT_BALLOT,
    RUN_EXAMPLES,
    SHOWN_WORK,
)
from verimap.checks.answer_agreement import AnswerAgreement
from verimap.checks.arithmetic import Arithmetic
from verimap.checks.base import Check
from verimap.checks.code_agreement import CodeAgreement
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


def describe() -> dict[str, str]:
    """Every built-in check with what it does, for `--help` and the planner's prompt."""
    return dict(BUILTIN_CHECKS)
