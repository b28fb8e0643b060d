"""A program's contract is `solution()`: what else its module does at the top level is not run."""

from __future__ import annotations

from verimap.checks.programs import run_program, solution_module

SELF_TESTED = """```python
import math

RATE = 3
PRICES = list(range(3))

def solution():
    pens = 4
    return 20 - pens * RATE

def check_solution():
    assert solution() == 18, "The calculated change should be 18 dollars."

check_solution()
ok = check_solution()
print("checked")
```"""


def test_only_imports_definitions_and_plain_assignments_are_kept():
    kept = solution_module(SELF_TESTED.strip("`").removeprefix("python\n"))
    assert "import math" in kept and "RATE = 3" in kept and "def solution" in kept
    assert "PRICES = list(range(3))" in kept
    assert "check_solution()" not in kept.replace("def check_solution()", "")
    assert "print(" not in kept


def test_code_that_does_not_parse_is_left_for_the_run_to_report():
    assert solution_module("def solution(:\n  return 1") == "def solution(:\n  return 1"


async def test_a_wrong_self_test_does_not_sink_a_right_solution(process_sandbox):
    run = await run_program(process_sandbox, SELF_TESTED, timeout=10)
    assert run.error is None and run.answer == 8


async def test_a_solution_that_raises_still_fails(process_sandbox):
    run = await run_program(
        process_sandbox, "```python\ndef solution():\n    return 1 / 0\n```", 10
    )
    assert run.answer is None and run.error and "ZeroDivisionError" in run.error
