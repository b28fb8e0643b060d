"""The kind of a task, when nobody says: code to write, a number to work out, or a question.

A benchmark names its domain; `verimap run "TASK"` does not, and a question that is not about a
number must not be asked for one. The rule is deliberately plain: code when the task shows
examples of calls or asks for a function; math when it asks for a quantity (how many, how much,
a total, a calculation, "double 21") and states a number; every other task is a question.
"""

from __future__ import annotations

import re

_CODE = re.compile(
    r"```python|\bdef \w+\s*\(|\bwrite (?:a |the )?(?:python )?(?:function|program|script|class)\b"
    r"|\bimplement (?:a |the )?(?:python )?(?:function|class)\b",
    re.IGNORECASE,
)
_QUANTITY = re.compile(
    r"\bhow (?:many|much|far|long|old|fast|often)\b|\b(?:calculate|compute|evaluate|solve)\b"
    r"|\bwhat (?:is|was|are|were) (?:the )?(?:total|sum|difference|product|quotient|average|mean"
    r"|cost|price|value|number|percentage|ratio|area|perimeter|volume|speed|distance)\b"
    r"|\bwhat (?:is|was) \d|\b(?:times|plus|minus|divided by|multiplied by|squared|percent of)\b"
    r"|(?:^|[.!?]\s+)(?:double|triple|halve|add|subtract|multiply|divide|sum(?! up)|square|round|convert)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty"
    r"|forty|fifty|hundred|thousand|dozen|half|twice|double|triple)\b",
    re.IGNORECASE,
)
# An operator between numbers; a minus or an "x" only with spaces around it, so that dates
# (2023-10-31) and sizes (2x4) are not sums.
_EXPRESSION = re.compile(r"\d\s*[+*/×÷^]\s*\d|\d\s+[-x]\s+\d")


def infer_domain(task: str) -> str:
    """ "programming", "math" or "qa" for `task` (module docstring)."""
    from verimap.sandbox.policy import task_examples

    if _CODE.search(task) or task_examples(task):
        return "programming"
    if _NUMBER.search(task) and (_QUANTITY.search(task) or _EXPRESSION.search(task)):
        return "math"
    return "qa"
