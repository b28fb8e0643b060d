"""Any benchmark: the user's own tasks as a `Benchmark`.

A JSONL/CSV/JSON file or a saved Hugging Face `datasets` directory is read through a
`FieldMap`: which field is the input, the target, the id, and for code the tests and the entry
point; and which scorer decides (exact, numeric, code-tests, judge). A `file.py@function` may
return a `TaskSet` (`verimap.evals.custom_code` loads it); `verimap.evals.any_benchmark` opens
whatever `-b` names.

A custom benchmark is named after its file (`capitals.jsonl` is `capitals`) or its function,
and its `identity` (the resolved path, fields, scorer and domain) goes into the run's
config.json, so a resume with another file or field map is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from verimap.base.numbers import normalize_number
from verimap.base.protocols import Sandbox
from verimap.evals.custom_files import load_rows, suffix_of
from verimap.evals.custom_scoring import (
    DEFAULT_DOMAIN,
    DOMAINS,
    PROMPT_NOTES,
    SCORERS,
    ScoreFn,
    Scoring,
)
from verimap.evals.data import DataError, DataSource, checked_id
from verimap.evals.scoring import Score, as_check, entry_point_of
from verimap.evals.tasksets import Benchmark, EvalTask
from verimap.evals.tools import math_tools, programming_tools
from verimap.tools.registry import ToolRegistry

# The fields looked for when the field map names none, in order.
INPUT_NAMES = ("input", "question", "prompt", "problem", "query")
TARGET_NAMES = ("target", "answer", "output", "label", "expected")
SOLUTION_NAMES = ("canonical_solution", "solution", "target", "answer")
TEST_NAMES = ("test", "tests", "test_list")


@dataclass(frozen=True)
class FieldMap:
    """How a file's rows become tasks; None: the default (see `INPUT_NAMES` etc.; the id is
    the row index; the scorer is exact, or code-tests when a test field is named)."""

    input: str | None = None
    target: str | None = None
    id: str | None = None
    scorer: str | None = None
    domain: str | None = None
    test: str | None = None
    entry_point: str | None = None

    def given(self) -> list[str]:
        """The command-line flags of the fields set."""
        flags = {"test": "--test-field", "entry_point": "--entry-point-field"}
        return [flags.get(f.name, f"--{f.name}") for f in fields(self) if getattr(self, f.name)]

    @property
    def scorer_name(self) -> str:
        return self.scorer or ("code-tests" if self.test else "exact")


@dataclass
class TaskSet:
    """What a `file.py@function` benchmark may return: `tasks` (each an `EvalTask`, or a dict
    with `input`, `target` and optionally `id`, `test`, `entry_point`), and a `scorer`: a name
    (exact, numeric, code-tests, judge) or a function `(task, answer_text) -> bool | Score`,
    sync or async, that gets the sandbox too when it has a `sandbox` parameter."""

    tasks: Sequence[EvalTask | Mapping[str, Any]]
    scorer: str | Callable[..., Any]
    domain: str | None = None  # math | programming | qa; default: the scorer's
    name: str | None = None  # default: the function's name


def safe_name(name: str) -> str:
    """A name fit for a directory (`runs/NAME-METHOD`) and a report column."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "custom"


def domain_tools(domain: str, sandbox: Sandbox) -> ToolRegistry:
    """A code task's workspace, else the sandboxed Python, calculator and sympy (there is no
    corpus to search for a custom QA task)."""
    return programming_tools(sandbox) if domain == "programming" else math_tools(sandbox)


class CustomBenchmark(Benchmark):
    """Tasks and a scorer that came from the user rather than from a built-in loader."""

    def __init__(
        self,
        name: str,
        domain: str,
        tasks: list[EvalTask],
        scorer: ScoreFn,
        source: DataSource,
        identity: dict[str, Any],
    ):
        if domain not in DOMAINS:
            raise DataError(
                f"{name}: unknown domain {domain!r}; choose one of {', '.join(DOMAINS)}"
            )
        self.name, self.domain, self.source = name, domain, source
        self._tasks, self._scorer, self._identity = tasks, scorer, identity
        self.judge: Any = None

    def tasks(self) -> list[EvalTask]:
        return list(self._tasks)

    def tools(self, sandbox: Sandbox) -> ToolRegistry:
        return domain_tools(self.domain, sandbox)

    async def score(self, task: EvalTask, answer: Any, sandbox: Sandbox) -> Score:
        return await self._scorer(task, answer, Scoring(sandbox, self.judge))

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def use_models(self, models: Mapping[str, Any]) -> None:
        self.judge = models.get("judge") or models.get("executor")


# ---- rows to tasks ------------------------------------------------------------------------------


def _pick(
    given: str | None,
    defaults: Sequence[str],
    columns: list[str],
    flag: str,
    where: str,
    required: bool,
) -> str | None:
    """The field for `flag`: the one named (which must exist), else the first default there."""
    have = ", ".join(map(repr, columns)) or "none"
    if given is not None:
        if given not in columns:
            raise DataError(f"{where}: no field {given!r} (for {flag}); its fields are: {have}")
        return given
    found = next((c for c in defaults if c in columns), None)
    if found is None and required:
        looked = f" (looked for {', '.join(defaults)})" if defaults else ""
        raise DataError(
            f"{where}: which field is the {flag.strip('-')}{looked}? name it "
            f"with {flag}; its fields are: {have}"
        )
    return found


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _value(row: Mapping[str, Any], field: str, i: int, where: str) -> Any:
    value = row.get(field)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise DataError(f"{where}: row {i} has no value for field {field!r}")
    return value


def tasks_from_rows(
    name: str, rows: Sequence[Mapping[str, Any]], columns: list[str], fm: FieldMap, where: str
) -> tuple[list[EvalTask], dict[str, str]]:
    """The tasks of `rows` under `fm`, and the fields it resolved to (for the identity)."""
    scorer = fm.scorer_name
    code = scorer == "code-tests"
    if not code and (fm.test or fm.entry_point):
        raise DataError(
            f"{where}: --test-field and --entry-point-field are for --scorer code-tests"
        )
    in_f = _pick(fm.input, INPUT_NAMES, columns, "--input", where, True) or ""
    target_f = _pick(
        fm.target,
        SOLUTION_NAMES if code else TARGET_NAMES,
        columns,
        "--target",
        where,
        required=scorer in SCORERS and not code,
    )
    test_f = _pick(fm.test, TEST_NAMES, columns, "--test-field", where, True) if code else None
    ep_f = (
        _pick(fm.entry_point, ("entry_point",), columns, "--entry-point-field", where, False)
        if code
        else None
    )
    id_f = _pick(fm.id, (), columns, "--id", where, False)
    tasks: list[EvalTask] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        task_id = (
            checked_id(_text(_value(row, id_f, i, where)), where, f"row {i}") if id_f else str(i)
        )
        if task_id in seen:
            raise DataError(f"{where}: rows {seen[task_id]} and {i} have the same id {task_id!r}")
        seen[task_id] = i
        prompt = _text(_value(row, in_f, i, where))
        target = _value(row, target_f, i, where) if target_f and not code else None
        meta: dict[str, Any] = {}
        gold = "" if target is None else _text(target)
        if isinstance(target, list):
            meta["targets"] = [_text(t) for t in target]
            gold = " | ".join(meta["targets"])
        if scorer == "numeric" and (isinstance(target, list) or normalize_number(gold) is None):
            raise DataError(
                f"{where}: row {i}: target {gold!r} is not a number, which the "
                "numeric scorer needs (--scorer exact or judge compare text)"
            )
        if code:
            meta, gold = _code_meta(row, prompt, test_f or "", ep_f, target_f, i, where)
        note = PROMPT_NOTES.get(scorer, "").format(entry_point=gold)
        tasks.append(EvalTask(task_id, name, f"{prompt}\n\n{note}" if note else prompt, gold, meta))
    resolved = {"input": in_f, "target": target_f, "id": id_f, "test": test_f, "entry_point": ep_f}
    return tasks, {k: v for k, v in resolved.items() if v}


def _code_meta(
    row: Mapping[str, Any],
    prompt: str,
    test_f: str,
    ep_f: str | None,
    target_f: str | None,
    i: int,
    where: str,
) -> tuple[dict[str, Any], str]:
    """What the code-tests scorer reads: the tests as a `check(candidate)`, the entry point
    (its field; else the function the tests assert on, or for tests of `candidate` the last one
    the input defines), the input when it is a stub to complete, and the reference solution
    when there is one."""
    raw = _value(row, test_f, i, where)
    test = as_check(raw)
    ep = _text(_value(row, ep_f, i, where)) if ep_f else None
    if ep is None:  # HumanEval's tests call `candidate`: the function is the stub's
        defined = re.findall(r"^def\s+([A-Za-z_]\w*)\s*\(", prompt, re.M)
        called = entry_point_of(test)
        ep = defined[-1] if defined and called in (None, "candidate") else called
    if ep is None or ep == "candidate":
        raise DataError(
            f"{where}: row {i}: which function do the tests call? name its field "
            "with --entry-point-field"
        )
    stub = prompt if re.search(rf"^def\s+{re.escape(ep)}\s*\(", prompt, re.M) else ""
    meta = {"prompt": stub, "test": test, "entry_point": ep}
    if target_f and row.get(target_f):
        meta["solution"] = _text(row[target_f])
    return meta, ep


# ---- files ---------------------------------------------------------------------------------------


def load_file(path: str | Path, fm: FieldMap | None = None) -> CustomBenchmark:
    """A benchmark of a JSONL/CSV/JSON file or a `datasets` directory, read through `fm`."""
    fm = fm or FieldMap()
    p = Path(path).expanduser()
    scorer = fm.scorer_name
    if scorer not in SCORERS:
        raise DataError(f"unknown scorer {scorer!r}; choose one of {', '.join(SCORERS)}")
    got = load_rows(p)
    name = safe_name(p.name.removesuffix(suffix_of(p)) if p.is_file() else p.name)
    tasks, resolved = tasks_from_rows(name, got.rows, got.fields, fm, str(p))
    domain = fm.domain or DEFAULT_DOMAIN[scorer]
    root = p.resolve()
    identity = {
        "kind": got.kind,
        "path": str(root),
        "fields": resolved,
        "scorer": scorer,
        "domain": domain,
    }
    source = DataSource(name, root, "custom", {p.name: root})
    return CustomBenchmark(name, domain, tasks, SCORERS[scorer], source, identity)
