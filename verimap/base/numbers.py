"""Numbers in free text: the final answer of a written solution, and one spelling per number.

The GSM8K scorer and the independent-solution check read replies the same way, so a reply the
check counts as saying 391 is one the scorer would score as 391.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_NUM = r"-?\$?\s*\d[\d,]*(?:\.\d+)?|-?\$?\s*\.\d+"
_NUM_RE = re.compile(_NUM)
_BOXED_RE = re.compile(r"\\boxed\s*\{")
_MARKERS = (
    re.compile(r"####\s*(" + _NUM + ")"),
    re.compile(r"(?:final answer|the answer)\s*(?:is|:|=)?\s*[:=]?\s*\**\s*(" + _NUM + ")", re.I),
    re.compile(r"answer\s*[:=]\s*\**\s*(" + _NUM + ")", re.I),
)


def _boxed_contents(text: str) -> list[str]:
    out = []
    for m in _BOXED_RE.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[m.end() : i - 1])
    return out


# Past a float's range a number is no answer, and an exponent of a billion written out
# would be a billion digits.
_MAX_EXPONENT = 308


def normalize_number(s: str) -> str | None:
    """'$1,234.50' -> '1234.5', '18.0' -> '18'; None when `s` is not a plain number."""
    s = s.strip().rstrip(".").replace(",", "").replace("$", "").replace(" ", "")
    s = s.removesuffix("%")
    try:
        d = Decimal(s)
    except InvalidOperation:
        return None
    if not d.is_finite() or abs(d.adjusted()) > _MAX_EXPONENT:
        return None
    if d == d.to_integral_value():  # exact at any length: quantize would overflow past 28 digits
        return format(d.to_integral_value(), "f")
    return format(d.normalize(), "f")


def final_number(text: str) -> str | None:
    """The final number of a free-text solution, normalised (a boxed non-number as written).

    Order: the last `\\boxed{...}`, `#### N`, "the answer is N", "answer: N", then the
    last number in the text (a model's closing sentence usually holds its answer).
    """
    for m in reversed(_boxed_contents(text)):
        m = m.replace("\\,", ",").replace("\\$", "$").strip()
        plain = normalize_number(m.removeprefix("$").strip())
        if plain is not None:
            return plain
        if m:
            return m
    for rx in _MARKERS:
        found = rx.findall(text)
        if found:
            return normalize_number(found[-1])
    nums = _NUM_RE.findall(text)
    return normalize_number(nums[-1]) if nums else None
