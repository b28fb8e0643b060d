"""The helpers in scope of every Python VF: approx, isclose, is_number, parse_number and
run_examples (the task's own examples as a check), in the worker and through the backends."""

import asyncio
import time
from fractions import Fraction

import pytest

from verimap.evals.humaneval import load_problems
from verimap.sandbox import Outcome
from verimap.sandbox.policy import VF_HELPERS, task_examples
from verimap.sandbox.worker import candidate, examples, helpers, restricted
from verimap.sandbox.worker.constants import VF_HELPERS as WORKER_VF_HELPERS

from .conftest import humaneval_file

# ---------------------------------------------------------------- in scope of every VF


def test_every_vf_namespace_has_the_helpers():
    names = {"approx", "isclose", "is_number", "parse_number", "run_examples"}
    assert VF_HELPERS == WORKER_VF_HELPERS == set(helpers.FUNCTIONS) == names
    for ns in (
        restricted.restricted_globals(),
        restricted.vf_namespace(True),
        restricted.vf_namespace(False),
    ):
        assert {n for n in names if callable(ns.get(n))} == names
        assert ns["load_function"] is candidate.load_function


def test_the_spawners_prebuilt_namespace_has_them_and_the_warm_up_still_runs(tmp_path):
    # the spawner builds the namespace once (restricted_globals) before it forks job processes
    probe = (
        "import sys\n"
        "from verimap_worker.constants import VF_HELPERS\n"
        "restricted.prebuild()\n"
        "ok = jobs.warm_up(sys.argv[2], sys.argv[2])\n"
        "print(ok, sorted(VF_HELPERS - set(restricted.take_namespace())))\n"
    )
    from .test_worker import run_with_worker

    out = run_with_worker(probe, tmp_path)
    assert out.stdout.split() == ["True", "[]"], out.stderr


# ---------------------------------------------------------------- semantics, in the worker


@pytest.mark.parametrize(
    ("a", "b", "kw", "want"),
    [
        (0.1 + 0.2, 0.3, {}, True),
        (1.0, 1.0 + 1e-7, {}, True),
        (1.0, 1.001, {}, False),
        (1.0, 1.001, {"rel": 1e-2}, True),
        (0.0, 1e-10, {}, True),  # abs tolerance near zero
        (0.0, 1e-6, {}, False),
        (0.0, 1e-6, {"abs": 1e-5}, True),
        (3, 3.0000001, {}, True),
        (10**400, 10**400, {}, True),  # beyond float range: exact
        (10**400, 10**400 + 1, {}, False),
        (True, 1, {}, False),  # a bool is not a number
        (1, True, {}, False),
        (True, True, {}, True),
        ([1, 2.0000001, (3.0, 4)], [1.0, 2, [3, 4]], {}, True),  # lists and tuples alike
        ([1, 2], [1, 2, 3], {}, False),
        ({"a": 1.0, "b": [0.5]}, {"b": [0.5000001], "a": 1}, {}, True),
        ({"a": 1}, {"a": 1, "b": 2}, {}, False),
        ("abc", "abc", {}, True),
        ("1.0", 1.0, {}, False),
        (None, None, {}, True),
        (None, 0, {}, False),
        (float("inf"), float("inf"), {}, True),
        (float("nan"), float("nan"), {}, False),
        (Fraction(1, 3), 1 / 3, {}, True),
    ],
)
def test_approx(a, b, kw, want):
    assert helpers.approx(a, b, **kw) is want


def test_approx_takes_numpy_values_as_the_python_values_they_hold():
    np = pytest.importorskip("numpy")
    assert helpers.approx(np.array([0.1 + 0.2, 2.0]), [0.3, 2])
    assert helpers.approx(np.float64(0.3), 0.1 + 0.2) and helpers.is_number(np.int64(3))
    assert not helpers.approx(np.array([1.0, 2.5]), [1, 2])


def test_isclose_is_math_isclose_for_any_size_of_int():
    assert (
        helpers.isclose(0.1 + 0.2, 0.3)
        and helpers.isclose(1, 1.0)
        and not helpers.isclose(1.0, 1.1)
    )
    assert helpers.isclose(1.0, 1.1, rel_tol=0.2) and helpers.isclose(0.0, 1e-3, abs_tol=1e-2)
    assert helpers.isclose(10**400, 10**400) and not helpers.isclose(10**400, 10**400 + 1)
    with pytest.raises(TypeError):
        helpers.isclose("1", 1)


@pytest.mark.parametrize(
    ("x", "want"),
    [
        (3, True),
        (-2.5, True),
        (0, True),
        (10**400, True),
        (Fraction(1, 2), True),
        (True, False),
        (False, False),
        (float("nan"), False),
        (float("inf"), False),
        ("3", False),
        (None, False),
        ([1], False),
        (1j, False),
    ],
)
def test_is_number(x, want):
    assert helpers.is_number(x) is want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("The answer is $1,234.50.", 1234.5),
        ("-3", -3),
        ("42", 42),
        ("x = -3", -3),
        ("So the total is 18 dollars.", 18),
        ("3 apples and 5 pears: 8", 8),
        ("between 3-4 hours", 4),  # a range, not a negative number
        ("It costs 1,000,000 in all", 1000000),
        ("1,2,3", 3),
        ("about 0.5 or .75", 0.75),
        ("6.02e23 atoms", 6.02e23),
        ("Answer: 5.", 5),
        ("\u22127 degrees", -7),  # a typographic minus
        ("2/3", 3),  # no fractions: the last number
        ("H2O has 3 atoms", 3),
        (7, 7),
        (2.5, 2.5),
    ],
)
def test_parse_number(text, want):
    got = helpers.parse_number(text)
    assert got == want and type(got) is type(want)


def test_parse_number_refuses_text_without_a_number_and_non_text():
    with pytest.raises(ValueError, match="no number in 'no digits here'"):
        helpers.parse_number("no digits here")
    with pytest.raises(TypeError, match="takes a str or a number"):
        helpers.parse_number(None)
    with pytest.raises(TypeError):
        helpers.parse_number(True)


# ---------------------------------------------------------------- reading a task's examples

RUNNING_MAX = '''from typing import List


def running_max(xs: List[int]) -> List[int]:
    """The maximum so far at each position.

    >>> running_max([1, 3, 2, 5])
    [1, 3, 3, 5]
    >>> running_max([])
    []
    """
'''


@pytest.mark.parametrize(
    ("task", "want"),
    [
        (RUNNING_MAX, [("running_max([1, 3, 2, 5])", "[1, 3, 3, 5]"), ("running_max([])", "[]")]),
        (  # doctest output over several lines, a blank-line ending, continuation lines
            "def f(n):\n    '''\n    >>> f(\n    ...   2)\n    [1,\n     2]\n\n    '''\n",
            [("f(2)", "[1, 2]")],
        ),
        (  # no output: doctest says None
            "def f(x):\n    '''\n    >>> f([])\n    >>> f([1])\n    1\n    '''\n",
            [("f([])", "None"), ("f([1])", "1")],
        ),
        (  # `>>> f(x) == y` written as an assertion
            "def f(x):\n    '''\n    >>> f(3) == 'xix'\n    '''\n",
            [("f(3)", "'xix'")],
        ),
        (  # the prose styles of HumanEval
            "def g(a, b=0):\n    '''\n    Examples:\n    g(1) ==> 2\n    g(1, 2) => [1]\n"
            "    * g(2) -> 'x'\n    g(3) \u279e True\n    g(4) == (1, 2)\n    g(5) = 6\n"
            "    g(6) should return 7.\n    g(7) returns false\n    for g(8) == -1\n"
            "    g(9)   # returns \"db\"\n    g(10) # => 'No' (must start with a letter)\n"
            "    g(11) ==> 12 # because\n    '''\n",
            [
                ("g(1)", "2"),
                ("g(1, 2)", "[1]"),
                ("g(2)", "'x'"),
                ("g(3)", "True"),
                ("g(4)", "(1, 2)"),
                ("g(5)", "6"),
                ("g(6)", "7"),
                ("g(7)", "False"),
                ("g(8)", "-1"),
                ("g(9)", "'db'"),
                ("g(10)", "'No'"),
                ("g(11)", "12"),
            ],
        ),
        (  # a call over several lines
            "def h(m, x):\n    '''\n    h([\n      [1, 2],\n      [3]\n    ], 1) == [(0, 0)]\n    '''\n",
            [("h([[1, 2], [3]], 1)", "[(0, 0)]")],
        ),
        (  # Input/Output blocks, positional or by the parameters' names
            "def top(arr, k):\n    '''\n    Example 1:\n        Input: arr = [4, 2], k = 1\n"
            "        Output: [4]\n        Explanation: the largest.\n    '''\n",
            [("top([4, 2], 1)", "[4]")],
        ),
        (
            "def p(nodes):\n    '''\n        Input: [4,2,3]\n        Output: [2, 1]\n    '''\n",
            [("p([4, 2, 3])", "[2, 1]")],
        ),
        (
            "def s(lst):\n    '''\n    For lst = [1,2,3] the output should be 14\n"
            "    For lst = []  the output should be 0.\n    '''\n",
            [("s([1, 2, 3])", "14"), ("s([])", "0")],
        ),
        (
            'def r(s, c):\n    \'\'\'\n    For s = "abcde", c = "ae", the result should be '
            "('bcd',False)\n    '''\n",
            [("r('abcde', 'ae')", "('bcd', False)")],
        ),
        (  # a task without code: the examples name the function
            "Write a function running_max(xs) returning the maximum so far.\n"
            "Example: running_max([1, 3, 2]) == [1, 3, 3]\n",
            [("running_max([1, 3, 2])", "[1, 3, 3]")],
        ),
        (  # markdown: backticks and bold labels
            "```python\ndef two_sum(nums, target):\n    pass\n```\n**Example 1:**\n\n"
            "**Input:** `nums = [2,7,11,15], target = 9`\n**Output:** `[0,1]`\n\n"
            "Example 2: `two_sum([3, 2, 4], 6)` returns `[1, 2]`.\n- `two_sum([3, 3], 6)` \u2192 "
            "`[0, 1]`\n- `two_sum(['`'], 1)` -> 3\n",
            [
                ("two_sum([2, 7, 11, 15], 9)", "[0, 1]"),
                ("two_sum([3, 2, 4], 6)", "[1, 2]"),
                ("two_sum([3, 3], 6)", "[0, 1]"),
            ],
        ),
        (  # in a fence, after prose
            "Complete this:\n```python\ndef add(a, b):\n    '''add(2, 3) -> 5'''\n```\n",
            [("add(2, 3)", "5")],
        ),
    ],
)
def test_examples_are_read_in_every_common_style(task, want):
    assert task_examples(task) == want


@pytest.mark.parametrize(
    "task",
    [
        # nothing to read
        "What is six times seven?",
        "Janet has 3 apples and buys f(2) = 5 more. How many?",
        "Let f(x) = 2x + 3. What is f(4)?\nf(2) = 7",  # maths, not code
        "def f(x):\n    '''Returns the square.'''\n",
        # uncertain, so left out
        "def f(x):\n    '''\n    f(a) => True\n    '''\n",  # a name, not a literal
        "def f(x):\n    '''\n    f(1) -> 19 - 5 - 6 = 8\n    '''\n",  # a sum, not a value
        "def f(x):\n    '''\n    f(1) ==> (\"Venus\")\n    '''\n",  # a string, or a 1-tuple?
        "def f(x):\n    '''\n    f(1) ==> 1, 2\n    '''\n",  # an unparenthesized tuple
        "def f(x):\n    '''\n    f(1) ==> ...\n    '''\n",
        "def f(x):\n    '''\n    other_name([1]) == 1\n    '''\n",  # not the task's function
        "def f(x):\n    '''\n    >>> f(1)\n    <object at 0x1>\n    '''\n",
        "def f(x):\n    '''\n    >>> y = f(1)\n    >>> f(1)[0]\n    3\n    '''\n",
        "def f(x):\n    '''\n    >>> f(1) == 2\n    False\n    '''\n",
        "def f(x):\n    '''\n    The value f(1) is 2 and x.f(1) == 2\n    '''\n",
        # `tri(n) = ...` defines tri in maths: its `tri(1) = 3` is not what the code returns
        "def tri(n):\n    '''\n    tri(1) = 3\n    tri(n) = 1 + n / 2, if n is even.\n"
        "    Examples:\n    tri(3) = [1, 3, 2, 8]\n    '''\n",
        # Input names that are not the parameters': passing by position could be wrong
        "def m(grid, capacity):\n    '''\n    Input:\n        grid : [[0, 1]]\n"
        "        bucket_capacity : 1\n    Output: 6\n    '''\n",
        # methods of a class are not functions the code defines at top level
        "class Solution:\n    def two(self, n):\n        '''\n        two(1) == 2\n        '''\n",
    ],
)
def test_what_cannot_be_read_with_certainty_is_left_out(task):
    assert task_examples(task) == []


def test_the_entry_point_is_the_last_top_level_def_and_helpers_count_too():
    task = (
        "def is_palindrome(s):\n    '''\n    >>> is_palindrome('aba')\n    True\n    '''\n\n"
        "def make_palindrome(s):\n    '''\n    >>> make_palindrome('cat')\n    'catac'\n    '''\n"
    )
    found, entry = examples.find_examples(task)
    assert entry == "make_palindrome"
    assert [call for call, _, _ in found] == ["is_palindrome('aba')", "make_palindrome('cat')"]
    assert examples.find_examples(task, "is_palindrome")[1] == "is_palindrome"


# ---------------------------------------------------------------- through the backends

HELPER_CASES = [
    ("assert approx(outputs['x'], 0.3)", {"x": 0.1 + 0.2}, "PASS", ""),
    ("assert approx(outputs['x'], [1, 2.0])", {"x": (1.0000001, 2)}, "PASS", ""),
    ("assert approx(outputs['x'], 0.31), 'far'", {"x": 0.3}, "FAIL", "far"),
    ("assert not approx(outputs['x'], 1)", {"x": True}, "PASS", ""),
    ("assert isclose(outputs['x'], 1.0, rel_tol=0.1)", {"x": 1.05}, "PASS", ""),
    ("assert isclose(outputs['x'], 1.0)", {"x": 1.05}, "FAIL", "assert isclose("),
    ("assert is_number(outputs['x'])", {"x": 3}, "PASS", ""),
    ("assert is_number(outputs['x']), 'not a number'", {"x": "3"}, "FAIL", "not a number"),
    ("assert is_number(outputs['x']), 'not a number'", {"x": float("nan")}, "FAIL", ""),
    ("assert parse_number(outputs['x']) == 1234.5", {"x": "It is $1,234.50."}, "PASS", ""),
    ("assert parse_number(outputs['x']) == -3", {"x": -3}, "PASS", ""),
    ("parse_number(outputs['x'])", {"x": "none"}, "ERROR", "ValueError: no number in 'none'"),
]


@pytest.mark.parametrize(("code", "outputs", "outcome", "message"), HELPER_CASES)
async def test_helpers_in_a_sandboxed_vf(any_sandbox, code, outputs, outcome, message):
    res = await any_sandbox.run_vf(code, {}, outputs)
    assert res.outcome.value == outcome, res
    assert message in res.message


GOOD = "def running_max(xs):\n    return [max(xs[: i + 1]) for i in range(len(xs))]\n"
EXAMPLES_VF = "n = run_examples(outputs['code'], inputs['task'])\nassert n == 2, n"


@pytest.mark.parametrize(
    ("code", "outcome", "message"),
    [
        (GOOD, "PASS", ""),
        (f"```python\n{GOOD}```", "PASS", ""),  # a fence around the code is not the code
        (
            "def running_max(xs):\n    return [max(xs[max(0, i - 1) : i + 2]) if i else xs[0]"
            " for i in range(len(xs))]\n",
            "FAIL",
            "example running_max([1, 3, 2, 5]) returned [1, 3, 5, 5], expected [1, 3, 3, 5]",
        ),
        (
            "def running_max(xs):\n    return tuple(xs)\n",
            "FAIL",
            "example running_max([1, 3, 2, 5]) returned (1, 3, 2, 5), expected [1, 3, 3, 5]",
        ),
        (
            "def running_max(xs):\n    raise ValueError('nope')\n",
            "FAIL",
            "example running_max([1, 3, 2, 5]) raised ValueError: nope",
        ),
        (
            "class Oops(Exception):\n    pass\ndef running_max(xs):\n    raise Oops('no')\n",
            "FAIL",
            "example running_max([1, 3, 2, 5]) raised Oops: no",
        ),
        (
            "def running_maximum(xs):\n    return xs\n",
            "FAIL",
            "the code under test defines no function named 'running_max'",
        ),
        ("def running_max(xs:\n", "FAIL", "candidate code failed to load: SyntaxError"),
    ],
)
async def test_run_examples_in_a_sandboxed_vf(any_sandbox, code, outcome, message):
    res = await any_sandbox.run_vf(EXAMPLES_VF, {"task": RUNNING_MAX}, {"code": code})
    assert res.outcome.value == outcome, res
    assert message in res.message


async def test_run_examples_without_examples_is_an_error_not_a_pass(any_sandbox):
    res = await any_sandbox.run_vf(
        "run_examples(outputs['code'], inputs['task'])",
        {"task": "def f(x):\n    '''Returns x.'''\n"},
        {"code": "def f(x):\n    return x\n"},
    )
    assert res.outcome is Outcome.ERROR
    assert res.message == "ValueError: the task has no examples to run"


async def test_run_examples_with_a_named_entry_point_and_a_wrapping_builtin(any_sandbox):
    task = (
        "Write solve(a) returning the root of a*x + 1.\n"
        "Input: 2\nOutput: -0.5\n\n>>> round(solve(3), 2)\n-0.33\n"
    )
    code = "def solve(a):\n    return -1 / a\n"
    vf = "assert run_examples(outputs['code'], inputs['task'], 'solve') == 2"
    ok = await any_sandbox.run_vf(vf, {"task": task}, {"code": code})
    assert ok.outcome is Outcome.PASS, ok
    bad = await any_sandbox.run_vf(vf, {"task": task}, {"code": "def solve(a):\n    return None\n"})
    assert bad.outcome is Outcome.FAIL
    assert bad.message == "example solve(2) returned None, expected -0.5"


# ---------------------------------------------------------------- all of HumanEval

# Examples in HumanEval's own prompts that its canonical solutions (and its tests) contradict:
# run_examples is right to fail them.
ERRATA = {
    "HumanEval/47": "example median([-10, 4, 6, 1000, 10, 20]) returned 8.0, expected 15.0",
    "HumanEval/116": "example sort_array([1, 5, 2, 3, 4]) returned [1, 2, 4, 3, 5], expected",
}
WITH_EXAMPLES = 151  # of 164, measured; the 13 others have no example written for certain


async def test_humaneval_canonical_solutions_pass_their_examples_and_wrong_ones_fail(any_sandbox):
    problems = load_problems(humaneval_file())
    assert len(problems) == 164
    counts = {t: len(task_examples(p["prompt"])) for t, p in problems.items()}
    ids = [t for t, n in counts.items() if n]
    assert len(ids) >= WITH_EXAMPLES, len(ids)
    vf = "n = run_examples(outputs['code'], inputs['task'])\nassert n == inputs['n'], n"

    def job(t, code):
        task = problems[t]["prompt"]
        return any_sandbox.run_vf(vf, {"task": task, "n": counts[t]}, {"code": code}, timeout=10)

    def renamed(k, t):  # another problem's canonical solution under this one's name
        other = problems[ids[(k + 1) % len(ids)]]
        code = other["prompt"] + other["canonical_solution"]
        return f"{code}\n\n{problems[t]['entry_point']} = {other['entry_point']}\n"

    sem = asyncio.Semaphore(4)

    async def bounded(t, code):
        async with sem:
            return t, await job(t, code)

    start = time.monotonic()
    runs = {
        "canonical": [(t, problems[t]["prompt"] + problems[t]["canonical_solution"]) for t in ids],
        "returns None": [(t, problems[t]["prompt"] + "    return None\n") for t in ids],
        "renamed": [(t, renamed(k, t)) for k, t in enumerate(ids)],
    }
    results = {
        kind: dict(await asyncio.gather(*(bounded(t, code) for t, code in jobs)))
        for kind, jobs in runs.items()
    }
    elapsed = time.monotonic() - start
    for t, res in results["canonical"].items():
        if t in ERRATA:
            assert res.outcome is Outcome.FAIL and res.message.startswith(ERRATA[t]), (t, res)
        else:
            assert res.outcome is Outcome.PASS, (t, res.outcome, res.message)
    failing = {"returns None": {Outcome.FAIL}, "renamed": {Outcome.FAIL, Outcome.TIMEOUT}}
    for kind, outcomes in failing.items():  # another problem's code may loop on these inputs
        wrong = {t: r for t, r in results[kind].items() if r.outcome not in outcomes}
        assert wrong == {}, (kind, {t: (r.outcome, r.message) for t, r in wrong.items()})
    assert all(r.message.startswith("example ") for r in results["returns None"].values())
    print(f"3x{len(ids)} HumanEval example checks in {elapsed:.1f}s")


def test_humaneval_examples_are_read_without_a_sandbox():
    # what the host's planner sees (policy.task_examples): the same counts the sandbox checks
    problems = load_problems(humaneval_file())
    counts = [len(task_examples(p["prompt"])) for p in problems.values()]
    assert sum(1 for n in counts if n) >= WITH_EXAMPLES and sum(counts) >= 432
