"""MBPP (Austin et al. 2021) as eval tasks: its splits, the prompt, the function under test and
the trusted tests.

A split is `SET[:PART]`: the task set (`sanitized`, the 427 hand-checked tasks, or `full`, all
974) and the part of it, by task id as the paper and Hugging Face cut it (`prompt` 1-10, `test`
11-510, `validation` 511-600, `train` 601-974, or `all`). The default is `sanitized:test` (257
tasks). The prompt is MBPP's own: the description and the first of the task's tests, which
names the function and fixes its signature. A task is right when all of `test_list` passes
(with the set's `test_imports` and `test_setup_code`; the full set's `challenge_test_list` is not
run, as in the standard evaluation), scored as HumanEval is: the tests run in the sandbox's test
runner, apart from the code under test (`verimap.evals.scoring.score_humaneval`).
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass

from verimap.evals.data import MBPP_FILES, DataError, MBPPItem
from verimap.evals.scoring import CODE_NOTE, as_check, entry_point_of

PARTS: dict[str, range] = {
    "test": range(11, 511),
    "validation": range(511, 601),
    "train": range(601, 975),
    "prompt": range(1, 11),
    "all": range(1, 975),
}
DEFAULT_SPLIT = "sanitized:test"
SPLIT_METAVAR = "SET[:PART]"
SPLIT_HELP = (
    f"MBPP's tasks: SET is {' or '.join(MBPP_FILES)}, PART one of {', '.join(PARTS)} [test]; "
    f"default {DEFAULT_SPLIT} (docs/eval.md#mbpp)."
)


@dataclass(frozen=True)
class Split:
    """A task set and a part of it (`sanitized:test`)."""

    task_set: str
    part: str

    def __str__(self) -> str:
        return f"{self.task_set}:{self.part}"

    def holds(self, item: MBPPItem) -> bool:
        return item.task_id in PARTS[self.part]


def parse_split(text: str | None) -> Split:
    """`SET[:PART]` (None: the default) as a `Split`; anything else is a DataError listing the
    valid values."""
    spelled = DEFAULT_SPLIT if text is None else str(text).strip().lower()
    task_set, _, part = spelled.partition(":")
    part = part or "test"
    if task_set not in MBPP_FILES or part not in PARTS or spelled.count(":") > 1:
        raise DataError(
            f"unknown MBPP split {text!r}: give SET[:PART] with SET one of "
            f"{', '.join(MBPP_FILES)} and PART one of {', '.join(PARTS)} (default "
            f"{DEFAULT_SPLIT}; `full` alone is full:test)"
        )
    return Split(task_set, part)


def _parse(source: str) -> ast.Module:
    with warnings.catch_warnings():  # the reference code's "\w" in plain strings
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(source)


def _defined(source: str) -> list[str]:
    """The functions and classes `source` defines at its top level."""
    body = _parse(source).body
    return [n.name for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef)]


def _calls(source: str) -> list[str]:
    """The names called in `source`, in order of appearance."""
    tree = _parse(source)
    found = [
        (n.lineno, n.col_offset, n.func.id)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]
    return [name for *_, name in sorted(found)]


def entry_point(item: MBPPItem) -> str:
    """The function the task's first test calls that its reference code defines (task 126's is
    named `sum`); else the first non-builtin the tests call."""
    try:
        defined = set(_defined(item.code))
        called = _calls(item.test_list[0])
    except SyntaxError as e:
        raise DataError(
            f"MBPP task {item.task_id}: its code or first test is not Python: {e}"
        ) from None
    name = next((c for c in called if c in defined), None) or entry_point_of(item.test_list[0])
    if name is None:
        raise DataError(f"MBPP task {item.task_id}: its first test calls no function")
    return name


_PASS_THIS = "\nYour code should pass this test:\n\n"


def task_prompt(item: MBPPItem, entry: str) -> str:
    """MBPP's prompt (the description, then the first test), and the note every code task ends
    with, which names the function to write."""
    return (
        f"{item.prompt.strip()}{_PASS_THIS}{item.test_list[0].strip()}"
        f"\n\n{CODE_NOTE.format(entry_point=entry)}"
    )


def task_problem(prompt: str) -> str:
    """A `task_prompt`'s description and first test, one line after the other, without the
    note: how a demonstration states an MBPP task. Other text comes back as it is."""
    head, sep, rest = prompt.partition(_PASS_THIS)
    note = "\n\n" + CODE_NOTE.split("{", 1)[0]
    if not sep or note not in rest:
        return prompt
    return f"{head}\n{rest[: rest.rindex(note)]}"


def tests_of(item: MBPPItem, task_set: str = "sanitized") -> str:
    """The task's trusted tests: its imports, its setup code, and every test of `test_list` in a
    `check(candidate)`, as the sandbox's test runner takes them. The full set names no test
    imports: its tests ran in the reference code's namespace (task 596 calls `sys.getsizeof`),
    so they get the reference code's imports."""
    imports = item.test_imports if task_set == "sanitized" else reference_imports(item.code)
    head = "\n".join([*imports, plain(item.test_setup_code)]).strip("\n")
    return (head + "\n\n" if head else "") + as_check([plain(t) for t in item.test_list])


def reference_imports(code: str) -> list[str]:
    """The import statements at the top level of `code`."""
    body = _parse(code).body
    return [ast.unparse(n) for n in body if isinstance(n, ast.Import | ast.ImportFrom)]


def plain(code: str) -> str:
    """`code` with `\\n` line ends and no trailing blanks (the full set writes `\\r\\n`)."""
    return "\n".join(ln.rstrip() for ln in code.splitlines()).strip("\n")
