"""The examples written in a task, read for `run_examples` and for the host.

The host reads them with this very parser (`verimap.sandbox.policy.task_examples`),
so it knows without running anything whether a `run_examples` VF checks something.
"""

from __future__ import annotations

import builtins
import re

from .snippets import (
    CALL_RE,
    DEF_RE,
    FOR_RE,
    INPUT_RE,
    OUTPUT_RE,
    PREFIX_RE,
    PURE_FUNCTIONS,
    SEP_RE,
    example_calls,
    expected_value,
    group_end,
    parse_code,
    synthesized_call,
    task_functions,
    untick,
    value_text,
)


def find_examples(task: str, name: str | None = None) -> tuple[list, str | None]:
    """([(call source, expected literal source, task functions called)], entry point)."""
    import ast
    import bisect
    import keyword

    task = task.replace("\r\n", "\n")
    funcs = task_functions(ast, task)
    entry = name or (next(reversed(funcs)) if funcs else None)
    if funcs or name or re.search(DEF_RE, task, re.M):
        known = (set(funcs) | ({name} if name else set())).__contains__
    else:  # no code in the task: any name that is not Python's own

        def known(n):
            return not (hasattr(builtins, n) or keyword.iskeyword(n) or n in PURE_FUNCTIONS)

    lines = task.split("\n")
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)

    def line_of(pos: int) -> int:
        return bisect.bisect_right(offsets, pos) - 1

    def owner(pos: int) -> str | None:
        before = [n for n, info in funcs.items() if info[2] < pos]
        return before[-1] if before else entry

    def display(source: str, node) -> str:
        source = source.strip()
        return ast.unparse(node) if "\n" in source or "#" in source else source

    found = []  # (offset, call, expected, called, written with "=")
    defined_by_equation = set()  # `tri(n) = ...`: its `tri(3) = 8` lines are maths, not code
    doctest_lines = set()
    i = 0
    while i < len(lines):
        m = re.match(r"^([ \t]*)>>>(?:[ \t]|$)(.*)$", lines[i])
        if not m:
            i += 1
            continue
        start, indent, source = offsets[i], m.group(1), m.group(2)
        doctest_lines.add(i)
        i += 1
        while i < len(lines) and re.match(r"^[ \t]*\.\.\.(?:[ \t]|$)", lines[i]):
            source += "\n" + re.sub(r"^[ \t]*\.\.\.[ \t]?", "", lines[i])
            doctest_lines.add(i)
            i += 1
        want, clear = [], True
        while i < len(lines) and lines[i].strip() and not lines[i].lstrip().startswith(">>>"):
            if not lines[i].startswith(indent):
                clear = False  # output indented less than its prompt: not a doctest
                break
            shown = lines[i][len(indent) :]
            if shown.rstrip().endswith(('"""', "'''")):
                want.append(shown.rstrip()[:-3])
                break
            want.append(shown)
            doctest_lines.add(i)
            i += 1
        node = parse_code(ast, source)
        text = "\n".join(want).strip()
        expected = expected_value(ast, text, prose=False) if text else "None"
        if (  # `>>> f(x) == y` with no output (or True): written as an assertion
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Eq)
            and text in ("", "True")
        ):
            expected = expected_value(ast, ast.unparse(node.comparators[0]), prose=False)
            node = node.left
            source = ast.unparse(node)
        called = example_calls(ast, node, known) if isinstance(node, ast.Call) else None
        if clear and called and expected is not None:
            found.append((start, display(source, node), expected, called, False))

    lines = [untick(line) for line in lines]
    task = "\n".join(lines)
    i = 0
    while i < len(lines):
        line, base = lines[i], offsets[i]
        if i in doctest_lines:
            i += 1
            continue
        io = re.match(INPUT_RE, line, re.I)
        target = owner(base)
        if io and target is not None:
            j, given = i + 1, [io.group(1)]
            while j < len(lines) and j < i + 12 and lines[j].strip():
                if re.match(OUTPUT_RE, lines[j], re.I):
                    break
                given.append(lines[j])
                j += 1
            out = re.match(OUTPUT_RE, lines[j], re.I) if j < len(lines) else None
            if out:
                info = funcs.get(target, (None, 0, 0))
                call = synthesized_call(ast, target, info, "\n".join(given))
                text = value_text(task, offsets[j] + out.start(1))
                expected = expected_value(ast, text, prose=True)
                if call and expected is not None:
                    found.append((base, call, expected, {target}, False))
                i = line_of(offsets[j] + out.start(1) + len(text)) + 1
                continue
        m = re.match(FOR_RE, line, re.I)
        if m and target is not None:
            call = synthesized_call(ast, target, funcs.get(target, (None, 0, 0)), m.group(1))
            expected = expected_value(ast, m.group(2), prose=True)
            if call and expected is not None:
                found.append((base, call, expected, {target}, False))
            i += 1
            continue
        head = next((c for c in re.finditer(CALL_RE, line) if known(c.group(1))), None)
        if head is None or not re.match(PREFIX_RE, line[: head.start()], re.I):
            i += 1
            continue
        end = group_end(task, base + head.end() - 1)
        if end < 0:
            i += 1
            continue
        source = task[base + head.start() : end]
        node = parse_code(ast, source)
        line_end = task.find("\n", end)
        sep = re.match(SEP_RE, task[end : len(task) if line_end < 0 else line_end], re.I)
        if sep is None or not isinstance(node, ast.Call):
            i = line_of(end) + 1
            continue
        by_equation = sep.group(1) == "="
        called = example_calls(ast, node, known)
        if not called:
            if by_equation:
                defined_by_equation.add(head.group(1))
            i = line_of(end) + 1
            continue
        text = value_text(task, end + sep.end())
        expected = expected_value(ast, text, prose=True)
        if expected is not None and not (by_equation and not funcs and not name):
            found.append((base, display(source, node), expected, called, by_equation))
        i = line_of(end + sep.end() + len(text)) + 1

    examples, seen = [], set()
    for _, call, expected, called, by_equation in sorted(found, key=lambda f: f[0]):
        if (by_equation and called & defined_by_equation) or (call, expected) in seen:
            continue
        seen.add((call, expected))
        examples.append((call, expected, frozenset(called)))
    return examples, entry


def extract_examples(task: str, name: str | None = None) -> list[tuple[str, str]]:
    """The examples written in a task, as (call source, expected literal source) pairs.

    Read: doctests (`>>> f(x)` then its output), `f(x) ==> y` and its kin (==, =>, ->, ➞,
    =, returns, should return, # => y), "Input: ... Output: ..." blocks and "For x = ...
    the output should be y" lines. Calls are to the task's top-level functions (`name`
    too; with neither, to any non-builtin name) with literal arguments.
    """
    if not isinstance(task, str):
        raise TypeError(f"the task must be a str, not {type(task).__name__}")
    return [(call, expected) for call, expected, _ in find_examples(task, name)[0]]
