"""Worked plans shown to the staged planner, retrieved by similarity to the task.

Each domain has a pool of demonstrations in `demos/<domain>.json`, written for problems of the
benchmark's training material (GSM8K's train split, MBPP's prompt split, MultiHop-RAG queries
that evaluation draws leave out: `held_out`). A demonstration is a plan in the two stages the
planner writes (`staged`): the outline (steps before the final node, each with its id and typed
outputs) and each node's instruction, inputs, checks and criteria. The planner shows the `k`
most similar to its task, by BM25 over their words (a pool of a few plans needs no index).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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
    measured on while it was built (never an evaluation's)."""

    model_config = ConfigDict(extra="forbid")
    domain: str
    pool: str
    development: list[int] = Field(default_factory=list)
    demos: list[Demo]


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


def held_out(domain: str = "qa") -> frozenset[int]:
    """The indices of the problems the domain's demonstrations were written for, and of those
    the planner was developed on: an evaluation draw leaves them out, or the planner would be
    shown the answer's plan (or be scored where it was tuned)."""
    p = pool(domain)
    return frozenset([*(d.index for d in p.demos), *p.development])


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def nearest(task: str, domain: str, k: int = 2) -> list[Demo]:
    """The `k` demonstrations most similar to `task` (BM25, k1 1.2, b 0.75), most similar first;
    ties keep the pool's order."""
    demos = pool(domain).demos
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
