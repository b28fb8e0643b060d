"""Pieces of Python read out of task prose: bracket groups, literals, calls, signatures.

Examples are read from the task text as it is written in the wild (HumanEval alone
has a dozen styles). Whatever cannot be read with certainty is left out: a misread
example would fail correct code, which is worse than checking one example fewer.
The `ast` module is passed in rather than imported here: the worker imports it only
when a job needs it, after it has forked its spawner.
"""

from __future__ import annotations

import re

PURE_FUNCTIONS = {  # may wrap an example call, as in `round(find_zero([1, 2]), 2)`
    f.__name__: f
    for f in (abs, round, sorted, len, list, tuple, set, frozenset, sum, min, max, str, int, float)
}
DEF_RE = r"^([ \t]*)(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)[ \t]*\("
_CLASS_RE = r"^([ \t]*)class[ \t]+[A-Za-z_]"
CALL_RE = r"(?<![\w.])([A-Za-z_]\w*)[ \t]*\("
PREFIX_RE = (  # what may come before an example's call on its line
    r"[ \t]*(?:[rRuU]?(?:\"\"\"|'''))?[ \t]*(?:(?:[-*\u2022+]|[0-9]{1,2}[.)])[ \t]+)?"
    r"(?:(?:for[ \t]+example|for[ \t]+instance|e\.g\.|examples?(?:[ \t]*[0-9]+)?|assert|for"
    r"|\**[A-Za-z][\w ]{0,30}:\**)[ \t]*[:,]?[ \t]*)?$"
)
SEP_RE = (
    r"[ \t]*(?:#[ \t]*)?(==>|-->|=>|->|\u279e|\u2192|\u21d2|==|=(?![=>])|should[ \t]+return"
    r"|should[ \t]+be|will[ \t]+return|returns|evaluates[ \t]+to)[ \t]*"
)
INPUT_RE = r"^[ \t]*(?:[-\u2022][ \t]*)?\**[ \t]*input[ \t]*\**[ \t]*:[ \t]*\**(.*)$"
OUTPUT_RE = r"^[ \t]*(?:[-\u2022][ \t]*)?\**[ \t]*output[ \t]*\**[ \t]*:[ \t]*\**(.*)$"
FOR_RE = (
    r"^[ \t]*(?:[-*\u2022][ \t]*)?for[ \t]+(.+?),?[ \t]+the[ \t]+(?:output|result|answer)[ \t]+"
    r"(?:should[ \t]+be|will[ \t]+be|is)[ \t]*:?[ \t]+(.+)$"
)
_NAMED_VALUE_RE = r"^[ \t]*([A-Za-z_]\w*)[ \t]*[:=][ \t]*(.+?)[ \t]*,?[ \t]*$"
_WORDS = {"true": "True", "false": "False", "none": "None", "null": "None"}
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


def group_end(text: str, i: int, limit: int = 5000) -> int:
    """Index just past the bracket group that opens at text[i]; -1 if it does not close
    (or a string in it does not end on its line: prose, not code)."""
    stack = []
    end = min(len(text), i + limit)
    j = i
    while j < end:
        c = text[j]
        if c == '"' or c == "'":
            if text.startswith(c * 3, j):
                return -1
            j += 1
            while j < end and text[j] != c:
                if text[j] == "\n":
                    return -1
                j += 2 if text[j] == "\\" else 1
            if j >= end:
                return -1
        elif c == "#":
            j = text.find("\n", j)
            if j < 0:
                return -1
            continue
        elif c in _CLOSERS:
            stack.append(_CLOSERS[c])
        elif c in ")]}":
            if not stack or stack.pop() != c:
                return -1
            if not stack:
                return j + 1
        j += 1
    return -1


def literal(ast, node):
    """The value of a literal expression node; ValueError for anything else (or an Ellipsis)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and sub.value is ...:
            raise ValueError("an ellipsis is not a value")
    return ast.literal_eval(node)


def parse_code(ast, source: str, mode: str = "eval"):
    """The AST of `source`, or None. Task text is not code: its warnings (an invalid escape
    in a string, "1if") are nobody's to read."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source.strip(), mode=mode)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return tree.body if mode == "eval" else tree


def example_calls(ast, node, known) -> set | None:
    """Task functions an example expression calls; None unless it is one we may evaluate:
    calls with literal arguments, to task functions or to a few pure builtins around them."""
    if not isinstance(node, ast.Call):
        try:
            literal(ast, node)
        except Exception:
            return None
        return set()
    if not isinstance(node.func, ast.Name):
        return None
    name = node.func.id
    if not known(name) and name not in PURE_FUNCTIONS:
        return None
    called = {name} if known(name) else set()
    for arg in [*node.args, *(k.value for k in node.keywords)]:
        if isinstance(arg, ast.Starred):
            return None
        sub = example_calls(ast, arg, known)
        if sub is None:
            return None
        called |= sub
    if any(k.arg is None for k in node.keywords):
        return None
    return called


def expected_value(ast, text: str, prose: bool) -> str | None:
    """The source of the literal an example expects, or None when it is not certain.

    Doctest output is taken whole. Prose may follow the value with a comment, a
    parenthetical or a full stop; an unparenthesized tuple, a parenthesized non-tuple
    (`("Venus")`, meant as a 1-tuple) and an ellipsis are ambiguous and left out.
    """
    s = text.strip()
    if not s or len(s) > 20000:
        return None
    if not prose:
        node = parse_code(ast, s)
        try:
            literal(ast, node)
        except Exception:
            return None
        return ast.unparse(node)
    cuts = [len(s) - 1, len(s)] if s.endswith(".") else [len(s)]  # "1." in prose is 1
    for i in range(len(s) - 1, 0, -1):
        rest = s[i:]
        comment = s[i] == "#" or (s[i].isspace() and rest.lstrip()[:1] in ("#", "("))
        if comment or rest.strip() in (".", ",", ";"):
            cuts.append(i)
    for cut in cuts[:64]:
        p = s[:cut].strip()
        if p.lower() in _WORDS:
            return _WORDS[p.lower()]
        node = parse_code(ast, p)
        if node is None:
            continue
        try:
            literal(ast, node)
        except Exception:
            continue
        tuple_ = isinstance(node, ast.Tuple)
        if tuple_ != (p.startswith("(") and p.endswith(")")):
            return None
        return ast.unparse(node)
    return None


def task_functions(ast, text: str) -> dict:
    """{name: (parameter names or None, required count, offset)} of the task's top-level
    functions (the least indented defs that are not methods), in order of definition."""
    classes = [
        (m.start(), len(m.group(1).expandtabs())) for m in re.finditer(_CLASS_RE, text, re.M)
    ]
    found = []
    for m in re.finditer(DEF_RE, text, re.M):
        indent = len(m.group(1).expandtabs())
        if not any(pos < m.start() and depth < indent for pos, depth in classes):
            found.append((indent, m))
    top = min((indent for indent, _ in found), default=0)
    funcs: dict = {}
    for indent, m in found:
        if indent != top:
            continue
        params, required = None, 0
        end = group_end(text, m.end() - 1)
        tree = (
            parse_code(ast, f"def f({text[m.end() : end - 1]}):\n pass", "exec")
            if end > 0
            else None
        )
        if tree is not None and tree.body[0].args.vararg is None:
            args = tree.body[0].args
            params = [a.arg for a in [*args.posonlyargs, *args.args]]
            required = len(params) - len(args.defaults)
        funcs.pop(m.group(2), None)
        funcs[m.group(2)] = (params, required, m.start())
    return funcs


def synthesized_call(ast, name: str, info, text: str) -> str | None:
    """`name(...)` from an "Input: x = 1, y = [2]" style argument list, or None.

    Arguments are passed by position, so they are taken only when their names (if given)
    are the function's leading parameters in order, covering every required one."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    if len(lines) > 1:
        named = [m for ln in lines if (m := re.match(_NAMED_VALUE_RE, ln))]
        if len(named) != len(lines):
            return None
        inner = ", ".join(f"{m.group(1)}={m.group(2)}" for m in named)
    else:
        inner = lines[0].strip()
        m = re.match(r"^([A-Za-z_]\w*)[ \t]*:[ \t]*(.+)$", inner)
        if m:
            inner = f"{m.group(1)}={m.group(2)}"
    node = parse_code(ast, f"f({inner})")
    if not isinstance(node, ast.Call) or (node.args and node.keywords):
        return None
    params, required, _ = info
    if node.keywords:
        names = [k.arg for k in node.keywords]
        if params is None or names != params[: len(names)]:
            return None
        values = [k.value for k in node.keywords]
    else:
        values = node.args
        if params is not None and len(values) > len(params):
            return None
    if params is not None and len(values) < required:
        return None
    try:
        for v in values:
            literal(ast, v)
    except Exception:
        return None
    return f"{name}({', '.join(ast.unparse(v) for v in values)})"


def untick(line: str) -> str:
    """The line with markdown's backticks as spaces (`f(1)` returns `2`), unless one sits in
    a string literal, where it is data; same length, so offsets hold."""
    if "`" not in line:
        return line
    quote = None
    for c in line:
        if quote is None and c in "'\"":
            quote = c
        elif c == quote:
            quote = None
        elif c == "`" and quote is not None:
            return line
    return line if quote is not None else line.replace("`", " ")


def value_text(text: str, start: int) -> str:
    """The text of a value starting at `start`: to the end of its line, or of the bracket
    group it opens when that spans lines, plus the rest of that line."""
    i = start
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] in _CLOSERS:
        end = group_end(text, i)
        if end > 0:
            i = end
    line_end = text.find("\n", i)
    value = text[start : len(text) if line_end < 0 else line_end]
    if value.rstrip().endswith(('"""', "'''")):  # the docstring ends on the example's line
        value = value.rstrip()[:-3]
    return value
