"""The planner on what the local model really wrote: rejected replies stored from runs
(benchmarks/data/rejected_plans.jsonl, replayed by benchmarks/plan_replay.py). A change to the
plan fixes or checks must not turn an accepted reply back into a rejected one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("plan_replay", REPO / "benchmarks" / "plan_replay.py")
assert spec is not None and spec.loader is not None
replay = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = replay
spec.loader.exec_module(replay)

# Measured when the corpus was stored (2026-11-26, runs r27-r39): 38 of 44 math and 13 of 20
# code replies.
ACCEPTED_AT_LEAST = {"math": 38, "programming": 13}


async def test_stored_rejected_replies_are_accepted_at_least_as_often_as_when_measured():
    items = replay.distinct(replay.load(replay.CORPUS))
    accepted = {d: 0 for d in ACCEPTED_AT_LEAST}
    for it in items:
        accepted[it["domain"]] += not await replay.replay(it)
    assert accepted == {d: max(n, ACCEPTED_AT_LEAST[d]) for d, n in accepted.items()}
    assert len(items) == 64  # every reply in the corpus is distinct


async def test_a_reply_still_rejected_names_its_problems():
    items = replay.load(replay.CORPUS)
    problems = [p for it in items for p in await replay.replay(it)]
    assert problems and all(isinstance(p, str) and p for p in problems)
