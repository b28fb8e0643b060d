"""Tools executors may call, in a registry users can extend.

A tool is a name, a description, a JSON Schema of its arguments and an async
function returning text: exactly what the OpenAI tools API and the ReAct text
protocol both need.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import json
import math
import operator
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from verimap.base.errors import VerimapError
from verimap.base.protocols import Sandbox
from verimap.base.sandbox import ExecResult, SandboxUnavailable


class ToolsExhausted(VerimapError, RuntimeError):
    """Raised by a tool that takes no more calls in this transcript (a search budget spent).
    The message is what the agent is told; the tool loop then stops and asks for the answer."""


class Transcript:
    """One agent conversation, for tools whose answers depend on what it has already been
    shown (a search that does not repeat results, a budget of calls)."""


_TRANSCRIPT: ContextVar[Transcript | None] = ContextVar("verimap_transcript", default=None)


@contextlib.contextmanager
def transcript_scope() -> Iterator[Transcript]:
    """Tool calls made inside belong to one new transcript (`current_transcript`)."""
    t = Transcript()
    token = _TRANSCRIPT.set(t)
    try:
        yield t
    finally:
        _TRANSCRIPT.reset(token)


def current_transcript() -> Transcript | None:
    """The transcript the running tool call belongs to; None outside any agent loop."""
    return _TRANSCRIPT.get()


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Awaitable[str] | str] = field(repr=False)

    async def run(self, **kwargs: Any) -> str:
        res = self.fn(**kwargs)
        if inspect.isawaitable(res):
            res = await res
        return res if isinstance(res, str) else json.dumps(res, default=str)

    def openai_spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


# The calls an agent's conversation opens with, made for it from what it is asked (its
# instruction, and the text it is given with it): (tool name, arguments) each.
Opening = Callable[[str, str], list[tuple[str, dict[str, Any]]]]


class ToolRegistry:
    """Tools by name. `guidance`: how an executor is told to go about the task with these tools,
    in place of the general "think step by step, use a tool for hard calculations" (the search
    tool's: look the facts up first). `opening`: the calls made for an agent before it first
    replies, from what it is asked (the search tool's: a search for it), so that its first reply
    already reads their results (`opening_calls`)."""

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        guidance: str | None = None,
        opening: Opening | None = None,
    ):
        self._tools: dict[str, Tool] = {}
        self.guidance = guidance
        self.opening = opening
        for t in tools:
            self.register(t)

    def register(self, tool: Tool) -> Tool:
        if not tool.name.isidentifier():
            raise ValueError(f"tool name {tool.name!r} must be an identifier")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(
                f"unknown tool {name!r}; available: {', '.join(self.names()) or 'none'}"
            ) from None

    def names(self) -> list[str]:
        return list(self._tools)

    def openai_specs(self) -> list[dict[str, Any]]:
        return [t.openai_spec() for t in self._tools.values()]

    def describe(self) -> str:
        """Plain-text list for prompts (planner, ReAct executor)."""
        return "\n".join(
            f"- {t.name}: {t.description} Arguments (JSON Schema): {json.dumps(t.parameters)}"
            for t in self._tools.values()
        )

    def opening_calls(self, instruction: str, given: str = "") -> list[tuple[str, str]]:
        """(tool, JSON arguments) of each call made, before its first reply, for an agent told
        `instruction` and `given` the text beside it, in order; none without an `opening` or for
        a tool not registered."""
        if self.opening is None:
            return []
        calls = self.opening(instruction, given)
        return [(n, json.dumps(a)) for n, a in calls if n in self._tools]

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    async def call(self, name: str, arguments: str | dict[str, Any]) -> str:
        """Run a tool from a model's call; problems come back as text the model can act on,
        except a sandbox that cannot run at all (no model can act on that, and the run must end
        as an infrastructure failure rather than go on without the tool) and a tool that takes
        no more calls (`ToolsExhausted`, for the loop to stop on)."""
        try:
            tool = self.get(name)
        except KeyError as e:
            return f"error: {e.args[0]}"
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}", strict=False)
            except json.JSONDecodeError as e:
                return f"error: arguments are not valid JSON: {e}"
        if not isinstance(arguments, dict):
            return "error: arguments must be a JSON object"
        # Small models add arguments a tool does not take ("operation": "evaluate") and, refused,
        # send the same call again and again. They are left out and named instead
        # (design/decisions.md, D11).
        known = tool.parameters.get("properties")
        extra = sorted(set(arguments) - set(known)) if isinstance(known, dict) else []
        if extra and tool.parameters.get("additionalProperties") is False:
            arguments = {k: v for k, v in arguments.items() if k not in extra}
            note = f" (ignored arguments {name} does not take: {', '.join(extra)})"
        else:
            note = ""
        try:
            return await tool.run(**arguments) + note
        except TypeError as e:
            return f"error: bad arguments for {name}: {e}"
        except (SandboxUnavailable, ToolsExhausted):
            raise
        except Exception as e:
            return f"error: {type(e).__name__}: {e}"


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNOPS: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
    "factorial": math.factorial,
    "gcd": math.gcd,
    "comb": math.comb,
    "perm": math.perm,
}
_CONSTS = {"pi": math.pi, "e": math.e}
THOUSANDS_SEP = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")

# The largest integer the calculator holds at any step, in decimal digits: below Python's limit
# on printing an int (4300 digits), and small enough that every step takes microseconds.
MAX_DIGITS = 4000
MAX_BITS = math.floor(MAX_DIGITS * math.log2(10))
# The longest expression read, in characters.
MAX_EXPRESSION = 10_000
# How long the calculator tool waits for a result, in seconds.
CALCULATOR_TIMEOUT = 5.0
# Below this, log-gamma is exact enough to size a factorial quotient; above it the size is bounded
# from above by k * log2(n), within k**2 / n bits of the truth for the k allowed.
_LGAMMA_EXACT = 2**20


class CalculatorError(VerimapError, ValueError):
    pass


# Deeper trees are refused before evaluation, whatever the interpreter's recursion limit.
MAX_DEPTH = 400
_TOO_DEEP = "refused: the expression nests too deeply or chains too many operations"


def _too_big() -> CalculatorError:
    return CalculatorError(f"refused: the result would have over {MAX_DIGITS} digits")


def _is_int(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def _log2_factorial(n: int) -> float:
    return math.lgamma(n + 1) / math.log(2)


def _log2_falling(n: int, k: int) -> float:
    """log2 of n * (n - 1) * ... * (n - k + 1), for 0 <= k <= n and k small enough to hold."""
    if n <= _LGAMMA_EXACT:
        return (math.lgamma(n + 1) - math.lgamma(n - k + 1)) / math.log(2)
    return k * math.log2(n)


def _guard_power(base: Any, exp: Any) -> None:
    big = _is_int(base) and _is_int(exp) and exp > 0 and abs(base) > 1
    if big and math.log2(abs(base)) * exp > MAX_BITS:
        raise _too_big()


def _guard_product(a: Any, b: Any) -> None:
    if _is_int(a) and _is_int(b) and a.bit_length() + b.bit_length() - 1 > MAX_BITS:
        raise _too_big()


def _no_guard(*args: Any) -> None:
    pass


def _guard_factorial(n: Any) -> None:
    # n! >= 2 ** (n - 1): the cheap bound refuses first, so log-gamma sees small n only.
    if _is_int(n) and n > 1 and (n - 1 > MAX_BITS or _log2_factorial(n) > MAX_BITS):
        raise _too_big()


def _guard_comb(n: Any = None, k: Any = None, *rest: Any) -> None:
    if not (_is_int(n) and _is_int(k) and 0 <= k <= n):
        return
    k = min(k, n - k)  # comb(n, k) >= 2 ** k for this k
    if k > MAX_BITS or _log2_falling(n, k) - _log2_factorial(k) > MAX_BITS:
        raise _too_big()


def _guard_perm(n: Any = None, k: Any = None, *rest: Any) -> None:
    if k is None:
        _guard_factorial(n)
    elif not (_is_int(n) and _is_int(k) and 0 <= k <= n):
        return
    elif k - 1 > MAX_BITS or _log2_falling(n, k) > MAX_BITS:  # perm(n, k) >= k! >= 2 ** (k - 1)
        raise _too_big()


def _guard_round(x: Any = None, ndigits: Any = None, *rest: Any) -> None:
    if _is_int(ndigits) and abs(ndigits) > MAX_DIGITS:  # round(5, -10**9) computes 10**10**9
        raise CalculatorError(f"refused: rounding to over {MAX_DIGITS} digits")


# Checks run on the operands before the step: each refuses what would be too big to compute.
_OP_GUARDS: dict[type, Callable[[Any, Any], None]] = {
    ast.Pow: _guard_power,
    ast.Mult: _guard_product,
}
_CALL_GUARDS: dict[str, Callable[..., None]] = {
    "factorial": _guard_factorial,
    "comb": _guard_comb,
    "perm": _guard_perm,
    "round": _guard_round,
}


def _checked(value: Any) -> int | float:
    """`value` when it is a number the calculator may hold, else a CalculatorError."""
    if _is_int(value):
        if value.bit_length() > MAX_BITS:
            raise _too_big()
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CalculatorError("the result is not a finite number")
        return value
    raise CalculatorError(f"the result is not a real number: {value!r}"[:120])


def _depth(tree: ast.AST) -> int:
    """The deepest nesting of `tree`, found without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def safe_eval(expression: str) -> int | float:
    """Arithmetic over numbers, + - * / // % **, parentheses and a few math functions.

    Walks the AST instead of calling `eval`, so no attribute access, names or calls outside the
    whitelist can run. Every step is bounded before it runs: a power, factorial, binomial or
    permutation whose result would pass `MAX_DIGITS` digits is refused from its operands' sizes,
    and every integer along the way is held to the same size, so any accepted expression takes
    at most milliseconds. Raises CalculatorError, and nothing else, for anything it does not
    compute (too long, too big, not arithmetic, division by zero, a math domain error).
    """
    if len(expression) > MAX_EXPRESSION:
        raise CalculatorError(f"refused: the expression is over {MAX_EXPRESSION} characters")
    try:
        text = THOUSANDS_SEP.sub("", expression.replace("^", "**")).strip()
        if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"`":
            text = text[1:-1]  # the expression quoted as a string: "'2 + 1'"
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise CalculatorError(f"not an arithmetic expression: {e.msg}") from None
    except (ValueError, MemoryError, RecursionError):
        raise CalculatorError(_TOO_DEEP) from None
    if _depth(tree) > MAX_DEPTH:
        raise CalculatorError(_TOO_DEEP)

    def ev(n: ast.AST) -> int | float:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if (
            isinstance(n, ast.Constant)
            and isinstance(n.value, int | float)
            and not isinstance(n.value, bool)
        ):
            return _checked(n.value)
        if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
            left, right = ev(n.left), ev(n.right)
            _OP_GUARDS.get(type(n.op), _no_guard)(left, right)
            return _checked(_BINOPS[type(n.op)](left, right))
        if isinstance(n, ast.UnaryOp) and type(n.op) in _UNOPS:
            return _checked(_UNOPS[type(n.op)](ev(n.operand)))
        if isinstance(n, ast.Name) and n.id in _CONSTS:
            return _CONSTS[n.id]
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in _FUNCS
            and not n.keywords
        ):
            args = [ev(a) for a in n.args]
            _CALL_GUARDS.get(n.func.id, _no_guard)(*args)
            return _checked(_FUNCS[n.func.id](*args))
        raise CalculatorError(f"unsupported element: {ast.dump(n)[:60]}")

    try:
        value = ev(tree)
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        raise CalculatorError("refused: a number too large for floating point") from None
    except RecursionError:
        raise CalculatorError(_TOO_DEEP) from None
    except CalculatorError:
        raise
    except (ValueError, TypeError) as e:
        raise CalculatorError(f"cannot compute: {e}") from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def format_number(value: int | float) -> str:
    """How the calculator shows a result; a CalculatorError past Python's int printing limit
    (lowered by `sys.set_int_max_str_digits` below `MAX_DIGITS`)."""
    try:
        return str(value)
    except ValueError as e:
        raise CalculatorError(f"refused: {e}") from None


def calculator_tool(*, timeout: float = CALCULATOR_TIMEOUT) -> Tool:
    """The `calculator` tool: `safe_eval` on a worker thread, so the event loop keeps running,
    with a result or an error message within `timeout` seconds. A thread cannot be stopped, so
    one still computing after `timeout` keeps its core until it finishes; `safe_eval`'s size
    bounds make every expression it accepts take milliseconds, and the timeout is the limit on
    what the caller waits, which a run's time limit can then cut short as it can any await."""

    async def calc(expression: str) -> str:
        try:
            value = await asyncio.wait_for(asyncio.to_thread(safe_eval, expression), timeout)
            return format_number(value)
        except CalculatorError as e:
            return f"error: {e}"
        except TimeoutError:
            return f"error: refused: the expression took over {timeout:g} s to compute"

    return Tool(
        name="calculator",
        description="Evaluate an arithmetic expression exactly (e.g. '(3+4)*2/7', 'sqrt(2)', '2**10').",
        parameters={
            "type": "object",
            "properties": {
                "expression": {"type": "string", "description": "the arithmetic expression"}
            },
            "required": ["expression"],
            "additionalProperties": False,
        },
        fn=calc,
    )


def render_result(res: ExecResult, empty: str = "(no output)") -> str:
    """What an agent sees of a sandbox run: its output, and on failure why it failed."""
    parts = []
    if res.stdout:
        parts.append(res.stdout.rstrip())
    if res.stderr and not res.passed:
        parts.append(res.stderr.rstrip())
    if not res.passed:
        parts.append(f"[{res.outcome.value}] {res.message}".rstrip())
        if res.traceback:
            parts.append(res.traceback.rstrip())
    return "\n".join(parts) or empty


def python_tool(sandbox: Sandbox, *, timeout: float = 10.0) -> Tool:
    async def run_python(code: str) -> str:
        res = await sandbox.run_program(code, timeout=timeout)
        return render_result(res, "(no output; use print() to show values)")

    return Tool(
        name="python",
        description="Run a Python 3 program in a sandbox and return what it prints (use print()).",
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string", "description": "a complete Python program"}},
            "required": ["code"],
            "additionalProperties": False,
        },
        fn=run_python,
    )


def default_tools(sandbox: Sandbox | None = None) -> ToolRegistry:
    """`calculator`, plus `python` when a sandbox is given."""
    reg = ToolRegistry([calculator_tool()])
    if sandbox is not None:
        reg.register(python_tool(sandbox))
    return reg
