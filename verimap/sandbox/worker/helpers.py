"""Plain functions in every VF's namespace, for what small models get wrong in checks.

== on floats, digging the number out of a sentence, and checks that need expected
values the planner cannot know (the task's own examples know them). They are
trusted code: the code under test reaches them only as plain data.
"""

from __future__ import annotations

import math
import re

from . import examples, snippets
from .candidate import (
    CandidateCrashed,
    CandidateError,
    CandidateFunction,
    load_function,
    process_of,
)

_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)"
    r"(?:[eE][-+]?[0-9]+)?"
)


def _real(x) -> bool:
    """int or float, or another real number type (numpy scalars, Fraction); never a bool."""
    t = type(x)
    if t is int or t is float:
        return True
    if t is bool or t is str or x is None or t in (list, tuple, dict, set, bytes):
        return False
    import numbers

    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _plain(x):
    """numpy arrays and scalars as the Python values they hold, so they compare like them."""
    if getattr(type(x), "__module__", None) == "numpy" and hasattr(x, "tolist"):
        return x.tolist()
    return x


def is_number(x) -> bool:
    """True for a finite int or float. A bool is not a number here: True == 1 hides bugs."""
    if not _real(x):
        return False
    if isinstance(x, int):
        return True
    try:
        return math.isfinite(x)
    except OverflowError:  # a Fraction too large for a float is still finite
        return True
    except (TypeError, ValueError):
        return False


def isclose(a, b, rel_tol=1e-9, abs_tol=0.0) -> bool:
    """math.isclose, also for ints too large for a float (compared exactly)."""
    try:
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    except OverflowError:
        return a == b


def _close(a, b, rel, abs_) -> bool:
    if a == b:
        return True
    try:
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)
    except OverflowError:
        return False


def _approx(a, b, rel, abs_, strict: bool) -> bool:
    a, b = _plain(a), _plain(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _real(a) and _real(b):
        return _close(a, b, rel, abs_)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if strict and type(a) is not type(b):
            return False
        return len(a) == len(b) and all(
            _approx(x, y, rel, abs_, strict) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_approx(a[k], b[k], rel, abs_, strict) for k in a)
    return bool(a == b)


def approx(a, b, rel=1e-6, abs=1e-9) -> bool:
    """a and b are equal up to rounding: numbers within `rel` (relative) or `abs` (absolute),
    element by element through lists and tuples (alike, same length) and dicts (same keys);
    anything else must be ==. A bool equals only a bool: approx(True, 1) is False."""
    return _approx(a, b, rel, abs, False)


def parse_number(text):
    """The last number written in `text`, as an int unless it has a decimal point or an
    exponent ("The answer is $1,234.50." -> 1234.5): models end with their answer. A number
    given as a number is returned as it is."""
    if _real(text):
        return text
    if not isinstance(text, str):
        raise TypeError(f"parse_number() takes a str or a number, not {type(text).__name__}")
    last = None
    for last in _NUMBER.finditer(text.replace("\u2212", "-")):  # noqa: B007
        pass
    if last is None:
        raise ValueError(f"no number in {_short(text, 80)}")
    digits = last.group().replace(",", "")
    if "." in digits or "e" in digits or "E" in digits:
        return float(digits)
    return int(digits)


def _short(value, limit: int = 200) -> str:
    return _clip(repr(value), limit)


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _run_call(ast, node, funcs: dict, call: str):
    if not isinstance(node, ast.Call):
        return snippets.literal(ast, node)
    args = [_run_call(ast, a, funcs, call) for a in node.args]
    kwargs = {k.arg: _run_call(ast, k.value, funcs, call) for k in node.keywords}
    fname = node.func.id
    fn = funcs.get(fname)
    try:
        if fn is not None:
            return fn(*args, **kwargs)
        return snippets.PURE_FUNCTIONS[fname](*args, **kwargs)
    except CandidateError as e:
        raise AssertionError(f"example {_clip(call)} raised {e}") from None
    except CandidateCrashed as e:
        raise AssertionError(f"example {_clip(call)}: {e}") from None
    except Exception as e:
        what = f"example {_clip(call)}"
        if fn is None:
            what += f": {fname}() around it"
        raise AssertionError(f"{what} raised {type(e).__name__}: {e}") from None


def run_examples(code: str, task: str, name: str | None = None) -> int:
    """Check `code` against the examples written in `task`; returns how many were checked.

    The code is loaded once, in its own process (load_function), for the functions the
    examples call: the entry point is the task's last top-level def unless `name` says
    otherwise. An example calling some other task function the code does not define is
    left out. The first example whose result differs (approx for numbers; a list is not
    a tuple) or that raises is an AssertionError naming it. A task without examples is a
    ValueError: a check that checks nothing must not pass.
    """
    if type(code) is not str or type(task) is not str:
        raise TypeError(
            "run_examples(code, task) takes the code and the task text as str; got "
            f"{type(code).__name__} and {type(task).__name__}"
        )
    if name is not None and type(name) is not str:
        raise TypeError(f"run_examples() name must be a str, not {type(name).__name__}")
    import ast

    found, entry = examples.find_examples(task, name)
    if not found:
        raise ValueError("the task has no examples to run")
    parsed = []
    wanted: list[str] = []
    for call, expected, called in found:
        parsed.append((call, ast.parse(call, mode="eval").body, ast.literal_eval(expected), called))
        wanted.extend(n for n in sorted(called) if n not in wanted)
    first = entry if entry is not None and entry in wanted else wanted[0]
    try:
        proc = process_of(load_function(code, first))
    except CandidateError as e:
        raise AssertionError(str(e)) from None
    funcs = {n: CandidateFunction(proc, n) for n in wanted if n in proc.names}
    checked = 0
    for call, node, expected, called in parsed:
        if not called <= funcs.keys():
            continue
        got = _run_call(ast, node, funcs, call)
        if not _approx(got, expected, 1e-6, 1e-9, True):
            raise AssertionError(
                f"example {_clip(call)} returned {_short(got)}, expected {_short(expected)}"
            )
        checked += 1
    if not checked:
        raise AssertionError(
            "the code defines none of the functions the task's examples call: "
            + ", ".join(sorted(wanted))
        )
    return checked


# by name, in every VF's namespace (constants.VF_HELPERS names them for the host)
FUNCTIONS = {f.__name__: f for f in (approx, isclose, is_number, parse_number, run_examples)}
