"""Replay planner replies that were rejected in real runs through today's planner.

Every `plan_invalid` event in a trace holds the model's reply. Feeding each distinct reply
back through `LLMPlanner` (fixes, validation, quality checks, salvage; no repair round)
shows how many would now run, and which problems are left: the measure for a change to
`plan_fixes.py` or `plan_checks.py`, on what the local model really wrote, with no model.

    python benchmarks/plan_replay.py                      # the stored corpus
    python benchmarks/plan_replay.py runs/                # traces under runs/
    python benchmarks/plan_replay.py runs/ --save benchmarks/data/rejected_plans.jsonl

Replies cut at the length limit are left out: nothing can fix them.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from verimap.base import events as ev
from verimap.base.plan import PlanningError
from verimap.base.run_context import RunContext
from verimap.evals.data import read_jsonl
from verimap.methods.presets import PLAN_ANSWER_TYPES
from verimap.observe.trace_files import read_typed_events
from verimap.planning.planner import LLMPlanner, PlannerOptions
from verimap.testing import ScriptedModel

CORPUS = Path(__file__).with_name("data") / "rejected_plans.jsonl"


def from_traces(root: Path) -> Iterator[dict[str, Any]]:
    """(task, domain, reply) of each rejected reply under `root`, in path order."""
    for path in sorted(root.rglob("*.jsonl")):
        if "verimap" not in str(path):
            continue
        domain = "programming" if "humaneval" in str(path).lower() else "math"
        task = None
        events, _problems = read_typed_events(path)
        for e in events:
            if isinstance(e, ev.RunStart):
                task = e.task
            elif isinstance(e, ev.PlanInvalid) and task and e.reply and not _cut(e):
                yield {"source": str(path), "domain": domain, "task": task, "reply": e.reply}


def _cut(e: ev.PlanInvalid) -> bool:
    return any("cut off at the length limit" in p for p in e.problems)


def load(path: Path) -> list[dict[str, Any]]:
    return [record for _line, record in read_jsonl(path)]


def distinct(items: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for it in items:
        if it["reply"] not in seen:
            seen.add(it["reply"])
            out.append(it)
    return out


async def replay(item: dict[str, Any]) -> list[str]:
    """The problems left in `item`'s reply; [] when the planner now accepts it."""
    planner = LLMPlanner(
        ScriptedModel([item["reply"]]),
        None,
        PlannerOptions(
            domain=item["domain"],
            max_repairs=0,
            fallback=False,
            answer_types=PLAN_ANSWER_TYPES[item["domain"]],
        ),
    )
    try:
        await planner.plan(item["task"], ctx=RunContext())
    except PlanningError as e:
        return [str(p) for p in e.problems]
    return []


def kind(problem: str) -> str:
    """A problem with its names and numbers blanked, so like problems count together."""
    return re.sub(r"\d+", "N", re.sub(r"'[^']*'|\"[^\"]*\"", "'X'", problem))[:100]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", type=Path, help="traces to read (default: the corpus)")
    ap.add_argument("--save", type=Path, help="write the distinct replies found as a corpus")
    args = ap.parse_args()
    items = distinct(from_traces(args.root) if args.root else load(CORPUS))
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        with args.save.open("w", encoding="utf-8") as f:
            for it in items:
                f.write(json.dumps(it, ensure_ascii=False) + "\n")
    accepted: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    left: collections.Counter[str] = collections.Counter()
    for it in items:
        problems = await replay(it)
        total[it["domain"]] += 1
        accepted[it["domain"]] += not problems
        left.update(kind(p) for p in problems)
    for domain in sorted(total):
        print(
            f"{domain:12s} accepted now: {accepted[domain]:3d} of {total[domain]} rejected replies"
        )
    print("problems left (count, kind):")
    for k, n in left.most_common(12):
        print(f"  {n:3d}  {k}")


if __name__ == "__main__":
    asyncio.run(main())
