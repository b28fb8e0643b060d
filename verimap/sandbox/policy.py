"""The RestrictedPython policy for Python VFs, applied on the trusted host side.

VF code is parsed and rewritten by RestrictedPython's transformer *before* it is
sent, so a rejection costs no sandbox round trip and comes back as a POLICY
outcome the planner can act on. What travels is the rewritten code compiled to
bytecode when the worker's Python reads this interpreter's bytecode (same magic
number), else the rewritten AST as JSON, which any worker compiles; both keep
the original line numbers. The worker (stdlib only) supplies the runtime guards.
Model-written programs are not restricted: they rely on the container alone.
"""

from __future__ import annotations

import ast
import base64
import functools
import marshal
from typing import Any

from RestrictedPython.transformer import RestrictingNodeTransformer

from verimap.sandbox.worker import examples, wire
from verimap.sandbox.worker.constants import ALLOWED_IMPORTS, VF_COMPILE_FLAGS, VF_HELPERS
from verimap.sandbox.worker.constants import MAGIC as BYTECODE_MAGIC  # this interpreter's

__all__ = [
    "ALLOWED_IMPORTS",
    "BYTECODE_MAGIC",
    "POLICY_HINT",
    "VF_HELPERS",
    "PolicyViolation",
    "compile_vf",
    "task_examples",
    "vf_job_code",
]

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
    return _ast_json(_checked(source))


def vf_job_code(source: str, worker_magic: str | None) -> dict[str, Any]:
    """The checked VF as a job's fields: bytecode if the worker can load ours, else the AST.

    Bytecode spares each fresh job process rebuilding and compiling the AST, which
    costs page copies there (the pool's bottleneck); a worker on another Python
    version gets the AST and compiles it itself. Raises PolicyViolation.
    """
    source = _checked(source)
    if worker_magic == BYTECODE_MAGIC:
        return {"code": _bytecode(source), "magic": BYTECODE_MAGIC}
    return {"ast": _ast_json(source)}


def _checked(source: object) -> str:
    if not isinstance(source, str):
        raise PolicyViolation([f"VF code must be a str, not {type(source).__name__}"])
    _restricted_tree(source)
    return source


@functools.lru_cache(maxsize=1024)
def _ast_json(source: str) -> dict[str, Any]:
    return wire.ast_to_json(_restricted_tree(source))


@functools.lru_cache(maxsize=1024)
def _bytecode(source: str) -> str:
    # compiled as the worker compiles an AST
    code = compile(_restricted_tree(source), "<vf>", "exec", VF_COMPILE_FLAGS, dont_inherit=True)
    return base64.b64encode(marshal.dumps(code)).decode("ascii")


@functools.lru_cache(maxsize=1024)
def _restricted_tree(source: str) -> ast.Module:
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
    return ast.fix_missing_locations(tree)


def task_examples(task: str) -> list[tuple[str, str]]:
    """The examples written in `task` as (call, expected) source pairs; empty when it has none.

    Read by the very parser `run_examples` uses in the sandbox, so the host knows without
    running anything whether a `run_examples` VF would check something or raise "the task
    has no examples to run".
    """
    return list(_task_examples(task))


@functools.lru_cache(maxsize=256)
def _task_examples(task: str) -> tuple[tuple[str, str], ...]:
    return tuple(examples.extract_examples(task))
