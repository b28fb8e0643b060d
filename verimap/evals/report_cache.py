"""The call cache's part of an eval report: replies `--cache` answered, and what they saved.

A reply from the cache is no call, and what it saved is no cost: the other tables count what
endpoints were asked and billed, and this one, shown only when the cache answered something,
counts what they were not.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

NOTE = (
    "Replies from the call cache (`--cache`) reached no endpoint: they are not in the calls, "
    "tokens and cost above. Saved: what the recorded replies had cost when they were made."
)


def _sum(rec: dict[str, Any], field: str) -> float:
    return sum(float(u.get(field, 0) or 0) for u in (rec.get("usage") or {}).values())


def cache_section(records: Sequence[dict[str, Any]]) -> list[str]:
    """The section's title, note and table; nothing when no record had a reply from the cache."""
    if not any(_sum(r, "cached_calls") for r in records):
        return []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["method"], r["benchmark"])].append(r)
    lines = [
        "| Method | Benchmark | Tasks | Calls / task | From the cache / task | Tokens saved / task "
        "| $ saved |",
        "|---|---|---|---|---|---|---|",
    ]
    for (method, bench), recs in sorted(groups.items()):
        n = len(recs)
        calls = sum(_sum(r, "calls") for r in recs) / n
        hits = sum(_sum(r, "cached_calls") for r in recs) / n
        saved = sum(
            _sum(r, "saved_prompt_tokens") + _sum(r, "saved_completion_tokens") for r in recs
        )
        cost = sum(_sum(r, "saved_cost") for r in recs)
        lines.append(
            f"| {method} | {bench} | {n} | {calls:.1f} | {hits:.1f} | {saved / n:.0f} | ${cost:.4f} |"
        )
    return ["## Call cache", NOTE, "\n".join(lines)]
