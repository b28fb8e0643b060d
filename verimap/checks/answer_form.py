"""The catalog's answer-form checks: an output is Yes or No, a short name, a number in a range,
or a date.

A small planner names them with arguments (`{"check": "number_in_range", "args": {"output":
"answer", "min": 0, "max": 100}}`) instead of writing Python. They say what shape an answer has,
not whether it is right: each is weak, except a range narrow enough to pin a number down, which
still is not known here, so all are weak. In QA, "Insufficient information" is an answer of
every form: a corpus may hold nothing on the question.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verimap.base.check_names import ABSTENTION, DATE, ENTITY, NUMBER_IN_RANGE, YES_NO
from verimap.base.numbers import normalize_number
from verimap.base.verdicts import VFVerdict
from verimap.base.verification import CheckTools, Strength, Submission, verdict

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

YES_NO_WORDS = {"yes", "no"}
MAX_ENTITY_WORDS = 8
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%d %B %Y", "%B %d %Y", "%B %Y", "%b %d %Y", "%d %b %Y")


def named_value(sub: Submission, ref: str) -> tuple[bool, Any]:
    """(found, value) of an output of the node, or of an input it reads (`node.var`)."""
    if ref in sub.outputs:
        return True, sub.outputs[ref]
    if ref in sub.inputs:
        return True, sub.inputs[ref]
    return False, None


def is_abstention(value: Any) -> bool:
    """Whether `value` says the corpus holds no answer ("Insufficient information.")."""
    return isinstance(value, str) and value.strip().rstrip(".").lower() == ABSTENTION.lower()


def parse_date(value: Any) -> dt.date | None:
    """The date `value` states (ISO, "October 7, 2023", "7 Oct 2023", "October 2023"), or None."""
    if isinstance(value, dt.date):
        return value
    if not isinstance(value, str):
        return None
    text = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", value.strip().rstrip("."))
    text = re.sub(r"[,\s]+", " ", text)
    iso = re.match(r"(\d{4})-(\d{2})-(\d{2})", text)
    if iso:
        try:
            return dt.date(int(iso[1]), int(iso[2]), int(iso[3]))
        except ValueError:
            return None
    for fmt in _DATE_FORMATS:
        try:
            return dt.datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    return None


def as_number(value: Any) -> float | None:
    """The finite number `value` is or states ("1,234.5", " 17 "), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and (norm := normalize_number(value)) is not None:
        try:
            number = float(norm)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


@dataclass
class AnswerForm:
    """One answer-form check on the output `output`, under the name the plan gave it."""

    name: str
    form: str
    output: str
    args: dict[str, Any] = field(default_factory=dict)
    strength: Strength = "weak"
    disputes: bool = False

    def applies(self, sub: Submission) -> bool:
        return True

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict | None:
        found, value = named_value(sub, self.output)
        if not found:
            return verdict(self, "FAIL", f"the node gave no output {self.output!r}")
        if is_abstention(value):
            return verdict(self, "PASS")
        problem = form_problem(self.form, value, self.args)
        if problem is None:
            return verdict(self, "PASS")
        return verdict(self, "FAIL", f"{self.output}: {problem}")


def form_problem(form: str, value: Any, args: dict[str, Any]) -> str | None:
    """Why `value` is not of the answer form `form` (None: it is)."""
    text = value.strip() if isinstance(value, str) else value
    if form == YES_NO:
        word = str(text).strip().rstrip(".!").lower() if isinstance(text, str | bool) else ""
        if isinstance(text, bool) or word in YES_NO_WORDS:
            return None
        return f"expected Yes or No, got {value!r}"
    if form == ENTITY:
        if not isinstance(text, str) or not text:
            return f"expected a name, got {value!r}"
        words = text.split()
        if len(words) > MAX_ENTITY_WORDS:
            return f"expected a short name, got {len(words)} words"
        if text.lower().rstrip(".") in YES_NO_WORDS or as_number(text) is not None:
            return f"expected a name, got {value!r}"
        return None
    if form == NUMBER_IN_RANGE:
        number = as_number(value)
        if number is None:
            return f"expected a number, got {value!r}"
        lo, hi = float(args["min"]), float(args["max"])
        if not lo <= number <= hi:
            return f"{number:g} is outside [{lo:g}, {hi:g}]"
        return None
    if form == DATE:
        return None if parse_date(value) is not None else f"expected a date, got {value!r}"
    raise ValueError(f"unknown answer form {form!r}")


def answer_form(name: str, check: str, args: dict[str, Any]) -> AnswerForm:
    """The answer-form check `check` (a catalog name) as the plan's VF `name` asks for it."""
    extra = {k: v for k, v in args.items() if k != "output"}
    return AnswerForm(name=name, form=check, output=str(args["output"]), args=extra)
