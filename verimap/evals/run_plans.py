"""The plans of eval runs, each labelled with how it ended: what the training exports read.

A run directory (`verimap eval --out DIR`) keeps each task's record, with every plan it ran,
and its trace. A plan is labelled `verified` when its run ended verified, `failed` when a
replan replaced it or the run failed with a node failing verification, and None otherwise (a
plan the coordinator ran again unchanged, `plan_kept`, since the executor and not the plan
failed; a run cut off by a budget). A plan that the one-node fallback or a rule made (the
small-model policy's whole task as one node) is no plan a model wrote, and is flagged. A record
without its trace falls back to the record alone: every plan before the last failed, and the
last one failed when the run did. Traces are read only inside their run directory.

`preferences` pairs verified plans with failed ones for DPO; `mined_demos` keeps verified,
right plans as demonstrations for the staged planner.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from verimap.base import events as ev
from verimap.base.errors import VerimapError
from verimap.base.plan import Plan
from verimap.evals.data import DataError
from verimap.evals.run_dir import read_config
from verimap.evals.runner import CONFIG, RESULTS
from verimap.evals.tasksets import BENCHMARKS, get_benchmark
from verimap.methods.presets import METHODS
from verimap.observe.trace_files import read_results, trace_path
from verimap.planning.fallback import whole_task_plan

Label = Literal["verified", "failed"] | None


class ExportError(VerimapError, ValueError):
    """A path given is not an eval run directory, or cannot be read as one; or nothing in the
    runs given can be exported."""


@dataclass
class ReadSummary:
    """What reading the runs left out: records skipped, `notes` on what was missing, and
    `warnings` on what was refused (a trace outside its run directory), always shown."""

    skipped_records: int = 0
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class LabelledPlan:
    """One plan of a record: its place in `record["plans"]`, as recorded, how it ended, and
    whether the fallback or a rule made it (from the trace)."""

    number: int
    raw: dict[str, Any]
    label: Label
    by_rule: bool


@dataclass
class TaskPlans:
    """A record of a run of an LLM-planner method, with its task's text and its plans."""

    run_dir: Path
    config: dict[str, Any]
    record: dict[str, Any]
    task: str
    write_vfs: bool
    plans: list[LabelledPlan]

    @property
    def benchmark(self) -> str:
        return str(self.config["benchmark"])

    @property
    def domain(self) -> str:
        return BENCHMARKS[self.benchmark].domain

    def verified_right(self, plan: LabelledPlan) -> bool:
        """`plan` verified and the run's answer was right."""
        return plan.label == "verified" and bool(self.record.get("correct"))

    def where(self, plan: LabelledPlan) -> str:
        return f"{self.run_dir}:{self.record['key']}:plan{plan.number}"


def load_run_dir(
    path: str | os.PathLike[str], problems: list[str] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's config and its finished records (the first of a key), read without changing
    anything. A line of results.jsonl that is no record is left out, and noted in `problems`
    (`file:line: reason`) when given; a config.json that cannot be read is an error."""
    p = Path(path)
    if not p.is_dir():
        raise ExportError(f"{p} is not a directory, so not an eval run directory")
    if not (p / RESULTS).is_file() or not (p / CONFIG).is_file():
        raise ExportError(
            f"{p} is not an eval run directory: it needs {RESULTS} and {CONFIG} "
            "(as `verimap eval --out DIR` writes them)"
        )
    config, why = read_config(p / CONFIG)
    if config is None:
        raise ExportError(f"{p}: cannot read the run: {why}")
    if not all(isinstance(config.get(k), str) for k in ("benchmark", "method")):
        raise ExportError(f"{p / CONFIG} names no benchmark and method; not an eval run config")
    got = read_results(p / RESULTS)
    if problems is not None:
        problems += [str(q) for q in got.problems]
    first: dict[str, dict[str, Any]] = {}
    for rec in got.records:
        first.setdefault(rec["key"], rec)
    return config, list(first.values())


def trace_labels(events: Sequence[ev.AnyEvent]) -> tuple[list[Label], list[bool]]:
    """Per plan run (in `plan` event order): whether it verified or failed, and whether the
    one-node fallback or a rule made it."""
    labels: list[Label] = []
    by_rule: list[bool] = []
    node_failed: list[bool] = []
    pending = False
    for e in events:
        if isinstance(e, ev.PlanFallback | ev.PlanRule):
            pending = True
        elif isinstance(e, ev.Plan):
            labels.append(None)
            by_rule.append(pending)
            node_failed.append(False)
            pending = False
        elif not labels:
            continue
        elif isinstance(e, ev.NodeFinish) and e.status == "failed":
            node_failed[-1] = True
        elif isinstance(e, ev.Replan):
            labels[-1] = "failed"
        elif isinstance(e, ev.Finish):
            if e.status == "success":
                labels[-1] = "verified"
            elif e.status == "failed" and node_failed[-1]:
                labels[-1] = "failed"
    return labels, by_rule


def record_labels(record: dict[str, Any]) -> list[Label]:
    """Labels from the record alone, for a record whose trace is gone."""
    n = len(record.get("plans") or [])
    if not n:
        return []
    last: Label = (
        "verified"
        if record.get("verified")
        else ("failed" if record.get("status") == "failed" else None)
    )
    earlier: list[Label] = ["failed"] * (n - 1)
    return [*earlier, last]


def one_node_plan(plan: Plan, task: str, domain: str, *, with_vfs: bool) -> bool:
    """`plan` is the whole task as one node, as the fallback and the one-node rule make it: no
    model wrote it (what a record without its trace still shows)."""
    made = whole_task_plan(task, domain, with_vfs=with_vfs)
    return plan.model_dump(mode="json") == made.model_dump(mode="json")


class _TraceOutside(Exception):
    """A record names a trace outside its run directory."""


def _trace_of(run_dir: Path, record: dict[str, Any]) -> Path | None:
    """The record's trace, confined to `run_dir` as the viewer confines it (None: the record
    names none). A directory shared by someone else must not pull a file from outside it
    (another run's trace, or any file of the user's) into the exported data."""
    rel = record.get("trace")
    if rel is None or rel == "":
        return None
    path = trace_path(run_dir, rel)
    if path is None:
        raise _TraceOutside(rel)
    return path


def _labels_for(
    run_dir: Path, record: dict[str, Any], notes: list[str]
) -> tuple[list[Label], list[bool], str | None]:
    """Labels, made-by-rule flags and the task text (from the trace's `run_start`, when there)."""
    n = len(record.get("plans") or [])
    path = _trace_of(run_dir, record)
    if path is not None and path.is_file():
        try:
            events = ev.read_trace(path)
        except (OSError, ValidationError, ValueError) as e:
            notes.append(f"{path}: unreadable trace ({e}); labelled from the record")
        else:
            labels, by_rule = trace_labels(events)
            task = next((e.task for e in events if isinstance(e, ev.RunStart)), None)
            if len(labels) == n:
                return labels, by_rule, task
            notes.append(
                f"{path}: {len(labels)} plan event(s) for {n} recorded plan(s); labelled from "
                "the record"
            )
            return record_labels(record), [False] * n, task
    else:
        notes.append(f"{run_dir}: no trace for {record.get('key')}; labelled from the record")
    return record_labels(record), [False] * n, None


def _task_texts(config: dict[str, Any]) -> dict[str, str]:
    data_dir = (config.get("data") or {}).get("dir")
    source = config.get("benchmark_source") or {}
    again = {"split": source["split"]} if "split" in source else {}  # MBPP's
    return {t.id: t.prompt for t in get_benchmark(config["benchmark"], data_dir, **again).tasks()}


def load_runs(
    run_dirs: Iterable[str | os.PathLike[str]], summary: ReadSummary
) -> list[tuple[Path, dict[str, Any], list[dict[str, Any]]]]:
    """Every run directory's config and records, all read before any work (`load_run_dir`);
    lines that are no record are `summary` warnings."""
    skipped: list[str] = []
    loaded = [(Path(d), *load_run_dir(d, skipped)) for d in run_dirs]
    summary.warnings += [f"skipped: {line}" for line in skipped]
    return loaded


def task_plans(
    loaded: Iterable[tuple[Path, dict[str, Any], list[dict[str, Any]]]], summary: ReadSummary
) -> Iterator[TaskPlans]:
    """Each record of a run whose method plans with a model, with its task's text (from the
    trace, else the benchmark's data) and its labelled plans. A run of another method, a record
    whose trace lies outside its run directory, and one whose task text cannot be found are
    skipped, and said so in `summary`."""
    for run_dir, config, records in loaded:
        benchmark, method = config["benchmark"], config["method"]
        m = METHODS.get(method)
        if benchmark not in BENCHMARKS or m is None or m.planner != "llm":
            summary.skipped_records += len(records)
            summary.notes.append(
                f"{run_dir}: method {method!r} on {benchmark!r} has no LLM planner; skipped"
            )
            continue
        verify = (config.get("run_config") or {}).get("verify") or {}
        write_vfs = verify.get("verification", m.verification) == "full"
        texts: dict[str, str] | None = None
        for rec in records:
            try:
                labels, by_rule, task = _labels_for(run_dir, rec, summary.notes)
            except _TraceOutside as e:
                summary.skipped_records += 1
                summary.warnings.append(
                    f"{run_dir}: {rec.get('key')!r} names its trace {e.args[0]!r}, outside the "
                    "run directory; the record is skipped and the file not read"
                )
                continue
            if task is None:
                if texts is None:
                    try:
                        texts = _task_texts(config)
                    except DataError as e:
                        texts = {}
                        summary.notes.append(f"{run_dir}: task texts unavailable ({e})")
                task = texts.get(rec["task_id"])
            if task is None:
                summary.skipped_records += 1
                summary.notes.append(f"{run_dir}: no task text for {rec['key']}; skipped")
                continue
            plans = [
                LabelledPlan(i, raw, label, rule)
                for i, (raw, label, rule) in enumerate(
                    zip(rec.get("plans") or [], labels, by_rule, strict=True)
                )
            ]
            yield TaskPlans(run_dir, config, rec, task, write_vfs, plans)


__all__ = [
    "ExportError",
    "LabelledPlan",
    "ReadSummary",
    "TaskPlans",
    "load_run_dir",
    "load_runs",
    "one_node_plan",
    "record_labels",
    "task_plans",
    "trace_labels",
]
