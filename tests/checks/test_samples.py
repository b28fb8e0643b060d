"""A sampled reasoning reply is read by what it computes: a program in it is run, and the output
the model wrote under its code is not taken."""

from __future__ import annotations

from verimap.checks.samples import reasoned_number
from verimap.testing import EngineGoneSandboxDouble

MADE_UP = """Let's use Python.
```python
house = 250000
loan = house * 0.4
print(house - loan * 0.6)
```
```output
50000.0
```
John has \\(\\boxed{50000}\\) left."""
FAILING = """```python
print(total_cost)
```
```output
120
```
The answer is 120."""
PROSE = "17 pens at 23 dollars is 17 * 23 = 391.\nThe answer is 391."
FRAGMENT = "The cost is `17 * 23`:\n```python\n17 * 23\n```\nThe answer is 391."


async def test_a_reply_with_a_program_gives_what_the_program_prints(process_sandbox):
    number, run = await reasoned_number(MADE_UP, process_sandbox)
    assert number == 190000 and run is not None and run.printed == "190000.0"


async def test_a_program_that_fails_gives_no_number_whatever_the_reply_says(process_sandbox):
    number, run = await reasoned_number(FAILING, process_sandbox)
    assert number is None and run is not None and "NameError" in (run.error or "")


async def test_prose_and_code_that_is_no_program_are_read_as_written(process_sandbox):
    assert await reasoned_number(PROSE, process_sandbox) == (391, None)
    # a bare expression prints nothing and returns nothing: not a program to run
    assert await reasoned_number(FRAGMENT, process_sandbox) == (391, None)


async def test_without_a_sandbox_the_number_is_read_as_written():
    assert await reasoned_number(MADE_UP, None) == (50000, None)


async def test_a_sandbox_fault_gives_no_number_and_says_so():
    number, run = await reasoned_number(MADE_UP, EngineGoneSandboxDouble())
    assert number is None and run is not None and run.sandbox_fault
