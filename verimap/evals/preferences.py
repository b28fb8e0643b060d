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

Which plans verified and which failed is read as `run_plans` labels them: a plan that verified
with a wrong answer counts as neither (its VFs were too weak to be an example). Pairs are made
only within one task and one prompt (so never across methods that prompt differently, such as
map and verimap), across every run and run directory given. One-node fallback and rule plans
are not the model's writing and are left out unless asked for, and a plan that verified
anywhere is never a rejected one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from verimap.base.messages import AssistantMessage, to_openai
from verimap.base.out_files import jsonl_of, write_file
from verimap.base.plan import PlanError
from verimap.base.protocols import Model, Sandbox
from verimap.base.redaction import redact, secret_values
from verimap.evals.run_plans import (
    ExportError,
    ReadSummary,
    load_run_dir,
    load_runs,
    one_node_plan,
    record_labels,
    task_plans,
    trace_labels,
)
from verimap.evals.tasksets import BENCHMARKS
from verimap.evals.tools import math_tools, programming_tools, qa_tools
from verimap.planning.plan import parse_plan
from verimap.planning.planner import LLMPlanner, PlannerOptions
from verimap.tools.registry import ToolRegistry


@dataclass
class ExportSummary(ReadSummary):
    tasks: int = 0
    pairs: int = 0
    without_pair: int = 0

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
    for tp in task_plans(load_runs(run_dirs, summary), summary):
        rec, task = tp.record, tp.task
        planner = planners.get(tp.benchmark, tp.write_vfs)
        tasks.add((tp.benchmark, rec["task_id"]))
        prompt = to_openai(planner.plan_messages(task))
        key = (tp.benchmark, rec["task_id"], json.dumps(prompt, sort_keys=True))
        group = groups.setdefault(key, _Group(tp.benchmark, rec["task_id"], prompt))
        for lp in tp.plans:
            if lp.label is None:
                continue
            try:
                plan = parse_plan(lp.raw)
            except PlanError as e:
                summary.notes.append(f"{tp.run_dir}: {rec['key']} plan {lp.number}: invalid ({e})")
                continue
            rule = lp.by_rule or one_node_plan(plan, task, tp.domain, with_vfs=tp.write_vfs)
            if rule and not include_fallbacks:
                continue
            text = planner._as_written(plan)
            if tp.verified_right(lp):
                group.chosen.setdefault(text, tp.where(lp))
            elif lp.label == "failed":
                group.rejected.setdefault(text, tp.where(lp))
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
