"""What can be known about a Python VF before it runs.

A VF is model-written code, and small models get it wrong in the same few ways: code fences
and stray indentation, an import the sandbox forbids, `outputs["total"]` on a node that outputs
`answer`, a bare comparison without `assert`. At run time each would surface only after every
retry had been spent on it, or not at all (a check that cannot fail passes). Fences and
indentation are undone as the VF is read (`verimap.base.plan_vfs.normalize_code`); the rest,
found here, go back to the planner with their line while it can still fix them.
"""

from __future__ import annotations

import ast
from collections import Counter
from functools import cache

from verimap.base.iotypes import may_hold_code
from verimap.base.plan import USER_TASK, Node, PythonVF

# How a VF reading an output its node lacks is reported (the planner's salvage looks for it).
UNDECLARED_OUTPUT = "is not an output of this node"


def _key(node: ast.AST, name: str) -> tuple[str, int] | None:
    """`name["k"]` or `name.get("k", ...)`: the constant key and its line."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == name
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.slice.value, node.lineno
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == name
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value, node.lineno
    return None


def input_keys(node: Node) -> set[str]:
    """The keys a VF may read from `inputs` (as `resolve_inputs` fills them)."""
    keys = set(node.inputs)
    counts = Counter(r.split(".", 1)[1] for r in node.inputs if r != USER_TASK and "." in r)
    keys.update(v for v, n in counts.items() if n == 1)
    return keys


def _never_fails(tree: ast.Module) -> str | None:
    kinds = {type(n) for n in ast.walk(tree)}
    verify = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "verify"), None
    )
    checks = kinds & {ast.Assert, ast.Raise}
    if verify is not None:
        inner = {type(n) for n in ast.walk(verify)}
        if not (inner & {ast.Return, ast.Assert, ast.Raise}) and not checks:
            return "its verify() has no return and no assert, so it returns None and always passes"
        return None
    if not checks and ast.Call not in kinds:
        return "it has no assert (and no verify() function), so it can never fail"
    return None


def _discarded_tests(tree: ast.Module) -> list[int]:
    """Lines whose comparison is computed and thrown away: `outputs['x'] > 0` without assert."""
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr)
        and (
            isinstance(n.value, ast.Compare | ast.BoolOp)
            or (isinstance(n.value, ast.UnaryOp) and isinstance(n.value.op, ast.Not))
        )
    ]


@cache
def _policy_problems(code: str) -> tuple[str, ...]:
    from verimap.sandbox.policy import PolicyViolation, compile_vf

    try:
        compile_vf(code)
    except PolicyViolation as e:
        return tuple(e.problems)
    return ()


def vf_problems(node: Node, vf: PythonVF, *, policy: bool = True) -> list[str]:
    """Every static problem of one Python VF, each naming the node, the VF and the line."""
    where = f"node {node.id!r}: python VF {vf.name!r}"
    if not vf.code.strip():
        return [f"{where} has no code"]
    try:
        tree = ast.parse(vf.code)
    except SyntaxError as e:
        return [f"{where} does not compile: {e.msg} (line {e.lineno})"]
    problems: list[str] = []
    allowed_in = input_keys(node)
    for n in ast.walk(tree):
        if (k := _key(n, "outputs")) and k[0] not in node.outputs:
            problems.append(
                f"{where} line {k[1]}: outputs[{k[0]!r}] {UNDECLARED_OUTPUT} "
                f"(its outputs: {', '.join(node.outputs)})"
            )
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in ("run_examples", "load_function")
            and n.args
            and (k := _key(n.args[0], "outputs"))
            and k[0] in node.outputs
            and not may_hold_code(node.output_type(k[0]), k[0])
        ):
            problems.append(
                f"{where} line {k[1]}: {n.func.id}() loads outputs[{k[0]!r}] as code, but that "
                "output is not code; check it another way"
            )
        if (k := _key(n, "inputs")) and k[0] not in allowed_in:
            problems.append(
                f"{where} line {k[1]}: inputs[{k[0]!r}] is not an input of this node "
                f"(its inputs: {', '.join(sorted(allowed_in)) or 'none'})"
            )
    for line in _discarded_tests(tree):
        problems.append(
            f"{where} line {line}: the comparison's result is thrown away; write `assert ...`"
        )
    if (why := _never_fails(tree)) is not None:
        problems.append(f"{where} checks nothing: {why}")
    if policy:
        problems.extend(f"{where}: {p} (sandbox policy)" for p in _policy_problems(vf.code))
    return list(dict.fromkeys(problems))


def plan_vf_problems(nodes: list[Node], *, policy: bool = True) -> list[str]:
    return [
        p
        for n in nodes
        for vf in n.verification
        if vf.type == "python"
        for p in vf_problems(n, vf, policy=policy)
    ]
