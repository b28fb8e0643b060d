"""What code does on many inputs, so that solutions can be told apart by their behaviour.

A task's examples are two or three calls, and code that passes them fails hidden tests often
enough on a small model that they confirm little. Running several solutions on many more inputs
(`code_inputs`) and comparing what they do (CodeT, AlphaCode's clustering) tells solutions apart
without knowing the right outputs: right solutions agree everywhere, wrong ones rarely agree
with them. Each solution runs in its own sandbox program, under a harness that calls it on
every input with a time limit per call and prints the results after a marker its own output
cannot reach.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import hashlib
import inspect
import json
import math
import os
import secrets
import signal
import sys
from collections.abc import Sequence
from typing import Any

from verimap.base.protocols import Sandbox
from verimap.base.sandbox import Outcome
from verimap.checks.code_inputs import (
    call_args,
    call_text,
    entry_point,
    generate_inputs,
    literal_source,
    parameters,
)
from verimap.sandbox.worker.examples import find_examples
from verimap.sandbox.worker.snippets import parse_code

__all__ = [
    "Behaviour",
    "Result",
    "SandboxFault",
    "call_text",
    "clusters",
    "entry_point",
    "example_outputs",
    "first_difference",
    "generate_inputs",
    "run_behaviour",
    "with_task_imports",
    "within_domain",
]

# One input's result: ("ok", canonical repr) | ("raise", exception type) | ("timeout",), or
# ("lost",) when the input was never run (the program died before it and restarts ran out).
Result = tuple[str, ...]
Behaviour = tuple[Result, ...]


class SandboxFault(RuntimeError):
    """The sandbox could not run the program: no verdict on the code."""


# ---- the harness: runs in the sandbox, one program per solution --------------------------------


class _CallTimeout(BaseException):
    """Raised in a call that ran too long: a BaseException, so `except Exception` in the
    solution does not swallow it."""


def canonical(value: Any, depth: int = 0) -> str:
    """A value as a comparable text: floats to 9 significant digits (a whole float as the int),
    dicts and sets sorted, a list never equal to a tuple, and a bool never equal to an int."""
    t = type(value)
    if depth > 20:
        return "<deep>"
    if value is None or t is bool or t is str:
        return repr(value)
    if t is int:
        if value.bit_length() > 4000:  # too long to print: compared by digest
            return f"<int {hashlib.sha256(hex(value).encode()).hexdigest()[:16]}>"
        return repr(value)
    if t is float:
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
            return repr(int(value))
        return repr(float(f"{value:.9g}")) if math.isfinite(value) else repr(value)
    if t is list or t is tuple:
        inner = [canonical(v, depth + 1) for v in value]
        text = ", ".join(inner) + ("," if t is tuple and len(inner) == 1 else "")
        return f"[{text}]" if t is list else f"({text})"
    if t is dict:
        pairs = [f"{canonical(k, depth + 1)}: {canonical(v, depth + 1)}" for k, v in value.items()]
        return "{" + ", ".join(sorted(pairs)) + "}"
    if t is set or t is frozenset:
        items = sorted(canonical(v, depth + 1) for v in value)
        return f"{t.__name__}({{{', '.join(items)}}})"
    if hasattr(value, "tolist") and t.__module__ == "numpy":
        return canonical(value.tolist(), depth + 1)
    plain: Any
    for plain in (int, float, str, list, tuple, dict):  # subclasses: IntEnum, namedtuple
        if isinstance(value, plain):
            return canonical(plain(value), depth)
    text = repr(value)
    return f"<{t.__name__}>" if " at 0x" in text else text


def _outcome(fn: Any, source: str, limit: float) -> list[str]:
    """What one call does: returns (its value, canonical), raises, or runs out of time."""
    try:
        args = ast.literal_eval(source)
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            text = canonical(fn(*args))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _CallTimeout:
        return ["timeout"]
    except BaseException as e:
        return ["raise", type(e).__name__]
    if len(text) > 400:
        text = f"{text[:200]}...<{hashlib.sha256(text.encode()).hexdigest()[:16]}>"
    return ["ok", text]


def _harness(
    source: str, entry: str, inputs: list[str], limit: float, marker: str, start: int
) -> None:
    """Load the solution and call it on inputs[start:], one result line after `marker` each.
    Its own output goes nowhere (fd level too), so nothing it prints looks like a result."""
    channel = open(os.dup(1), "w")  # noqa: SIM115
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    sys.stdin = open(os.devnull)  # noqa: SIM115

    def say(record: dict[str, Any]) -> None:
        channel.write(marker + json.dumps(record) + "\n")
        channel.flush()

    def ring(signum: int, frame: Any) -> None:
        raise _CallTimeout()

    signal.signal(signal.SIGALRM, ring)
    namespace: dict[str, Any] = {"__name__": "__solution__"}
    try:
        signal.setitimer(signal.ITIMER_REAL, LOAD_S)
        try:
            exec(compile(source, "<solution>", "exec", dont_inherit=True), namespace)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except BaseException as e:
        say({"load": f"{type(e).__name__}: {e}"[:300]})
        return
    if not callable(namespace.get(entry)):
        say({"load": f"no function {entry}()"})
        return
    say({"load": None})
    for i in range(start, len(inputs)):
        say({"i": i, "r": _outcome(namespace[entry], inputs[i], limit)})


LOAD_S = 5.0
MAX_RESTARTS = 2
_PRELUDE = (
    "from __future__ import annotations\nimport ast, hashlib, json, math, os, signal, sys\n"
    "from typing import Any\n"
    f"LOAD_S = {LOAD_S!r}\n"
)


def harness_program(
    solution: str, entry: str, inputs: list[str], limit: float, marker: str, start: int = 0
) -> str:
    """The program that runs `solution` on inputs[start:]: the harness's own functions, sent
    as their source, so that what runs in the sandbox is what is tested here."""
    call = f"_harness({solution!r}, {entry!r}, {inputs!r}, {limit!r}, {marker!r}, {start})\n"
    return f"{_PRELUDE}\n{_harness_source()}\n\n{call}"


@functools.cache
def _harness_source() -> str:
    return "\n\n".join(inspect.getsource(f) for f in (_CallTimeout, canonical, _outcome, _harness))


# ---- running and comparing --------------------------------------------------------------------


async def run_behaviour(
    sandbox: Sandbox, solutions: list[str], entry: str, inputs: list[str], *, timeout: float
) -> list[Behaviour | None]:
    """Each solution's behaviour on every input (`timeout` per call), each in its own program so
    that one that crashes cannot take the others down; None for one that does not load.
    SandboxFault when the sandbox itself fails."""
    runs = (_behaviour_of(sandbox, s, entry, inputs, timeout) for s in solutions)
    return list(await asyncio.gather(*runs))


async def _behaviour_of(
    sandbox: Sandbox, solution: str, entry: str, inputs: list[str], limit: float
) -> Behaviour | None:
    """One solution's behaviour. When the program dies in a call (os._exit, a crash, the
    sandbox's own limits), that call's result is the death, and the rest run in a new program,
    at most MAX_RESTARTS times."""
    results: dict[int, Result] = {}
    start = 0
    for restart in range(MAX_RESTARTS + 1):
        marker = f"@@behaviour-{secrets.token_hex(8)}@@"
        program = harness_program(solution, entry, inputs, limit, marker, start)
        budget = min(3600.0, 2 * LOAD_S + limit * (len(inputs) - start) + 1)
        try:
            res = await sandbox.run_program(program, timeout=budget)
        except Exception as e:
            raise SandboxFault(f"{type(e).__name__}: {e}") from e
        if res.outcome is Outcome.SANDBOX_ERROR:
            raise SandboxFault(res.message)
        loaded, got = read_results(res.stdout, marker)
        if loaded is not None:  # it did not load: a first time, no behaviour; later, flaky
            if restart == 0:
                return None
            break
        results.update(got)
        start = next((i for i in range(start, len(inputs)) if i not in results), len(inputs))
        if start == len(inputs):
            break
        results[start] = _death(res.outcome)
        start += 1
    return tuple(results.get(i, ("lost",)) for i in range(len(inputs)))


def _death(outcome: Outcome) -> Result:
    if outcome is Outcome.TIMEOUT:
        return ("timeout",)
    return ("raise", "MemoryError" if outcome is Outcome.OOM else "crash")


def read_results(stdout: str, marker: str) -> tuple[str | None, dict[int, Result]]:
    """(why the solution did not load, or None; {input index: result}) from a harness's output.
    A program that printed nothing did not load either."""
    loaded: str | None = "it ended before loading"
    got: dict[int, Result] = {}
    for line in stdout.splitlines():
        if not line.startswith(marker):
            continue
        try:
            record = json.loads(line[len(marker) :])
        except ValueError:
            continue
        if "load" in record:
            loaded = record["load"]
        elif isinstance(record.get("i"), int) and isinstance(record.get("r"), list):
            got[record["i"]] = tuple(str(x) for x in record["r"])
    return loaded, got


def same(x: Result, y: Result) -> bool | None:
    """Whether two results agree; None when either was never run. Two raises agree whatever
    their types: both solutions reject the input."""
    if x[0] == "lost" or y[0] == "lost":
        return None
    return (x[0] == y[0] == "raise") or x == y


def first_difference(a: Behaviour, b: Behaviour) -> int | None:
    """The first input on which the two behave differently, or None."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if same(x, y) is False), None
    )


def within_domain(mine: Behaviour, reference: Behaviour) -> tuple[Behaviour, Behaviour]:
    """Both behaviours without the inputs the reference rejects (raises or runs out of time
    on): generated inputs can fall outside what the task describes (a malformed string), and
    what code does there is no one's mistake. On HumanEval, the reference solutions raise on
    most inputs drawn for some tasks (parse_music, simplify)."""
    rejected = {i for i, r in enumerate(reference) if r[0] in ("raise", "timeout")}
    return _without(mine, rejected), _without(reference, rejected)


def _without(b: Behaviour, rejected: set[int]) -> Behaviour:
    return tuple(("lost",) if i in rejected else r for i, r in enumerate(b))


def compared(a: Behaviour, b: Behaviour) -> int:
    """On how many inputs the two were compared and one returned a value: two solutions that
    both raise everywhere agree on nothing that matters."""
    return sum(same(x, y) is not None and "ok" in (x[0], y[0]) for x, y in zip(a, b, strict=False))


def clusters(behaviours: Sequence[Behaviour | None]) -> list[list[int]]:
    """Indices grouped by identical behaviour (each joins the first group whose first member it
    does not differ from), largest first, ties by first index; None (did not load) is left out."""
    groups: list[list[int]] = []
    for i, b in enumerate(behaviours):
        if b is None:
            continue
        home = next((g for g in groups if first_difference(behaviours[g[0]], b) is None), None)  # type: ignore[arg-type]
        if home is None:
            groups.append([i])
        else:
            home.append(i)
    return sorted(groups, key=lambda g: (-len(g), g[0]))


def shown(result: Result, limit: float) -> str:
    """A result as the executor reads it: "returns 3", "raises ValueError"."""
    if result[0] == "ok":
        return f"returns {result[1]}"
    if result[0] == "raise":
        return f"raises {result[1]}"
    if result[0] == "timeout":
        return f"does not finish within {limit:g} s"
    return "was not run"


def matches(result: Result, expected: str) -> bool:
    """Whether a result is the value an example expects, up to float rounding."""
    if result[0] != "ok":
        return False
    if result[1] == expected:
        return True
    try:
        return _close(ast.literal_eval(result[1]), ast.literal_eval(expected))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(a, list | tuple) and type(a) is type(b):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def with_task_imports(task: str, code: str) -> str:
    """`code` after the task's own import lines, as the HumanEval scorer runs it: a solution
    that annotates with `List` and forgot the import runs there, so it must run here."""
    imports = [ln.strip() for ln in task.splitlines() if _is_import(ln.strip())]
    return "\n".join([*imports, code]) if imports else code


def _is_import(line: str) -> bool:
    if not line.startswith(("import ", "from ")):
        return False
    tree = parse_code(ast, line, "exec")
    return tree is not None and all(isinstance(n, ast.Import | ast.ImportFrom) for n in tree.body)


def example_outputs(task: str, entry: str) -> dict[str, str]:
    """{input source: canonical expected value} of the examples that call `entry` directly."""
    params = parameters(task, entry)
    out: dict[str, str] = {}
    for call, expected, _ in find_examples(task)[0]:
        node = parse_code(ast, call)
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        args = call_args(node, params) if node.func.id == entry else None
        source = literal_source(args) if args is not None else None
        if source is not None:
            out.setdefault(source, canonical(ast.literal_eval(expected)))
    return out
