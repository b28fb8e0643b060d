"""Whether a passing Python VF says anything about the answer: it is strong when it fails a
nearby wrong answer.

`assert is_number(outputs['answer'])` and `assert outputs['total'] > 0` pass the right answer
and every wrong one near it, so an answer they pass is not thereby verified. The probe runs the
VF again on the answer perturbed (a number off by one, a boolean flipped, a string changed or
replaced by another, code replaced by a stub that returns None); a VF that fails one of them
pins the answer down. A perturbed answer is still an answer: an empty string would make
`assert outputs['answer'].strip()` strong, and every answer it passes verified.
"""

from __future__ import annotations

import ast
from typing import Any


def _stub(code: str) -> str | None:
    """Code that defines the same top-level functions, each returning None."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not names:
        return None
    return "\n".join(f"def {n}(*args, **kwargs):\n    return None\n" for n in names)


def _nearby(value: Any) -> list[Any]:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1]
    if isinstance(value, float):
        return [value + 1.0, value * 1.5 + 0.5]
    if isinstance(value, str):
        stub = _stub(value) if "def " in value else None
        return [stub] if stub is not None else [value + " (changed)", "(changed)"]
    if isinstance(value, list):
        return [value[:-1], [*value, value[-1]]] if value else [[0]]
    return []


def perturbations(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The outputs with one output at a time moved to a nearby wrong value."""
    out = []
    for name, value in outputs.items():
        for other in _nearby(value):
            out.append({**outputs, name: other})
    return out
