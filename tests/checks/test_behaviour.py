"""Inputs generated for a task, and what solutions do on them in the sandbox."""

from __future__ import annotations

import ast
import time

import pytest

from verimap.checks import code_inputs
from verimap.checks.behaviour import (
    SandboxFault,
    call_text,
    canonical,
    clusters,
    compared,
    entry_point,
    example_outputs,
    first_difference,
    generate_inputs,
    matches,
    run_behaviour,
    with_task_imports,
    within_domain,
)
from verimap.sandbox.process import ProcessSandbox

CLOSE = '''Complete the following Python function.

```python
from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """ Check if in given list of numbers, are any two numbers closer to each other than
    given threshold.
    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)
    False
    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)
    True
    """
```'''
COUNT = '''```python
def count_char(text: str, n: int) -> int:
    """How many characters of text occur at least n times.
    >>> count_char("abca", 2)
    2
    >>> count_char(text="xyz", n=1)
    3
    """
```'''
# No annotations: what to draw is read from the examples.
BARE = '''def pairs(xs, k):
    """Pairs of xs that sum to k.
    >>> pairs([1, 2, 3], 4)
    [(1, 3)]
    """'''
WORDS = '''```python
def sort_numbers(numbers: str) -> str:
    """ Input is a space-delimited string of numberals from 'zero' to 'nine'.
    >>> sort_numbers('three one five')
    'one three five'
    """
```'''
# The example's result is not a literal, its arguments are still the task's.
FRUIT = '''def fruit_distribution(s, n):
    """The mangoes in the basket.
    fruit_distribution("5 apples and 6 oranges", 19) ->19 - 5 - 6 = 8
    """'''
HELPERS = '''```python
def poly(xs: list, x: float):
    return sum(c * x**i for i, c in enumerate(xs))


def find_zero(xs: list):
    """A zero of the polynomial.
    >>> round(find_zero([1, 2]), 2)
    -0.5
    """
```'''


def values(task: str, **kw) -> list[tuple]:
    return [ast.literal_eval(s) for s in generate_inputs(task, entry_point(task) or "", **kw)]


def flat(value) -> list:
    if isinstance(value, list | tuple):
        return [x for v in value for x in flat(v)]
    return [value]


def test_the_entry_point_is_the_tasks_last_top_level_function():
    assert entry_point(CLOSE) == "has_close_elements"
    assert entry_point(HELPERS) == "find_zero"
    assert entry_point("How much do 23 pens cost at 17 dollars each?") is None


def test_inputs_are_the_same_for_a_seed():
    assert generate_inputs(CLOSE, "has_close_elements", seed=3) == generate_inputs(
        CLOSE, "has_close_elements", seed=3
    )
    assert len(generate_inputs(CLOSE, "has_close_elements", limit=24)) == 24


def test_the_examples_own_arguments_come_first():
    assert values(CLOSE)[:2] == [([1.0, 2.0, 3.0], 0.5), ([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)]
    # a keyword argument is put in its parameter's place
    assert values(COUNT)[:2] == [("abca", 2), ("xyz", 1)]
    # an example that wraps the call: its inner arguments
    assert values(HELPERS)[0] == ([1, 2],)
    assert values(FRUIT)[0] == ("5 apples and 6 oranges", 19)


def test_inputs_have_the_signatures_types_and_stay_small():
    for numbers, threshold in values(CLOSE, limit=40):
        assert isinstance(numbers, list) and isinstance(threshold, float)
        assert all(isinstance(x, float) for x in numbers)
        assert threshold >= 0  # the examples' thresholds are positive
    for text, n in values(COUNT, limit=40):
        assert isinstance(text, str) and type(n) is int and 0 <= n <= 10
        assert set(text) <= set("abcxyz") and len(text) <= 8


def test_without_annotations_the_examples_say_what_to_draw():
    found = values(BARE, limit=30)
    assert len(found) == 30
    for xs, k in found:
        assert isinstance(xs, list) and all(type(x) is int and x >= 0 for x in xs) and k >= 0
        assert len(xs) <= 6


def test_mutations_stay_near_the_examples():
    found = values(CLOSE)
    assert ([1.0, 3.0], 0.5) in found  # an element dropped
    assert ([3.0, 2.0, 1.0], 0.5) in found  # reversed
    counts = values(COUNT, limit=40)
    assert ("abca", 3) in counts and ("abca", 1) in counts  # off by one


def test_empty_values_only_where_an_example_passes_one():
    """An empty list or text the task never shows is often outside what it describes, and
    solutions that differ there would dispute right code."""
    assert not any(args[0] == [] for args in values(CLOSE, limit=40))
    assert not any(args[0] == "" for args in values(COUNT, limit=40))
    example = ">>> has_close_elements([], 0.5)\n    False\n    >>> has_close"
    shows_empty = CLOSE.replace(">>> has_close", example, 1)
    assert any(args[0] == [] for args in values(shows_empty, limit=40))


def test_texts_of_words_are_drawn_and_mutated_as_words():
    found = values(WORDS, limit=30)
    assert ("five one three",) in found  # reversed
    for (text,) in found:
        assert set(text.split()) <= {"one", "three", "five"}


def test_every_input_reads_back_as_the_same_value():
    for task in (CLOSE, COUNT, BARE, HELPERS, WORDS, FRUIT):
        for source in generate_inputs(task, entry_point(task), limit=40):
            value = ast.literal_eval(source)
            assert isinstance(value, tuple) and repr(value) == source


def test_without_hypothesis_inputs_are_drawn_with_random(monkeypatch):
    def missing(*args, **kwargs):
        raise ImportError("no hypothesis")

    monkeypatch.setattr(code_inputs, "_drawn_by_hypothesis", missing)
    first = values(COUNT, limit=30)
    assert first == values(COUNT, limit=30)
    assert len(first) == 30 and all(isinstance(t, str) and type(n) is int for t, n in first)


def test_a_task_without_a_readable_signature_still_gets_its_examples():
    task = "def f(*args):\n    '''The sum.\n    >>> f(1, 2)\n    3\n    '''"
    assert values(task)[0] == (1, 2)


def test_examples_expected_outputs_by_input():
    assert example_outputs(CLOSE, "has_close_elements") == {
        "([1.0, 2.0, 3.0], 0.5)": "False",
        "([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)": "True",
    }
    assert example_outputs(HELPERS, "find_zero") == {}  # wrapped in round(): not direct
    assert call_text("f", "([1, 2],)") == "f([1, 2])"
    assert call_text("g", "('a', 2)") == "g('a', 2)"


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (0.1 + 0.2, 0.3, True),
        (2.0, 2, True),
        (1.0000001, 1.0, False),
        ([1, 2], (1, 2), False),
        (True, 1, False),
        ({"b": 1, "a": 2}, {"a": 2, "b": 1}, True),
        ({3, 1}, {1, 3}, True),
        ((1,), [1], False),
        (None, "None", False),
    ],
)
def test_canonical_values(a, b, equal):
    assert (canonical(a) == canonical(b)) is equal


def test_results_match_expected_values_up_to_rounding():
    assert matches(("ok", "0.3333333"), "0.333333333")
    assert matches(("ok", "[1, 2.0000000001]"), "[1, 2]")
    assert not matches(("ok", "[1, 2]"), "(1, 2)")
    assert not matches(("raise", "ValueError"), "1")


OK1, OK2, RAISE_A, RAISE_B = (
    ("ok", "1"),
    ("ok", "2"),
    ("raise", "ValueError"),
    ("raise", "KeyError"),
)


def test_first_difference():
    assert first_difference((OK1, RAISE_A), (OK1, RAISE_B)) is None  # both raise: they agree
    assert first_difference((OK1, RAISE_A), (OK1, OK1)) == 1  # one raises, one returns
    assert first_difference((OK1, OK1), (OK1, OK2)) == 1
    assert first_difference((("timeout",), OK1), (OK1, OK1)) == 0
    assert first_difference((("lost",), OK1), (OK2, OK1)) is None  # never run: not compared


def test_inputs_compared_are_those_where_a_value_came_back():
    assert compared((OK1, RAISE_A, ("lost",), ("timeout",)), (OK2, RAISE_B, OK1, ("timeout",))) == 1
    assert compared((OK1, RAISE_A), (OK1, OK2)) == 2


def test_inputs_the_reference_rejects_are_not_compared():
    mine = (OK1, OK2, RAISE_A, OK1)
    reference = (OK1, RAISE_B, OK1, ("timeout",))
    ours, theirs = within_domain(mine, reference)
    assert first_difference(ours, theirs) == 2  # raising where the reference returns still counts
    assert compared(ours, theirs) == 2
    assert first_difference(*within_domain((OK1, OK2), (OK1, RAISE_A))) is None


def test_clusters_largest_first_ties_by_first_index():
    a, b, c = (OK1, OK1), (OK1, OK2), (OK2, OK2)
    assert clusters([a, b, a, None, b, a]) == [[0, 2, 5], [1, 4]]
    assert clusters([c, b, a]) == [[0], [1], [2]]
    assert clusters([b, a, a, b]) == [[0, 3], [1, 2]]
    assert clusters([None]) == []


RIGHT = """
def has_close_elements(numbers, threshold):
    print('@@behaviour-fake@@{"i": 0, "r": ["ok", "42"]}')
    return any(abs(a - b) < threshold
               for i, a in enumerate(numbers) for j, b in enumerate(numbers) if i != j)
"""
# Neighbours only, and it dies on an empty list and loops forever on a zero threshold.
WRONG = """
import os, sys
def has_close_elements(numbers, threshold):
    sys.stderr.write('x' * 100000)
    if not numbers:
        os._exit(3)
    while threshold == 0.0:
        pass
    return any(abs(a - b) < threshold for a, b in zip(numbers, numbers[1:]))
"""
INPUTS = [
    "([1.0, 2.0, 3.0], 0.5)",
    "([1.0, 2.0, 1.1], 0.5)",
    "([], 0.5)",
    "([1.0], 0.0)",
    "(1, 0.5)",
    "([2.0, 1.0, 2.1], 0.5)",
]


async def test_run_behaviour_in_the_process_sandbox(process_sandbox):
    right, wrong, broken, missing = await run_behaviour(
        process_sandbox,
        [RIGHT, WRONG, "def has_close_elements(:", "x = 1"],
        "has_close_elements",
        INPUTS,
        timeout=0.5,
    )
    assert right == (
        ("ok", "False"),
        ("ok", "True"),
        ("ok", "False"),
        ("ok", "False"),
        ("raise", "TypeError"),
        ("ok", "True"),
    )
    assert wrong is not None
    assert wrong[:2] == (("ok", "False"), ("ok", "False"))
    assert wrong[2] == ("raise", "crash")  # os._exit: the rest run in a new program
    assert wrong[3] == ("timeout",)
    assert wrong[4] == ("raise", "TypeError")
    assert broken is None and missing is None
    assert first_difference(right, wrong) == 1


async def test_a_failing_sandbox_is_a_fault_not_a_behaviour():
    class Gone(ProcessSandbox):
        def __init__(self):
            pass

        async def run_program(self, code, **kwargs):
            raise ConnectionError("the daemon went away")

    with pytest.raises(SandboxFault, match="daemon went away"):
        await run_behaviour(Gone(), [RIGHT], "has_close_elements", INPUTS, timeout=1)


def test_solutions_run_after_the_tasks_imports():
    code = "def f(xs: List[int]) -> int:\n    return 1\n"
    assert with_task_imports(CLOSE, code) == "from typing import List\n" + code
    assert with_task_imports(COUNT, code) == code


@pytest.mark.docker
async def test_run_behaviour_in_docker(docker_sandbox, process_sandbox):
    """2 solutions x 24 inputs, as the check runs them, in both backends; the timings are
    printed (-s): tens of milliseconds each once the pool is warm."""
    inputs = generate_inputs(CLOSE, "has_close_elements")
    assert len(inputs) == 24
    neighbours = "for a, b in zip(numbers, numbers[1:])"
    solutions = [
        RIGHT,
        RIGHT.replace(
            "for i, a in enumerate(numbers) for j, b in enumerate(numbers) if i != j", neighbours
        ),
    ]
    timings = {}
    for name, sandbox in (("docker", docker_sandbox), ("process", process_sandbox)):
        await run_behaviour(sandbox, solutions[:1], "has_close_elements", inputs[:1], timeout=2)
        start = time.monotonic()
        right, wrong = await run_behaviour(
            sandbox, solutions, "has_close_elements", inputs, timeout=2
        )
        timings[name] = round(time.monotonic() - start, 3)
        assert right is not None and wrong is not None
        assert first_difference(right, wrong) is not None
    print(f"run_behaviour, 2 solutions x 24 inputs: {timings} s")
    assert timings["docker"] < 10
