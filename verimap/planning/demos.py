"""Worked plans shown to the staged planner, retrieved by similarity to the task.

Each domain has a pool of demonstrations in `demos/<domain>.json`, written for problems of the
benchmark's training material (GSM8K's train split, MBPP's prompt split, MultiHop-RAG queries
that evaluation draws leave out: `held_out`). A demonstration is a plan in the two stages the
planner writes (`staged`): the outline (steps before the final node, each with its id and typed
outputs) and each node's instruction, inputs, checks and criteria. The planner shows the `k`
most similar to its task, by BM25 over their words (a pool of a few plans needs no index).

A run may name a pool of its own beside the shipped one (`read_pool`, `planning.demos_file`):
plans mined from runs that verified with the right answer (`verimap export demos`). Its
`benchmark` names the benchmark whose tasks its indices count, and an evaluation of that
benchmark leaves them out (`Benchmark.held_out`). A run reads the file once, when it starts
(`verimap.wiring.Settings.demo_pool`), and hands the pool on: what the draw left out is what
the planner is shown, whatever happens to the file later.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verimap.base.errors import VerimapError

DOMAINS = ("qa", "math", "programming")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "by",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "did",
        "does",
    ]
)


class Demo(BaseModel):
    """One demonstration: the problem's index in its pool's source, its text, and its plan."""

    model_config = ConfigDict(extra="forbid")
    index: int
    kind: str = ""
    task: str
    steps: list[dict[str, Any]] = Field(default_factory=list)
    nodes: dict[str, dict[str, Any]]


class DemoPool(BaseModel):
    """A domain's demonstrations; `development`: the indices of problems the planner was
    measured on while it was built (never an evaluation's). `benchmark`: the benchmark whose
    task ids end in the demonstrations' indices (a mined pool's; empty for the shipped pools,
    whose `pool` says where their problems come from)."""

    model_config = ConfigDict(extra="forbid")
    domain: str
    pool: str
    benchmark: str = ""
    development: list[int] = Field(default_factory=list)
    demos: list[Demo]


class DemoFileError(VerimapError, ValueError):
    """A demonstrations file that cannot be used: unreadable, not a pool, or another domain's."""


@functools.cache
def pool(domain: str) -> DemoPool:
    """The domain's demonstrations, as shipped in the package."""
    if domain not in DOMAINS:
        raise ValueError(
            f"no demonstrations for domain {domain!r}; the domains are: {', '.join(DOMAINS)}"
        )
    text = (
        resources.files("verimap.planning").joinpath("demos", f"{domain}.json").read_text("utf-8")
    )
    return DemoPool.model_validate(json.loads(text))


def read_pool(path: str | os.PathLike[str], domain: str | None = None) -> DemoPool:
    """The pool in the JSON file at `path` (as `verimap export demos` writes it), validated;
    `DemoFileError` naming the file when it cannot be read, is no pool, or is not of `domain`
    (None: any of `DOMAINS`)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise DemoFileError(
            f"demonstrations file {p}: cannot read it ({e.strerror or e})"
        ) from None
    except ValueError as e:
        raise DemoFileError(f"demonstrations file {p}: not JSON ({e})") from None
    try:
        got = DemoPool.model_validate(data)
    except ValidationError as e:
        lines = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'top level'}: {err['msg']}" for err in e.errors()
        )
        raise DemoFileError(
            f"demonstrations file {p}: not a pool of demonstrations ({lines})"
        ) from None
    if got.domain not in DOMAINS:
        raise DemoFileError(
            f"demonstrations file {p}: domain {got.domain!r} is none of {', '.join(DOMAINS)}"
        )
    return of_domain(got, domain, f"demonstrations file {p}")


def of_domain(extra: DemoPool, domain: str | None, name: str) -> DemoPool:
    """`extra` when it is of `domain` (None: any); else a `DemoFileError` calling it `name`."""
    if domain is not None and extra.domain != domain:
        raise DemoFileError(
            f"{name} holds {extra.domain} demonstrations; this run plans {domain} tasks"
        )
    return extra


def held_out(domain: str = "qa") -> frozenset[int]:
    """The indices of the problems the domain's demonstrations were written for, and of those
    the planner was developed on: an evaluation draw leaves them out, or the planner would be
    shown the answer's plan (or be scored where it was tuned)."""
    p = pool(domain)
    return frozenset([*(d.index for d in p.demos), *p.development])


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def merged(domain: str, extra: DemoPool | None = None) -> list[Demo]:
    """The domain's shipped demonstrations, then those of `extra` when it is of `domain`, less
    any whose task is already there."""
    demos = list(pool(domain).demos)
    if extra is not None and extra.domain == domain:
        seen = {d.task for d in demos}
        demos += [d for d in extra.demos if d.task not in seen]
    return demos


def nearest(task: str, domain: str, k: int = 2, extra: DemoPool | None = None) -> list[Demo]:
    """The `k` demonstrations most similar to `task` (BM25, k1 1.2, b 0.75) among the domain's
    and `extra`'s (`merged`), most similar first; ties keep the pool's order."""
    demos = merged(domain, extra)
    docs = [_words(d.task) for d in demos]
    if not docs or k <= 0:
        return []
    avg = sum(map(len, docs)) / len(docs) or 1.0
    df = Counter(w for doc in docs for w in set(doc))
    n = len(docs)
    query = _words(task)

    def score(doc: list[str]) -> float:
        tf = Counter(doc)
        total = 0.0
        for w in query:
            if w not in tf:
                continue
            idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
            total += idf * tf[w] * 2.2 / (tf[w] + 1.2 * (0.25 + 0.75 * len(doc) / avg))
        return total

    ranked = sorted(range(n), key=lambda i: -score(docs[i]))
    return [demos[i] for i in ranked[:k]]
