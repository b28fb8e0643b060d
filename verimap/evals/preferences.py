"""Preference pairs for the planner, mined from eval runs.

A plan that verified and gave the right answer, beside a plan for the same task that failed,
is the signal DPO needs to teach a planner the plans that verify. Each pair is one JSON line in
TRL's conversational preference form:

    {"prompt": [system, user], "chosen": [assistant], "rejected": [assistant]}

`prompt` is the planner's first-plan request for the task, rebuilt with the planner's own
`LLMPlanner.plan_messages`: the traces record no model messages, only events. A plan made on a
replan was asked for with the replan prompt (which shows the failed plan), but DPO needs one
prompt for both sides, and the point of the training is to write the verifying plan at once.
The free-text reasoning turn of `think_first` is not part of the prompt either: its text is
not recorded. `chosen` and `rejected` are the plans as the planner writes them
(`LLMPlanner._as_written`, what it is shown of its own plans).

Which plans failed comes from the trace: a plan replaced by a replan, or the last plan of a run
that failed with a node failing verification. A plan the coordinator ran again unchanged
(`plan_kept`: the executor, not the plan, failed) or cut off by a budget counts as neither, nor
does a plan that verified with a wrong answer (its VFs were too weak to be an example). A
record without its trace falls back to the record alone: every plan before the last failed,
and the last one failed when the run did. Pairs are made only within one task and one prompt
(so never across methods that prompt differently, such as map and verimap), across every run
and run directory given. One-node fallback plans are not the model's writing and are left out
unless asked for, and a plan that verified anywhere is never a rejected one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import ValidationError

from verimap.base import events as ev
from verimap.base.errors import VerimapError
from verimap.base.messages import AssistantMessage, to_openai
from verimap.base.out_files import jsonl_of, write_file
from verimap.base.plan import PlanError
from verimap.base.protocols import Model, Sandbox
from verimap.base.redaction import redact, secret_values
from verimap.evals.data import DataError
from verimap.evals.run_dir import read_config
from verimap.evals.runner import CONFIG, RESULTS
from verimap.evals.tasksets import BENCHMARKS, get_benchmark
from verimap.evals.tools import math_tools, programming_tools, qa_tools
from verimap.methods.presets import METHODS
from verimap.observe.trace_files import read_results, trace_path
from verimap.planning.fallback import fallback_plan
from verimap.planning.plan import parse_plan
from verimap.planning.planner import LLMPlanner, PlannerOptions
from verimap.tools.registry import ToolRegistry

Label = Literal["verified", "failed"] | None


class ExportError(VerimapError, ValueError):
    """A path given is not an eval run directory, or cannot be read as one."""


@dataclass
class ExportSummary:
    tasks: int = 0
    pairs: int = 0
    without_pair: int = 0
    skipped_records: int = 0
    notes: list[str] = field(default_factory=list)
    # What was refused, not merely missing (a trace outside its run directory): always shown.
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        s = (
            f"{self.tasks} task(s) seen, {self.pairs} pair(s) written, "
            f"{self.without_pair} task(s) without a pair"
        )
        if self.skipped_records:
            s += (
                f", {self.skipped_records} record(s) skipped (no LLM planner, unreadable, or a "
                "trace outside the run directory)"
            )
        return s


@dataclass
class _Group:
    benchmark: str
    task_id: str
    prompt: list[dict[str, Any]]  # OpenAI chat format, as DPO trainers read it
    chosen: dict[str, str] = field(default_factory=dict)  # plan text -> where it was first seen
    rejected: dict[str, str] = field(default_factory=dict)


class _NoSandbox(Sandbox):
    """Tools are built only to be described in the prompt; none of them is ever run."""

    kind = "none"

    async def run_vf(self, code, inputs, outputs, *, timeout=10.0):
        raise RuntimeError("preference export runs no code")

    async def run_program(self, code, *, timeout=10.0, files=None, argv=None, stdin=""):
        raise RuntimeError("preference export runs no code")

    async def run_tests(self, candidate_code, test_code, entry_point, *, timeout=10.0):
        raise RuntimeError("preference export runs no code")


def _planner_tools(benchmark: str) -> ToolRegistry:
    """The registry the benchmark hands its planner. The QA search tool is built without the
    corpus index, which it touches only when called, so no index is built for a prompt."""
    sandbox = _NoSandbox()
    if benchmark == "multihoprag":
        return qa_tools(None)
    return {"math": math_tools, "programming": programming_tools}[BENCHMARKS[benchmark].domain](
        sandbox
    )


class _Planners:
    """One prompt-building planner per benchmark and VF setting, as `verimap.wiring.build` makes
    it; the model is never called."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, bool], LLMPlanner] = {}

    def get(self, benchmark: str, write_vfs: bool) -> LLMPlanner:
        key = (benchmark, write_vfs)
        if key not in self._cache:
            self._cache[key] = LLMPlanner(
                cast(Model, None),
                _planner_tools(benchmark),
                PlannerOptions(domain=BENCHMARKS[benchmark].domain, write_vfs=write_vfs),
            )
        return self._cache[key]


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
    """Per plan run (in `plan` event order): whether it verified or failed, and whether it was
    the one-node fallback."""
    labels: list[Label] = []
    fallback: list[bool] = []
    node_failed: list[bool] = []
    pending_fallback = False
    for e in events:
        if isinstance(e, ev.PlanFallback):
            pending_fallback = True
        elif isinstance(e, ev.Plan):
            labels.append(None)
            fallback.append(pending_fallback)
            node_failed.append(False)
            pending_fallback = False
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
    return labels, fallback


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
    """Labels, fallback flags and the task text (from the trace's `run_start`, when there)."""
    n = len(record.get("plans") or [])
    path = _trace_of(run_dir, record)
    if path is not None and path.is_file():
        try:
            events = ev.read_trace(path)
        except (OSError, ValidationError, ValueError) as e:
            notes.append(f"{path}: unreadable trace ({e}); labelled from the record")
        else:
            labels, fallback = trace_labels(events)
            task = next((e.task for e in events if isinstance(e, ev.RunStart)), None)
            if len(labels) == n:
                return labels, fallback, task
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


def _message(text: str) -> list[dict[str, Any]]:
    return to_openai([AssistantMessage(content=text)])


def preference_pairs(
    run_dirs: Iterable[str | os.PathLike[str]],
    *,
    include_fallbacks: bool = False,
    metadata: bool = False,
) -> tuple[list[dict[str, Any]], ExportSummary]:
    """Every (chosen, rejected) pair of plans per task and prompt over `run_dirs`, deduplicated.
    `metadata` adds a `metadata` column (benchmark, task, where each plan came from)."""
    summary = ExportSummary()
    planners = _Planners()
    groups: dict[tuple[str, str, str], _Group] = {}
    tasks: set[tuple[str, str]] = set()
    skipped: list[str] = []
    loaded = [(Path(d), *load_run_dir(d, skipped)) for d in run_dirs]  # checked before work
    summary.warnings += [f"skipped: {line}" for line in skipped]
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
        planner = planners.get(benchmark, write_vfs)
        texts: dict[str, str] | None = None
        for rec in records:
            try:
                labels, fallback, task = _labels_for(run_dir, rec, summary.notes)
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
            tasks.add((benchmark, rec["task_id"]))
            prompt = to_openai(planner.plan_messages(task))
            key = (benchmark, rec["task_id"], json.dumps(prompt, sort_keys=True))
            group = groups.setdefault(key, _Group(benchmark, rec["task_id"], prompt))
            fallback_text = planner._as_written(
                fallback_plan(task, planner.domain_of(task), with_vfs=write_vfs)
            )
            plans = rec.get("plans", [])
            for i, (raw, label, fb) in enumerate(zip(plans, labels, fallback, strict=True)):
                if label is None:
                    continue
                try:
                    text = planner._as_written(parse_plan(raw))
                except PlanError as e:
                    summary.notes.append(f"{run_dir}: {rec['key']} plan {i}: invalid ({e})")
                    continue
                if (fb or text == fallback_text) and not include_fallbacks:
                    continue
                where = f"{run_dir}:{rec['key']}:plan{i}"
                if label == "verified" and rec.get("correct"):
                    group.chosen.setdefault(text, where)
                elif label == "failed":
                    group.rejected.setdefault(text, where)
    pairs: list[dict[str, Any]] = []
    paired: set[tuple[str, str]] = set()
    for g in groups.values():
        for chosen, c_from in g.chosen.items():
            for rejected, r_from in g.rejected.items():
                if rejected in g.chosen:
                    continue
                row: dict[str, Any] = {
                    "prompt": g.prompt,
                    "chosen": _message(chosen),
                    "rejected": _message(rejected),
                }
                if metadata:
                    row["metadata"] = {
                        "benchmark": g.benchmark,
                        "task_id": g.task_id,
                        "chosen_from": c_from,
                        "rejected_from": r_from,
                    }
                pairs.append(row)
                paired.add((g.benchmark, g.task_id))
    summary.tasks = len(tasks)
    summary.pairs = len(pairs)
    summary.without_pair = len(tasks - paired)
    return pairs, summary


# What a pairs file verimap wrote starts with: a later export may replace it.
PAIRS_FILE = jsonl_of("preference pairs file", frozenset({"prompt", "chosen", "rejected"}))


def write_pairs(
    pairs: Iterable[dict[str, Any]], out: str | os.PathLike[str], *, named: bool = True
) -> None:
    """Written whole, then moved into place, so a reader never sees half a file; an existing
    file only if it holds pairs or the user `named` the path (`verimap.base.out_files`). The pairs
    become training data that gets shared, so secrets are masked (`redaction.redact`)."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    secrets = secret_values()
    text = "".join(json.dumps(redact(row, secrets), ensure_ascii=False) + "\n" for row in pairs)
    write_file(path, text, PAIRS_FILE, named=named)


__all__ = [
    "ExportError",
    "ExportSummary",
    "load_run_dir",
    "preference_pairs",
    "record_labels",
    "trace_labels",
    "write_pairs",
]
