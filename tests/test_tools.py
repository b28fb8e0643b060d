import json

import pytest

from verimap.sandbox.base import ExecResult, Outcome, Sandbox
from verimap.tools import (
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
    [("(3+4)*2/7", 2), ("2^10", 1024), ("1,000 + 5", 1005), ("sqrt(16) + max(1, 2)", 6), ("-3 % 2", 1),
     ("10/4", 2.5), ("pi * 0", 0), ("'2 + 1'", 3), ('"17 * 23"', 391)],
)  # fmt: skip
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
