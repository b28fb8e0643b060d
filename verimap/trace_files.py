"""Trace files read leniently: event dicts from JSONL, strings clipped, paths confined.

Both the viewer and the eval exports read traces that may be torn (a killed run), old,
or hold plans that never validated, so nothing here validates events. It sits below
`view` and `evals`, which both need it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DEFAULT_MAX_CHARS = 10_000


def clip_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a note saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [{len(text) - limit:,} more characters not shown]"


def clip_deep(obj: Any, limit: int) -> Any:
    """A copy of a JSON value whose strings (keys too) are clipped, so no field can blow up
    the page however much a model wrote into it."""
    if isinstance(obj, str):
        return clip_text(obj, limit)
    if isinstance(obj, dict):
        return {clip_text(str(k), limit): clip_deep(v, limit) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clip_deep(v, limit) for v in obj]
    return obj


def read_events(
    path: str | os.PathLike[str], *, clip: int | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Events of a JSONL trace as dicts, and a note per line that could not be read.

    With `clip`, strings are clipped as `clip_deep` does, but only in lines longer than `clip`:
    no string in a shorter line can be longer, and walking every event is most of a big
    report's load time."""
    events: list[dict[str, Any]] = []
    problems: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"line {n} is not JSON ({exc.msg}); skipped")
                continue
            if not isinstance(e, dict) or not isinstance(e.get("type"), str):
                problems.append(f"line {n} is not an event; skipped")
                continue
            events.append(clip_deep(e, clip) if clip is not None and len(line) > clip else e)
    return events, problems


def trace_path(root: Path, rel: Any) -> Path | None:
    """The trace a results record names, only when it lies inside the run directory: a
    results file must not make the viewer read (and publish) files from elsewhere."""
    if not isinstance(rel, str) or not rel:
        return None
    base = root.resolve()
    p = (base / rel).resolve()
    return p if p.is_relative_to(base) else None
