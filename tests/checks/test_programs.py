"""A program's contract is `solution()`: what else its module does at the top level is not run."""

from __future__ import annotations

import pytest

from verimap.checks.programs import run_program, runnable, solution_module

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


BODY_ONLY = """```python
# The price of one pen is 17 dollars
price_per_pen = 17
total_cost = price_per_pen * 23
return total_cost
```"""
SCRIPT = """Here it is:
```python
pens = 23
cost = pens * 17
print("step", pens)
print(f"The total is {cost}")
```"""
OTHER_NAME = "```python\ndef total_cost():\n    return 17 * 23\n\nprint(total_cost())\n```"
NO_PROGRAM = "```python\ndef add(a, b):\n    return a + b\n```\nThe answer is 391."


@pytest.mark.parametrize("reply", [BODY_ONLY, SCRIPT, OTHER_NAME])
async def test_a_program_in_the_shape_the_model_wrote_runs_as_written(process_sandbox, reply):
    run = await run_program(process_sandbox, reply, timeout=10)
    assert run.error is None and run.answer == 391


def test_a_reply_without_a_runnable_program_has_none():
    assert runnable(NO_PROGRAM) is None
    assert runnable("The answer is 391.") is None
    assert runnable("```python\ntotal = 17 * 23\n```") is None  # computes, but answers nothing


def test_a_solution_function_wins_over_the_scripts_around_it():
    reply = "```python\ndef helper():\n    return 2\n\ndef solution():\n    return 3\n```"
    assert runnable(reply) is not None and runnable(reply).endswith("print(solution())\n")
    assert "solution = helper" not in runnable(reply)
