"""The RestrictedPython policy for Python VFs, applied on the trusted host side.

VF code is parsed and rewritten by RestrictedPython's transformer *before* it is
sent, so a rejection costs no sandbox round trip and comes back as a POLICY
outcome the planner can act on. The rewritten AST travels as JSON with its
original line numbers; the worker (stdlib only) supplies the runtime guards.
Model-written programs are not restricted: they rely on the container alone.
"""

from __future__ import annotations

import ast
import functools
from typing import Any

from RestrictedPython.transformer import RestrictingNodeTransformer

from verimap.sandbox.worker_module import worker

ALLOWED_IMPORTS: frozenset[str] = worker().ALLOWED_IMPORTS

POLICY_HINT = (
    "Write the VF as plain assertions over `inputs`/`outputs` (or a `verify(inputs, outputs)` "
    "function); no names or attributes starting with '_', no eval/exec/open, and imports only from: "
    + ", ".join(sorted(ALLOWED_IMPORTS))
    + ". To call model-written code use load_function(code, name)."
)


class PolicyViolation(ValueError):
    """VF code the policy rejects; `problems` lists each reason with its line."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))

    @property
    def message(self) -> str:
        return "VF rejected by the sandbox policy: " + "; ".join(self.problems) + ". " + POLICY_HINT


def _check_imports(tree: ast.AST) -> list[str]:
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.append(f"Line {node.lineno}: relative imports are not allowed")
                continue
            names = [node.module or ""]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in ALLOWED_IMPORTS:
                problems.append(f"Line {node.lineno}: import of {name!r} is not allowed")
    return problems


def compile_vf(source: str) -> dict[str, Any]:
    """Check and rewrite VF source; returns the JSON form of the restricted AST.

    Raises PolicyViolation with line-numbered reasons (syntax errors included).
    Results are cached: a plan's VFs are re-checked on every retry.
    """
    if not isinstance(source, str):
        raise PolicyViolation([f"VF code must be a str, not {type(source).__name__}"])
    return _compile_cached(source)


@functools.lru_cache(maxsize=1024)
def _compile_cached(source: str) -> dict[str, Any]:
    try:
        tree = ast.parse(source, filename="<vf>")
    except SyntaxError as e:
        raise PolicyViolation([f"Line {e.lineno}: SyntaxError: {e.msg}"]) from None
    problems = _check_imports(tree)
    errors: list[str] = []
    warnings: list[str] = []
    used: dict[str, bool] = {}
    tree = RestrictingNodeTransformer(errors, warnings, used).visit(tree)
    problems.extend(errors)
    if problems:
        raise PolicyViolation(problems)
    ast.fix_missing_locations(tree)
    return worker().ast_to_json(tree)
