"""Majority votes over sampled answers (self-consistency, Wang et al. 2023).

Answers are grouped by what makes two of them the same answer: numbers by value (equal up to
rounding), text by its normalised form, code by what it does (the groups of
`verimap.checks.behaviour.clusters`) or, when it cannot be run on any input, by its normalised
text. The largest group wins, a tie goes to the group that was sampled first, and a sample
with no answer votes for nothing but still counts in the winner's share: a vote that most
samples could not join is a weak one.
"""

from __future__ import annotations

import ast
import math
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from verimap.base.verdicts import clip

# How much of an answer (code, above all) the trace shows per group.
SHOWN_CHARS = 400


@dataclass
class Group:
    """Samples that gave the same answer: `answer` is the first one's."""

    answer: Any
    members: list[int]


@dataclass
class Vote:
    """Groups largest first, ties by their first sample; `samples`: how many were drawn;
    `by`: what made two answers the same."""

    groups: list[Group]
    samples: int
    by: str

    @property
    def winner(self) -> Group | None:
        return self.groups[0] if self.groups else None

    @property
    def share(self) -> float | None:
        """The winner's share of all samples, those without an answer included."""
        if self.winner is None or not self.samples:
            return None
        return len(self.winner.members) / self.samples

    def trace(self) -> dict[str, Any]:
        """The vote as the trace shows it: each answer and the samples that gave it."""
        groups = [
            {"answer": _shown(g.answer), "count": len(g.members), "samples": g.members}
            for g in self.groups
        ]
        winner = self.winner
        return {
            "by": self.by,
            "samples": self.samples,
            "groups": groups,
            "winner": _shown(winner.answer) if winner else None,
            "share": self.share,
        }


def _shown(answer: Any) -> Any:
    return clip(answer, SHOWN_CHARS) if isinstance(answer, str) else answer


def grouped(answers: Sequence[Any], same: Callable[[Any, Any], bool]) -> list[Group]:
    """Each answer joins the first group whose first answer it is `same` as; None joins none."""
    groups: list[Group] = []
    for i, a in enumerate(answers):
        if a is None:
            continue
        home = next((g for g in groups if same(g.answer, a)), None)
        if home is None:
            groups.append(Group(a, [i]))
        else:
            home.members.append(i)
    return sorted(groups, key=lambda g: (-len(g.members), g.members[0]))


def same_number(a: Any, b: Any) -> bool:
    """Equal up to rounding (0.30000000000000004 is 0.3); a non-plain answer by its text."""
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return str(a) == str(b)


def normal_text(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (as SQuAD compares answers)."""
    words = text.lower().translate(str.maketrans("", "", string.punctuation)).split()
    return " ".join(w for w in words if w not in ("a", "an", "the"))


def normal_code(code: str) -> str:
    """Code without comments and layout, so that two samples that differ only there agree."""
    try:
        return ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError):
        return " ".join(code.split())


def by_value(answers: Sequence[Any]) -> Vote:
    return Vote(grouped(answers, same_number), len(answers), "value")


def by_text(answers: Sequence[str | None]) -> Vote:
    return Vote(grouped(answers, _same_text), len(answers), "text")


def by_code_text(answers: Sequence[str | None]) -> Vote:
    return Vote(grouped(answers, _same_code), len(answers), "code text")


def _same_text(a: str, b: str) -> bool:
    return normal_text(a) == normal_text(b)


def _same_code(a: str, b: str) -> bool:
    return normal_code(a) == normal_code(b)


def by_clusters(answers: Sequence[Any], clusters: list[list[int]]) -> Vote:
    """A vote from behaviour clusters (indices into `answers`, largest first)."""
    groups = [Group(answers[c[0]], list(c)) for c in clusters]
    groups.sort(key=lambda g: (-len(g.members), g.members[0]))
    return Vote(groups, len(answers), "behaviour")
