"""The arithmetic check: every calculation an executor writes out (`20 + 80 + 160 = 260`) is
recomputed, and a wrong one fails the attempt.

Small models plan and reason well enough on many tasks and then slip in a sum; property VFs
(`total > 0`) cannot see it, and the slip becomes the answer. Recomputing what the reply itself
claims needs no model call and no knowledge of the task, so it is safe to run on every node.
It only ever flags a claim it can read without doubt: LaTeX and markdown are normalised, every
plausible reading of both sides is tried (a list bullet or step number before the sum, a
percentage, a rounded result), and the claim fails only when none of them agree. Code blocks and
comparisons (`==`, `<=`) are not claims and are skipped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from verimap.base.check_names import ARITHMETIC
from verimap.base.messages import AssistantMessage, Message
from verimap.base.verdicts import VFVerdict
from verimap.base.verification import CheckTools, Strength, Submission
from verimap.tools.registry import THOUSANDS_SEP, CalculatorError, safe_eval

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

NAME = ARITHMETIC

_FENCED = re.compile(r"```.*?(?:```|$)", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_FRAC = re.compile(r"\\d?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_TEXT = re.compile(r"\\(?:text|mathrm|textbf|mbox)\s*\{([^{}]*)\}")
_LATEX_OPS = (
    (r"\times", " * "),
    (r"\cdot", " * "),
    (r"\div", " / "),
    (r"\approx", " ≈ "),
    (r"\neq", " ≠ "),
    (r"\leq", " ≤ "),
    (r"\geq", " ≥ "),
    # Else dropped as a command: `20\% \times 20 = 0.20 \times 20` read 20 * 20 and failed a
    # right answer (design/decisions.md, D12).
    (r"\%", "%"),
)
_UNICODE_OPS = str.maketrans({"×": "*", "÷": "/", "−": "-", "·": "*", "∗": "*"})
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+|\\.")
_X_TIMES = re.compile(r"(?<=[\d)])\s*[xX]\s*(?=[\d(])")
# A name in parentheses after a number labels it (`6 (Tony) + 5 (Bobby) = 11`): a capitalised
# word, where a unit (`1 (hour) + 30 (minutes) = 90`) would make the sum a conversion.
_LABEL = re.compile(r"(\d)\s*\(\s*[A-Z][A-Za-z']*(?:\s+[A-Z][A-Za-z']*)*\s*\)")
_BOLD = re.compile(r"(?<![\d\s)])\*\*|\*\*(?![\d\s(])|__")
_SPACES = re.compile(r"[ \t]+")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
# An `=` that states a result: not part of ==, <=, >=, !=, =>, :=.
_EQUALS = re.compile(r"(?<![=<>!:])=(?![=>])")
_EXPR_CHARS = set("0123456789.+-*/() \t")
_OPERATOR = re.compile(r"\d\s*[-+*/]\s*[\d(]|\)\s*[-+*/]")
_FIRST_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_OPERATORS = frozenset("+-*/")
# The longest calculation read, in characters (those in the eval transcripts are under 80):
# every tail of it is tried, so a claim costs the square of its length, and a longer one is
# left unchecked rather than hold up the event loop.
MAX_CLAIM = 240


class Slip(BaseModel):
    """One written calculation whose result is wrong."""

    expression: str
    claimed: str
    actual: int | float

    def describe(self) -> str:
        return (
            f"{self.expression} = {self.claimed} is wrong: {self.expression} = {_show(self.actual)}"
        )


def _show(value: int | float) -> str:
    if isinstance(value, float):
        return f"{value:.6g}" if not value.is_integer() else str(int(value))
    return str(value)


def normalise(text: str) -> str:
    """Prose with its calculations in plain `+ - * /` notation, code removed."""
    text = _FENCED.sub("\n", text)
    text = _INLINE_CODE.sub(" ", text)
    text = _TEXT.sub(r" \1 ", text)
    text = _LABEL.sub(r"\1", text)
    for _ in range(3):
        text = _FRAC.sub(r"((\1)/(\2))", text)
    for cmd, rep in _LATEX_OPS:
        text = text.replace(cmd, rep)
    text = _LATEX_COMMAND.sub(" ", text).replace("{", " ").replace("}", " ").replace("$", " ")
    text = text.translate(_UNICODE_OPS)
    text = _BOLD.sub(" ", text)
    text = _X_TIMES.sub(" * ", text)
    return _SPACES.sub(" ", THOUSANDS_SEP.sub("", text))


def _value(expr: str) -> int | float | None:
    """The value of `expr`; None when the calculator does not compute it (not arithmetic, or
    too big: `safe_eval` bounds it) or it is past a float's range, where no written claim can be
    compared with it: such a claim is unverifiable, neither right nor wrong."""
    try:
        value = safe_eval(expr)
    except CalculatorError:
        return None
    try:
        return value if math.isfinite(float(value)) else None
    except OverflowError:
        return None


def _readings(expr: str) -> list[int | float]:
    """Every value the text can mean: with and without percentages as fractions."""
    out = []
    for form in dict.fromkeys((_PERCENT.sub(r"(\1/100)", expr), _PERCENT.sub(r"\1", expr))):
        v = _value(form)
        if v is not None:
            out.append(v)
    return out


def _left_candidates(span: str) -> list[str]:
    """The calculation before an `=`: the longest tail of the span that has an operator, and
    every shorter tail starting at a token (a step number or bullet may precede the sum)."""
    tokens = [m.start() for m in re.finditer(r"(?:(?<=\s)|^)\S|(?<=[(])\d", span)]
    out = []
    for start in tokens:
        tail = span[start:].strip().lstrip("*").strip()
        if tail and _OPERATOR.search(tail) and (tail[0].isdigit() or tail[0] in "(."):
            out.append(tail)
    return out


def _right_candidates(span: str) -> list[str]:
    span = span.strip().lstrip("*").strip()
    out: list[str] = []
    first = _FIRST_NUMBER.match(span)
    if first is None:
        return out
    whole = span.rstrip(". ")
    if whole:
        out.append(whole)
    number = first.group(0)
    if span[first.end() :].lstrip().startswith("%"):
        number += "%"
    out.append(number)
    return out


def _agrees(
    lefts: Iterable[tuple[str, int | float]], rights: Iterable[tuple[str, int | float]]
) -> bool:
    """Whether a reading of the claim is the calculation's value to the claim's written
    precision (`10 / 3 = 3.33` holds, `17 * 23 = 390` does not), or, after a division, that
    value rounded down or up (`20 / 3 = 6` full bags, `2 / 3 = 0.66`). The sign is not
    compared: a list bullet reads as a minus."""
    for expr, left in lefts:
        for text, right in rights:
            digits = re.search(r"\.(\d+)", text)
            unit = 10.0 ** -(len(digits.group(1)) if digits else 0)
            have, want = abs(left) / unit, abs(right) / unit
            if not (math.isfinite(have) and math.isfinite(want)):
                continue
            if abs(have - want) <= 0.5 + 1e-9 * have:
                return True
            if "/" in expr and round(want) in (math.floor(have + 1e-9), math.ceil(have - 1e-9)):
                return True
    return False


def _in_equation(prefix: str, left: str, right: str, suffix: str) -> bool:
    """Whether the numbers around an `=` are part of an equation with an unknown, not a
    calculation: `2S + 3 - 3 = 21 - 3` is no claim that 3 - 3 = 21, nor `21 - 3 = 2 * S` that
    21 - 3 = 2 (design/decisions.md, D25). A leading operator with nothing before it is a list
    bullet (`**` is bold), and a unit after a space (`18 cm`) is prose."""
    joined = prefix.rstrip()[-1:].isalnum() or prefix.rstrip().endswith((")", "]"))
    lead, tail = left.lstrip(), right.rstrip()
    if joined and lead[:1] in _OPERATORS and not lead.startswith("**"):
        return True
    if tail[-1:] in _OPERATORS and not tail.endswith("**") and suffix[:1] != "":
        return True
    return bool(right) and right[-1:].isdigit() and suffix[:1].isalpha()


def slips(text: str) -> list[Slip]:
    """The wrong calculations written in `text`, each once, in order."""
    found: dict[tuple[str, str], Slip] = {}
    for line in normalise(text).splitlines():
        if "≈" in line:
            line = line.split("≈")[0]
        parts = [m.start() for m in _EQUALS.finditer(line)]
        for i, at in enumerate(parts):
            before = line[parts[i - 1] + 1 if i else 0 : at]
            start = len(before)
            while start > 0 and before[start - 1] in _EXPR_CHARS:
                start -= 1
            after_end = parts[i + 1] if i + 1 < len(parts) else len(line)
            after = line[at + 1 : after_end]
            end = 0
            body = after.lstrip(" *")
            offset = len(after) - len(body)
            while end < len(body) and (body[end] in _EXPR_CHARS or body[end] == "%"):
                end += 1
            if len(before) - start > MAX_CLAIM or _in_equation(
                before[:start], before[start:], body[:end], body[end:]
            ):
                continue
            lefts = _left_candidates(before[start:])
            rights_text = _right_candidates(after[: offset + end])
            if not lefts or not rights_text:
                continue
            left_values = [(c, v) for c in lefts for v in _readings(c)]
            rights = [(t, v) for t in rights_text for v in _readings(t)]
            if not left_values or not rights or _agrees(left_values, rights):
                continue
            (expr, actual), claim = left_values[0], rights_text[-1]
            found.setdefault((expr, claim), Slip(expression=expr, claimed=claim, actual=actual))
    return list(found.values())


def _assistant_text(messages: Sequence[Message]) -> str:
    return "\n".join(m.content for m in messages if isinstance(m, AssistantMessage))


def check(messages: Sequence[Message]) -> VFVerdict | None:
    """The check's verdict on an attempt's replies; None when they state nothing with `=`."""
    text = _assistant_text(messages)
    if "=" not in text:
        return None
    wrong = slips(text)
    if not wrong:
        return VFVerdict(name=NAME, type="check", outcome="PASS")
    listed = "; ".join(s.describe() for s in wrong[:5])
    return VFVerdict(
        name=NAME,
        type="check",
        outcome="FAIL",
        message=f"your reasoning has a calculation error: {listed}. Recompute it (with a tool if "
        "you have one) and answer again.",
    )


class Arithmetic:
    """Weak: sound arithmetic in the reasoning does not make the reasoning right, but a slipped
    sum that became the answer is caught without a model call."""

    name = NAME
    strength: Strength = "weak"
    disputes = False

    def applies(self, sub: Submission) -> bool:
        return bool(sub.transcript)

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict | None:
        found = check(sub.transcript)
        return None if found is None else found.model_copy(update={"strength": self.strength})
