"""Which tasks an eval runs: the first N, a range of them, the ones with given ids, or the
paper's seeded random sample (500 tasks, or half of a smaller set), the same ids on every
machine."""

from __future__ import annotations

import difflib
import hashlib
import itertools
import re
from collections.abc import Sequence
from typing import Any

from verimap.base.errors import VerimapError
from verimap.evals.tasksets import EvalTask

PAPER_SAMPLE = 500
_RANGE = re.compile(r"^\s*(-?\d+)?\s*:\s*(-?\d+)?\s*$")


class SelectionError(VerimapError, ValueError):
    """The tasks asked for cannot be chosen (a bad range, unknown ids, nothing left)."""


def paper_sample_size(n_tasks: int) -> int:
    return PAPER_SAMPLE if n_tasks >= PAPER_SAMPLE else max(1, n_tasks // 2)


def ranked_tasks(tasks: list[EvalTask], seed: int, *, stratum: str | None = None) -> list[EvalTask]:
    """Every task, in the order a seeded sample takes them.

    Tasks are ranked by a hash of seed and task id rather than drawn with `random`, so the
    same seed ranks the same ids on any Python version and whatever order the data file lists
    them in. With `stratum` (a key of the tasks' `meta`), the strata take turns in the order of
    their names, each giving its next-ranked task: any prefix holds equal numbers from each,
    until one runs out."""

    def rank(t: EvalTask) -> bytes:
        return hashlib.sha256(f"{seed}:{t.id}".encode()).digest()

    ranked = sorted(tasks, key=rank)
    if stratum is None:
        return ranked
    groups: dict[str, list[EvalTask]] = {}
    for t in ranked:
        groups.setdefault(str(t.meta.get(stratum, "")), []).append(t)
    turns = itertools.zip_longest(*(groups[k] for k in sorted(groups)))
    return [t for turn in turns for t in turn if t is not None]


def sample_tasks(
    tasks: list[EvalTask], size: int | str, seed: int, *, stratum: str | None = None
) -> list[EvalTask]:
    """`size` tasks (or "paper": `paper_sample_size`), in the benchmark's order: the first
    `size` of `ranked_tasks`, so a smaller sample is part of a larger one with the same seed."""
    n = paper_sample_size(len(tasks)) if size == "paper" else int(size)
    if n < 1:
        raise ValueError(f"a sample needs at least one task, not {size!r}")
    chosen = {t.id for t in ranked_tasks(tasks, seed, stratum=stratum)[:n]}
    return [t for t in tasks if t.id in chosen]


def parse_range(text: str) -> slice:
    """`A:B` as a slice (Python's semantics: 0-based, B exclusive, either end may be left out
    or negative); a `SelectionError` for anything else."""
    m = _RANGE.match(text)
    if m is None:
        raise SelectionError(
            f"--limit {text!r}: give a number of tasks N or a range A:B (0-based, B exclusive)"
        )
    start, stop = (None if g is None else int(g) for g in m.groups())
    return slice(start, stop)


def select_tasks(
    tasks: list[EvalTask],
    *,
    limit: int | str | None = None,
    sample: int | str | None = None,
    seed: int | None = None,
    ids: Sequence[str] | None = None,
    stratum: str | None = None,
) -> list[EvalTask]:
    """The first `limit` tasks (or the range `limit` = "A:B"), a seeded random `sample` (by
    `stratum`, see `sample_tasks`), the tasks with the given `ids`, or all; never two of these."""
    given = [n for n, v in (("--limit", limit), ("--sample", sample), ("--sample-id", ids)) if v]
    if len(given) > 1:
        raise SelectionError(
            f"{' and '.join(given)} exclude each other: --limit takes the first N tasks or a "
            "range, --sample a seeded random sample, --sample-id the tasks with those ids; give "
            "one of them"
        )
    if seed is not None and sample is None:
        raise SelectionError(
            "--seed chooses a --sample; give --sample N (or --sample paper) with it"
        )
    if sample is not None:
        return sample_tasks(tasks, sample, 0 if seed is None else seed, stratum=stratum)
    if ids:
        return _by_id(tasks, ids)
    if isinstance(limit, str):
        chosen = tasks[parse_range(limit)]
        if not chosen:
            raise SelectionError(
                f"--limit {limit} selects no task: the benchmark has {len(tasks)} "
                f"(0 to {len(tasks) - 1})"
            )
        return chosen
    return tasks[: limit if limit else None]


def _by_id(tasks: list[EvalTask], ids: Sequence[str]) -> list[EvalTask]:
    """The tasks with `ids`, in the benchmark's order. An id may leave out the benchmark's
    prefix (`3` for `gsm8k/3`); ids that match no task are an error naming some that do."""
    known = {t.id for t in tasks}
    wanted: set[str] = set()
    unknown: list[str] = []
    for i in ids:
        full = i if i in known else next((f"{t.benchmark}/{i}" for t in tasks[:1]), i)
        if full in known:
            wanted.add(full)
        else:
            unknown.append(i)
    if unknown:
        close = sorted({c for u in unknown for c in difflib.get_close_matches(u, known, n=2)})
        some = [t.id for t in tasks[:5]]
        hint = f"; close: {', '.join(map(repr, close))}" if close else ""
        raise SelectionError(
            f"no task with id {', '.join(map(repr, unknown))} ({len(tasks)} tasks; ids look "
            f"like {', '.join(map(repr, some))}{', ...' if len(tasks) > 5 else ''}){hint}"
        )
    return [t for t in tasks if t.id in wanted]


def selection_record(
    tasks: list[EvalTask],
    of: int,
    *,
    limit: int | str | None = None,
    sample: int | str | None = None,
    seed: int | None = None,
    ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """What config.json keeps of the choice of `tasks` (out of `of`), for a resume to check:
    a sample's rule and seed, or the range or ids asked for, with a digest of the ids chosen.
    Empty for the first N or all tasks (a resume may then take more)."""
    if sample is not None:
        return {
            "sample": len(tasks),
            "sample_of": of,
            "sample_rule": str(sample),
            "seed": 0 if seed is None else seed,
            "sample_digest": sample_digest(tasks),
        }
    if ids:
        chosen: dict[str, Any] = {"ids": sorted(t.id for t in tasks)}
    elif isinstance(limit, str):
        chosen = {"range": limit.strip()}
    else:
        return {}
    return {"selection": chosen, "sample_of": of, "sample_digest": sample_digest(tasks)}


def sample_digest(tasks: list[EvalTask]) -> str:
    return hashlib.sha256("\n".join(sorted(t.id for t in tasks)).encode()).hexdigest()[:16]
