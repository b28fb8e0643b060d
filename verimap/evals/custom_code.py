"""A benchmark written in Python: `file.py@function`, where the function returns a
`Benchmark`-like object, a `TaskSet`, or a pair `(tasks, scorer)`.

Loading one runs the file, so this module is reached only from the command line (`-b`): a
config file may not name code to run, as with `--models-factory`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from verimap.base.protocols import Sandbox
from verimap.evals.custom import CustomBenchmark, FieldMap, TaskSet, safe_name, tasks_from_rows
from verimap.evals.custom_scoring import DEFAULT_DOMAIN, DOMAINS, SCORERS, user_scorer
from verimap.evals.data import DataError, DataSource
from verimap.evals.scoring import Score
from verimap.evals.tasksets import Benchmark, EvalTask
from verimap.tools.registry import ToolRegistry

_PYTHON_SPEC = re.compile(r"^(?P<file>.+\.py)@(?P<fn>[A-Za-z_]\w*)$")


def is_python_spec(spec: str) -> bool:
    return _PYTHON_SPEC.match(spec) is not None


def load_python(spec: str) -> Benchmark:
    """`file.py@function`: import the file (from its path, under a private module name) and
    call the function; what it returns becomes the benchmark."""
    m = _PYTHON_SPEC.match(spec)
    if m is None:
        raise DataError(f"{spec!r}: give FILE.py@FUNCTION")
    path, fn = Path(m["file"]).expanduser(), m["fn"]
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    module = _import(path)
    factory = getattr(module, fn, None)
    if not callable(factory):
        mine = [
            n
            for n, v in vars(module).items()
            if inspect.isfunction(v) and not n.startswith("_") and v.__module__ == module.__name__
        ]
        raise DataError(
            f"{path} defines no function {fn!r}; its functions: {', '.join(mine) or 'none'}"
        )
    try:
        made = factory()
    except Exception as e:
        raise DataError(f"{spec}: the function raised {_where(e, path)}") from None
    root = path.resolve()
    identity = {"kind": "python", "path": str(root), "function": fn}
    return from_python(made, fn, DataSource(fn, root, "custom", {path.name: root}), identity)


def _where(e: BaseException, path: Path) -> str:
    """The exception, with the line of the user's file it came from."""
    mine = path.resolve()
    lines = [f for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).resolve() == mine]
    at = f" at {path}:{lines[-1].lineno}" if lines else ""
    return f"{type(e).__name__}: {e}{at}"


def _import(path: Path) -> Any:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    name = f"verimap_benchmark_{safe_name(path.stem).replace('.', '_')}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise DataError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look a module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(name, None)
        raise DataError(f"{path}: importing it raised {_where(e, path)}") from None
    try:  # a cluster's workers cannot import the file: ship its code by value
        import cloudpickle

        cloudpickle.register_pickle_by_value(module)
    except (ImportError, ValueError):
        pass
    return module


def from_python(made: Any, fn: str, source: DataSource, identity: dict[str, Any]) -> Benchmark:
    """A benchmark of what a `file.py@function` returned (see `TaskSet`)."""
    if isinstance(made, tuple) and len(made) == 2:
        made = TaskSet(tasks=made[0], scorer=made[1])
    if isinstance(made, TaskSet):
        return _task_set(made, fn, source, identity)
    if all(callable(getattr(made, a, None)) for a in ("tasks", "tools", "score")):
        return _Given(made, source, identity)
    raise DataError(
        f"{identity['path']}@{fn} returned a {type(made).__name__}; return a "
        "Benchmark (name, domain, tasks(), tools(sandbox), score(task, answer, "
        "sandbox)), a TaskSet, or a pair (tasks, scorer)"
    )


def _task_set(ts: TaskSet, fn: str, source: DataSource, identity: dict[str, Any]) -> Benchmark:
    name = safe_name(ts.name or fn)
    where = f"{identity['path']}@{fn}"
    if isinstance(ts.scorer, str):
        if ts.scorer not in SCORERS:
            raise DataError(
                f"{where}: unknown scorer {ts.scorer!r}; choose one of "
                f"{', '.join(SCORERS)} or give a function"
            )
        scorer, label = SCORERS[ts.scorer], ts.scorer
    elif callable(ts.scorer):
        scorer, label = user_scorer(ts.scorer), "function"
    else:
        raise DataError(
            f"{where}: the scorer is a {type(ts.scorer).__name__}; give a name or a function"
        )
    items = list(ts.tasks)
    if not items:
        raise DataError(f"{where}: the benchmark is empty (no tasks)")
    if all(isinstance(t, Mapping) for t in items):
        rows = [dict(t) for t in items if isinstance(t, Mapping)]
        columns = list(dict.fromkeys(k for r in rows for k in r))
        fm = FieldMap(scorer=label, id="id" if "id" in columns else None)
        tasks, _ = tasks_from_rows(name, rows, columns, fm, where)
    elif all(isinstance(t, EvalTask) for t in items):
        tasks = [replace(t, benchmark=name) for t in items if isinstance(t, EvalTask)]
        if len({t.id for t in tasks}) != len(tasks):
            raise DataError(f"{where}: two tasks have the same id")
    else:
        raise DataError(
            f"{where}: give the tasks as EvalTasks or as dicts, not {type(items[0]).__name__}"
        )
    if label == "code-tests" and any("test" not in t.meta for t in tasks):
        raise DataError(f"{where}: code-tests needs each task's meta 'test' and 'entry_point'")
    domain = ts.domain or DEFAULT_DOMAIN.get(label, "qa")
    source.benchmark = name
    return CustomBenchmark(name, domain, tasks, scorer, source, {**identity, "scorer": label})


class _Given(Benchmark):
    """A benchmark object written by the user (duck-typed: it need not subclass `Benchmark`,
    whose constructor resolves the built-in data), with what verimap needs around it."""

    def __init__(self, inner: Any, source: DataSource, identity: dict[str, Any]):
        self.inner = inner
        self.name = safe_name(str(getattr(inner, "name", "") or identity["function"]))
        self.domain = str(getattr(inner, "domain", "qa"))
        if self.domain not in DOMAINS:
            raise DataError(
                f"{self.name}: unknown domain {self.domain!r}; choose one of {', '.join(DOMAINS)}"
            )
        given = getattr(inner, "source", None)
        self.source = given if isinstance(given, DataSource) else source
        self._identity = identity

    def tasks(self) -> list[EvalTask]:
        tasks = list(self.inner.tasks())
        if not tasks:
            raise DataError(f"{self._identity['path']}: the benchmark is empty (no tasks)")
        return tasks

    def tools(self, sandbox: Sandbox) -> ToolRegistry:
        tools: ToolRegistry = self.inner.tools(sandbox)
        return tools

    async def score(self, task: EvalTask, answer: Any, sandbox: Sandbox) -> Score:
        out = self.inner.score(task, answer, sandbox)
        score: Score = await out if inspect.isawaitable(out) else out
        return score

    def prepare(self) -> None:
        if callable(prepare := getattr(self.inner, "prepare", None)):
            prepare()

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def use_models(self, models: Mapping[str, Any]) -> None:
        if callable(use := getattr(self.inner, "use_models", None)):
            use(models)
