"""Shown work: a number the executor worked out must come with its calculation.

The arithmetic check can only recompute what is written, and a bare answer is where small models
slip (given 2 blue and 1 white bolts, a final node answered 5). Weak, and not free: it rejected
right answers whose working was written in a form it cannot read, and each rejection costs a
whole attempt, so no policy runs it by default; a plan may still ask for it by name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from verimap.base.check_names import SHOWN_WORK
from verimap.base.messages import AssistantMessage, Message, ToolMessage
from verimap.base.verdicts import VFVerdict
from verimap.base.verification import CheckTools, Strength, Submission
from verimap.checks.arithmetic import _assistant_text, _show, normalise
from verimap.tools.registry import THOUSANDS_SEP

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

WORKING = SHOWN_WORK
_WORD_NAMES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty "
    "ninety hundred thousand million dozen half"
)
_WORD_VALUES = [*range(21), 30, 40, 50, 60, 70, 80, 90, 100, 1000, 10**6, 12, 0.5]
_WORDS = dict(zip(_WORD_NAMES.split(), _WORD_VALUES, strict=True))
# An operator between numbers, units allowed between them ("80 miles + 150 miles";
# design/decisions.md, D12).
_WORKED = re.compile(r"\d[A-Za-z$() ]{0,20}[-+*/][A-Za-z$() ]{0,20}\d")
_NUMBER_OR_WORD = re.compile(r"\d+(?:\.\d+)?|[A-Za-z]+")


def given_numbers(inputs: Mapping[str, Any]) -> set[float]:
    """Every number the inputs state, in digits or as a number word."""
    text = THOUSANDS_SEP.sub("", json.dumps(inputs, ensure_ascii=False, default=str))
    found = set()
    for tok in _NUMBER_OR_WORD.findall(text):
        value = _WORDS.get(tok.lower()) if tok[0].isalpha() else float(tok)
        if value is not None:
            found.add(float(value))
    return found


def working_check(
    messages: Sequence[Message], outputs: Mapping[str, Any], inputs: Mapping[str, Any]
) -> VFVerdict | None:
    """FAIL when a number output is not among the inputs' numbers (so it was worked out) and
    the replies show no calculation and no tool was called; None when no output is a number.
    The arithmetic check can only recompute what is written, and a bare answer is where the
    small models slip."""
    numbers = [
        v for v in outputs.values() if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    if not numbers:
        return None
    given = given_numbers(inputs)
    worked = [v for v in numbers if float(v) not in given]
    shown = _WORKED.search(normalise(_assistant_text(messages))) or any(
        isinstance(m, ToolMessage) or (isinstance(m, AssistantMessage) and m.tool_calls)
        for m in messages
    )
    if not worked or shown:
        return VFVerdict(name=WORKING, type="check", outcome="PASS")
    return VFVerdict(
        name=WORKING,
        type="check",
        outcome="FAIL",
        message=f"{_show(worked[0])} is not a number the inputs give, so it was worked out, but "
        "your reply shows no calculation with its result (an expression alone is not one). Work it "
        "out step by step, writing each calculation with its result (for example 12 * 3 = 36), "
        "then answer again.",
    )


class ShownWork:
    name = SHOWN_WORK
    strength: Strength = "weak"
    disputes = False

    def applies(self, sub: Submission) -> bool:
        return any(
            isinstance(v, int | float) and not isinstance(v, bool) for v in sub.outputs.values()
        )

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict | None:
        found = working_check(sub.transcript, sub.outputs, sub.inputs)
        return None if found is None else found.model_copy(update={"strength": self.strength})
