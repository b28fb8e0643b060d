"""Demonstrations for the staged planner, mined from eval runs (`verimap export demos`).

DSPy's BootstrapFewShot keeps the traces that led a program to right answers as its few-shot
examples. Here a plan that led a run to a right, verified answer becomes a demonstration
(`verimap.planning.demos.Demo`) that the staged planner can show for tasks near it
(`planning.demos_file`).

A record gives a demonstration when its run ended verified with the right answer, and the
plan that verified (labelled as `run_plans` labels plans) was written by the model: not the
one-node fallback or rule plan, and one the staged form can say (`staged_schema.replies_of`:
catalog checks and criteria, no Python VFs). Its `index` is the number the task's id ends in
(`tasksets.task_index`), its `kind` the question type where the benchmark has one, its `task`
the problem without the instructions every task of the benchmark shares
(`Benchmark.problem`), as the shipped demonstrations are written. One demonstration is kept
per task: the plan with the fewest nodes, the first seen (in the order the run directories
and their records are given) on a tie. A pool counts one benchmark's tasks, so its runs must
all be of one benchmark of the domain asked for.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verimap.base.out_files import marked, write_file
from verimap.base.plan import PlanError
from verimap.base.redaction import redact, secret_values
from verimap.evals.run_plans import (
    ExportError,
    ReadSummary,
    TaskPlans,
    load_runs,
    one_node_plan,
    task_plans,
)
from verimap.evals.tasksets import BENCHMARKS, task_index
from verimap.planning.demos import DOMAINS, Demo, DemoPool
from verimap.planning.plan import parse_plan
from verimap.planning.staged_schema import replies_of

# The pool description of every file written here starts with this: a later export may
# replace such a file.
DEMOS_MARK = "Mined by `verimap export demos`"
DEMOS_FILE = marked("demonstrations file", DEMOS_MARK)

NOT_VERIFIED = "did not end verified"
WRONG = "verified a wrong answer"
NO_VFS = "ran plans without VFs"
RULE = "ran a fallback or rule plan, not the model's"
INVALID = "recorded an invalid plan"
NOT_STAGED = "ran a plan the staged form cannot say"
NO_INDEX = "has a task id without an index"


@dataclass
class DemoSummary(ReadSummary):
    runs: int = 0
    records: int = 0
    demos: int = 0
    duplicates: int = 0
    # Why a record gave no demonstration, by reason.
    reasons: Counter[str] = field(default_factory=Counter)

    def why(self) -> str:
        parts = [f"{n} {why}" for why, n in self.reasons.most_common()]
        if self.skipped_records:
            parts.append(
                f"{self.skipped_records} skipped (no LLM planner, no task text, or a trace "
                "outside the run directory)"
            )
        return "; ".join(parts) or "no records"

    def line(self) -> str:
        s = (
            f"{self.runs} run(s), {self.records} record(s) seen, {self.demos} demonstration(s) "
            f"written"
        )
        if self.duplicates:
            s += f", {self.duplicates} more plan(s) for the same tasks left out"
        return s + f"; without one: {self.why()}"


def _demo_of(tp: TaskPlans, summary: DemoSummary) -> Demo | str:
    """The record's demonstration, or why it gives none."""
    rec = tp.record
    index = task_index(str(rec["task_id"]))
    if index is None:
        return NO_INDEX
    verified = next((lp for lp in tp.plans if lp.label == "verified"), None)
    if verified is None:
        return NOT_VERIFIED
    if not tp.verified_right(verified):
        return WRONG
    if not tp.write_vfs:
        return NO_VFS
    try:
        plan = parse_plan(verified.raw)
    except PlanError as e:
        summary.notes.append(f"{tp.where(verified)}: invalid ({e})")
        return INVALID
    if verified.by_rule or one_node_plan(plan, tp.task, tp.domain, with_vfs=True):
        return RULE
    try:
        steps, nodes = replies_of(plan, tp.domain)
    except (ValueError, PlanError) as e:
        summary.notes.append(f"{tp.where(verified)}: not in the staged form ({e})")
        return NOT_STAGED
    kind = (rec.get("meta") or {}).get("question_type")
    return Demo(
        index=index,
        kind=kind if isinstance(kind, str) else "",
        task=BENCHMARKS[tp.benchmark].problem(tp.task),
        steps=steps,
        nodes=nodes,
    )


def _benchmark_of(loaded: list[tuple[Path, dict[str, Any], list[Any]]], domain: str) -> str:
    """The one benchmark the runs are of, of `domain`; `ExportError` otherwise."""
    for run_dir, config, _ in loaded:
        cls = BENCHMARKS.get(config["benchmark"])
        if cls is None:
            raise ExportError(
                f"{run_dir}: benchmark {config['benchmark']!r} is no built-in one; "
                f"demonstrations are mined from runs of {', '.join(BENCHMARKS)}"
            )
        if cls.domain != domain:
            raise ExportError(
                f"{run_dir} is a run of {cls.name}, a {cls.domain} benchmark, not {domain}"
            )
    names = sorted({config["benchmark"] for _, config, _ in loaded})
    if len(names) > 1:
        raise ExportError(
            f"the runs are of {' and '.join(names)}: a pool's indices count one benchmark's "
            "tasks; export each benchmark's runs on their own"
        )
    return names[0]


def _split_of(config: dict[str, Any]) -> str | None:
    """The split a run's benchmark was opened with (MBPP's), as config.json records it."""
    source = config.get("benchmark_source")
    split = source.get("split") if isinstance(source, dict) else None
    return split if isinstance(split, str) else None


def mine_demos(
    run_dirs: Iterable[str | os.PathLike[str]], domain: str
) -> tuple[DemoPool, DemoSummary]:
    """The pool of demonstrations the runs in `run_dirs` give (module docstring), by index.
    `ExportError` when a path is no run directory, a run is not of one benchmark of `domain`,
    or no record gives a demonstration (saying why none did)."""
    if domain not in DOMAINS:
        raise ExportError(f"unknown domain {domain!r}; the domains are: {', '.join(DOMAINS)}")
    summary = DemoSummary()
    loaded = load_runs(run_dirs, summary)
    if not loaded:
        raise ExportError("no run directory given")
    benchmark = _benchmark_of(loaded, domain)
    summary.runs = len(loaded)
    summary.records = sum(len(records) for _, _, records in loaded)
    kept: dict[int, Demo] = {}
    for tp in task_plans(loaded, summary):
        got = _demo_of(tp, summary)
        if isinstance(got, str):
            summary.reasons[got] += 1
            continue
        old = kept.get(got.index)
        if old is not None:
            summary.duplicates += 1
            if len(got.steps) >= len(old.steps):
                continue
        kept[got.index] = got
    if not kept:
        raise ExportError(
            f"no plan qualifies as a demonstration: {summary.runs} run(s) and "
            f"{summary.records} record(s) seen; {summary.why()}"
        )
    splits = {split for _, c, _ in loaded if (split := _split_of(c))}
    source = f" ({', '.join(sorted(splits))})" if splits else ""
    pool = DemoPool(
        domain=domain,
        pool=(
            f"{DEMOS_MARK} from runs of {benchmark}{source}: plans the model wrote that verified "
            f"with the right answer. Each index is the number its task id ends in, "
            f"and evaluations of {benchmark} that show this pool leave them out."
        ),
        benchmark=benchmark,
        demos=[kept[i] for i in sorted(kept)],
    )
    summary.demos = len(pool.demos)
    return pool, summary


def write_demos(pool: DemoPool, out: str | os.PathLike[str], *, named: bool = True) -> None:
    """Written whole, then moved into place; an existing file only if this export wrote it or
    the user `named` the path (`verimap.base.out_files`). Secrets are masked
    (`redaction.redact`): the file is shown to models and shared."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = redact(pool.model_dump(mode="json"), secret_values())
    write_file(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n", DEMOS_FILE, named=named)


__all__ = ["DEMOS_FILE", "DemoSummary", "mine_demos", "write_demos"]
