import asyncio
import json
import math
import sys
import time

import pytest

from verimap.base.protocols import Sandbox
from verimap.base.sandbox import ExecResult, Outcome
from verimap.tools import registry as tools
from verimap.tools.registry import (
    MAX_DIGITS,
    CalculatorError,
    Tool,
    ToolRegistry,
    calculator_tool,
    default_tools,
    python_tool,
    safe_eval,
)


@pytest.mark.parametrize(
    "expr,value",
    [
        ("(3+4)*2/7", 2),
        ("2^10", 1024),
        ("1,000 + 5", 1005),
        ("sqrt(16) + max(1, 2)", 6),
        ("-3 % 2", 1),
        ("10/4", 2.5),
        ("pi * 0", 0),
        ("'2 + 1'", 3),
        ('"17 * 23"', 391),
    ],
)
def test_calculator_arithmetic(expr, value):
    assert safe_eval(expr) == value


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os')",
        "().__class__",
        "open('x')",
        "2**100000",
        "1/0",
        "x + 1",
        "[1, 2]",
        "'a' * 3",
    ],
)
def test_calculator_refuses_code(expr):
    with pytest.raises(CalculatorError):
        safe_eval(expr)


# Each ran for hours (or without end) on the host, in the event loop, before results were sized.
HOSTILE = [
    "factorial(10**8)",
    "comb(10**9, 5*10**8)",
    "perm(10**9, 10**6)",
    "perm(10**7)",
    "2**2**2**2**2",
    "9**9**9",
    "((10**1000)**1000)**1000",
    "round(5, -10**30)",
    "10**4001 * 7",
]


def _calculate(expressions: list[str]) -> list[tuple[str, float]]:
    """In a child process: the calculator's reply to each expression and the seconds it took."""
    out = []
    for e in expressions:
        start = time.perf_counter()
        reply = asyncio.run(calculator_tool().run(expression=e))
        out.append((reply, time.perf_counter() - start))
    return out


def test_hostile_expressions_are_refused_before_they_are_computed(bounded):
    replies = bounded(120, _calculate, HOSTILE)
    for expr, (reply, seconds) in zip(HOSTILE, replies, strict=True):
        assert reply.startswith("error: refused:"), (expr, reply)
        assert seconds < 1, (expr, seconds)
    assert f"over {MAX_DIGITS} digits" in replies[0][0]


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("factorial(1000)", math.factorial(1000)),
        ("comb(10**100, 2)", math.comb(10**100, 2)),
        ("comb(2**20, 1000)", math.comb(2**20, 1000)),
        ("perm(2000, 1000)", math.perm(2000, 1000)),
        ("(-1)**(10**100)", 1),
        ("2**13000", 2**13000),
        ("round(1234, -2)", 1200),
    ],
    ids=lambda v: str(v)[:24],
)
def test_big_results_within_the_bound_are_exact(expr, value):
    assert safe_eval(expr) == value


@pytest.mark.parametrize(
    ("expr", "match"),
    [
        ("3 * 10**400 / 7", "too large for floating point"),
        ("factorial(1700)", "over 4000 digits"),
        ("2**13289", "over 4000 digits"),
        ("(-8)**0.5", "not a real number"),
        ("1e308 * 10", "finite"),
        ("sqrt(-1)", "math domain"),
        ("factorial(2.5)", "cannot compute"),
        ("min()", "cannot compute"),
        ("1+" * 2000 + "1", "nests too deeply"),
        ("-" * 9000 + "1", "nests too deeply"),
        ("1" * 5000, "not an arithmetic expression"),
        ("1 + 1" * 3000, "over 10000 characters"),
    ],
    ids=lambda v: str(v)[:24],
)
def test_what_cannot_be_computed_is_a_calculator_error(expr, match):
    with pytest.raises(CalculatorError, match=match):
        safe_eval(expr)


async def _tick(ticks: list[int]) -> None:
    for i in range(5):
        await asyncio.sleep(0.01)
        ticks.append(i)


async def _calculate_beside_a_ticker(expression: str) -> tuple[str, list[int]]:
    ticks: list[int] = []
    reply, _ = await asyncio.wait_for(
        asyncio.gather(
            default_tools().call("calculator", {"expression": expression}), _tick(ticks)
        ),
        30,
    )
    return reply, ticks


def _calculate_in_a_loop(expression: str) -> tuple[str, list[int]]:
    return asyncio.run(_calculate_beside_a_ticker(expression))


def test_a_hostile_expression_does_not_hold_up_other_tasks(bounded):
    reply, ticks = bounded(120, _calculate_in_a_loop, "factorial(10**8)")
    assert reply.startswith("error: refused:") and ticks == [0, 1, 2, 3, 4]


async def test_the_calculator_answers_within_its_timeout_and_the_loop_runs_meanwhile(monkeypatch):
    monkeypatch.setattr(tools, "safe_eval", lambda expression: time.sleep(0.5) or 1)
    ticks: list[int] = []
    reply, _ = await asyncio.gather(calculator_tool(timeout=0.1).run(expression="1"), _tick(ticks))
    assert reply == "error: refused: the expression took over 0.1 s to compute"
    assert ticks == [0, 1, 2, 3, 4]


def test_a_result_past_the_int_printing_limit_is_an_error():
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        with pytest.raises(CalculatorError, match="refused"):
            tools.format_number(10**700)
    finally:
        sys.set_int_max_str_digits(old)


async def test_registry_call_reports_problems_as_text():
    reg = default_tools()
    assert reg.names() == ["calculator"]
    assert await reg.call("calculator", '{"expression": "6*7"}') == "42"
    assert (await reg.call("nope", "{}")).startswith("error: unknown tool 'nope'")
    assert "not valid JSON" in await reg.call("calculator", "{bad")
    assert "bad arguments" in await reg.call("calculator", '{"expr": "1"}')
    assert (await reg.call("calculator", '{"expression": "1/0"}')).startswith("error:")
    extra = '{"expression": "2 + 1", "operation": "evaluate", "variable": "x"}'
    assert await reg.call("calculator", extra) == (
        "3 (ignored arguments calculator does not take: operation, variable)"
    )
    spec = reg.openai_specs()[0]
    assert spec["function"]["name"] == "calculator" and spec["function"]["parameters"][
        "required"
    ] == ["expression"]


async def test_user_tools_extend_registry():
    async def shout(text: str) -> str:
        return text.upper()

    reg = ToolRegistry([calculator_tool()])
    reg.register(
        Tool(
            "shout",
            "Upper-case text.",
            {"type": "object", "properties": {"text": {"type": "string"}}},
            shout,
        )
    )
    assert await reg.call("shout", {"text": "hi"}) == "HI"
    assert "shout" in reg.describe()
    with pytest.raises(ValueError):
        reg.register(Tool("bad name", "", {}, shout))


class RecordingSandboxDouble(Sandbox):
    kind = "recording-double"

    def __init__(self, result):
        self.result, self.codes = result, []

    async def run_vf(self, code, inputs, outputs, *, timeout=10.0):
        raise NotImplementedError

    async def run_program(self, code, *, timeout=10.0, files=None, argv=None, stdin=""):
        self.codes.append(code)
        return self.result

    async def run_tests(self, candidate_code, test_code, entry_point, *, timeout=10.0):
        raise NotImplementedError


async def test_python_tool_goes_through_sandbox():
    sb = RecordingSandboxDouble(ExecResult(outcome=Outcome.PASS, stdout="42\n"))
    reg = default_tools(sb)
    assert await reg.call("python", json.dumps({"code": "print(6*7)"})) == "42"
    assert sb.codes == ["print(6*7)"]
    sb.result = ExecResult(
        outcome=Outcome.ERROR, message="NameError: x", traceback="Traceback...\nNameError: x"
    )
    out = await python_tool(sb).run(code="x")
    assert "[ERROR] NameError: x" in out and "Traceback" in out


def test_a_deep_expression_is_refused_whatever_the_recursion_limit():
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        with pytest.raises(CalculatorError, match="nests too deeply"):
            safe_eval("1+" * 2000 + "1")
    finally:
        sys.setrecursionlimit(old)
    assert safe_eval("1+" * 300 + "1") == 301
