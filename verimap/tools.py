"""Tools executors may call, in a registry users can extend.

A tool is a name, a description, a JSON Schema of its arguments and an async
function returning text: exactly what the OpenAI tools API and the ReAct text
protocol both need.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import json
import math
import operator
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from verimap.errors import VerimapError
from verimap.sandbox.base import ExecResult, Sandbox, SandboxUnavailable


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


class ToolRegistry:
    """Tools by name. `guidance`: how an executor is told to go about the task with these tools,
    in place of the general "think step by step, use a tool for hard calculations" (the search
    tool's: look the facts up first)."""

    def __init__(self, tools: Iterable[Tool] = (), *, guidance: str | None = None):
        self._tools: dict[str, Tool] = {}
        self.guidance = guidance
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
        # Small models add arguments a tool does not take ("operation": "evaluate"); refused, the
        # 1.5B sent the same call 20 times. They are left out and named instead (docs/decisions.md,
        # D11).
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
    "abs": abs, "round": round, "min": min, "max": max, "sqrt": math.sqrt, "log": math.log,
    "log10": math.log10, "log2": math.log2, "exp": math.exp, "sin": math.sin, "cos": math.cos,
    "tan": math.tan, "floor": math.floor, "ceil": math.ceil, "factorial": math.factorial,
    "gcd": math.gcd, "comb": math.comb, "perm": math.perm,
}  # fmt: skip
_CONSTS = {"pi": math.pi, "e": math.e}
THOUSANDS_SEP = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


class CalculatorError(VerimapError, ValueError):
    pass


def safe_eval(expression: str) -> int | float:
    """Arithmetic over numbers, + - * / // % **, parentheses and a few math functions.

    Walks the AST instead of calling `eval`, so no attribute access, names or
    calls outside the whitelist can run; huge powers are refused.
    """
    try:
        text = THOUSANDS_SEP.sub("", expression.replace("^", "**")).strip()
        if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"`":
            text = text[1:-1]  # the expression quoted as a string: "'2 + 1'"
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise CalculatorError(f"not an arithmetic expression: {e.msg}") from None

    def ev(n: ast.AST) -> Any:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if (
            isinstance(n, ast.Constant)
            and isinstance(n.value, int | float)
            and not isinstance(n.value, bool)
        ):
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
            left, right = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Pow) and abs(right) > 1000:
                raise CalculatorError("exponent too large")
            return _BINOPS[type(n.op)](left, right)
        if isinstance(n, ast.UnaryOp) and type(n.op) in _UNOPS:
            return _UNOPS[type(n.op)](ev(n.operand))
        if isinstance(n, ast.Name) and n.id in _CONSTS:
            return _CONSTS[n.id]
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in _FUNCS
            and not n.keywords
        ):
            return _FUNCS[n.func.id](*[ev(a) for a in n.args])
        raise CalculatorError(f"unsupported element: {ast.dump(n)[:60]}")

    try:
        value = ev(tree)
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def calculator_tool() -> Tool:
    def calc(expression: str) -> str:
        try:
            return str(safe_eval(expression))
        except (CalculatorError, ValueError, OverflowError) as e:
            return f"error: {e}"

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
