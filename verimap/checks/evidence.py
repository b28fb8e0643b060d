"""The catalog's evidence checks: what a QA node claims comes from the sources it names.

An executor answers from the passages its searches retrieved. These checks read those passages
back out of the node's transcript (the search tool's results, each `[label] title`, then the
line `passage_header` writes, then the passage's text) and ask whether the claim is there:

- `fact_in_source`: most of the output's content words occur in one retrieved passage of the
  named source (a claim that is a date must be the date of such a passage, or occur in one);
- `facts_from_sources`: the same for the two sides of a comparison, each with its own source;
- `reports_in_order`: two report dates are in the order the task states.

Only this node's own retrievals count, so the check rewards a node that searched for what it
claims. An answer "Insufficient information" gives the checks nothing to look at, except where
the run's search tool knows the corpus holds no article of the named source: there it is the
right answer (`fact_in_source` passes it), and any claim from that source fails.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from verimap.base.check_names import (
    ABSTENTION,
    FACT_IN_SOURCE,
    FACTS_FROM_SOURCES,
    REPORTS_IN_ORDER,
)
from verimap.base.messages import Message, ToolMessage, UserMessage
from verimap.base.verdicts import VFVerdict
from verimap.base.verification import CheckTools, Strength, Submission, verdict
from verimap.checks.answer_form import is_abstention, named_value, parse_date

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

# The share of a claim's content words one passage must hold.
MIN_OVERLAP = 0.7
_TITLE = re.compile(r"^(?:(?:Observation|Tool result):\s*)?\[(\d+)\] (.+)$")
_SOURCE = re.compile(r"^Source: (.*); author: (.*); date: (\S*)$")
_WORD = re.compile(r"[a-z0-9]+(?:['.-][a-z0-9]+)*")
_STOPWORDS = frozenset(
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
        "been",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "their",
        "his",
        "her",
        "he",
        "she",
        "they",
        "them",
        "we",
        "you",
        "i",
        "not",
        "no",
        "yes",
        "did",
        "does",
        "do",
        "has",
        "have",
        "had",
        "will",
        "would",
        "can",
        "could",
        "about",
        "after",
        "before",
        "into",
        "than",
        "then",
        "there",
        "which",
        "who",
        "whom",
        "what",
        "when",
        "where",
        "while",
        "also",
        "both",
        "said",
        "says",
        "say",
        "according",
        "report",
        "reported",
        "article",
        "news",
    ]
)


@dataclass(frozen=True)
class Passage:
    """One retrieved passage: its source, publication date (as written) and header plus text."""

    source: str
    date: str
    text: str


def passages(messages: Sequence[Message]) -> list[Passage]:
    """Every passage the search tool returned in `messages`: in tool results, in the
    "Observation:" turns of the text protocol and the "Tool result:" turns of a transcript
    flattened for the final structured call (user turns after the first)."""
    out: list[Passage] = []
    users = 0
    for m in messages:
        if isinstance(m, UserMessage):
            users += 1
        if isinstance(m, ToolMessage) or (isinstance(m, UserMessage) and users > 1):
            out.extend(_parse(m.content))
    return out


def passage_header(title: str, source: str, author: str, date: str) -> str:
    """The two lines that open a retrieved passage: `title`, then its source, author and date,
    each named, so a source or title holding a separator still reads back whole (`passages`)."""
    return f"{title}\nSource: {source}; author: {author}; date: {date}"


def _parse(text: str) -> list[Passage]:
    out: list[Passage] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        title = _TITLE.match(lines[i].strip())
        meta = _SOURCE.match(lines[i + 1].strip()) if title and i + 1 < len(lines) else None
        if title is None or meta is None:
            i += 1
            continue
        body: list[str] = []
        i += 2
        while (
            i < len(lines)
            and not _TITLE.match(lines[i].strip())
            and not lines[i].startswith("(page ")
        ):
            body.append(lines[i])
            i += 1
        text_ = "\n".join([title[2], *body])
        out.append(Passage(source=meta[1], date=meta[3], text=text_))
    return out


def _norm_source(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).removeprefix("the ").strip()


def same_source(named: str, passage_source: str) -> bool:
    """Whether a passage's source is the one a plan named ("The Verge" and "Verge" are one)."""
    a, b = _norm_source(named), _norm_source(passage_source)
    return bool(a) and bool(b) and (a in b or b in a)


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def supports(claim: Any, passage: Passage) -> bool:
    """Whether `passage` holds `claim`: its date when the claim is one, else most of its
    content words (all of them when it has three or fewer: a name must be there whole)."""
    if isinstance(claim, bool) or claim is None:
        return False
    text = str(claim)
    claimed_date = parse_date(text)
    if claimed_date is not None and parse_date(passage.date[:10]) == claimed_date:
        return True
    words = content_words(text)
    if not words:
        return False
    held = set(content_words(passage.text))
    share = sum(w in held for w in words) / len(words)
    return share >= (1.0 if len(words) <= 3 else MIN_OVERLAP)


def _from_source(claim: Any, source: str, found: list[Passage]) -> str | None:
    """Why `claim` is not supported by a retrieved passage of `source` (None: it is)."""
    mine = [p for p in found if same_source(source, p.source)]
    if not mine:
        seen = sorted({p.source for p in found})
        return (
            f"no passage of {source!r} was retrieved"
            + (f" (retrieved: {', '.join(seen)})" if seen else " (no search result at all)")
            + f"; search {source} for it"
        )
    if not any(supports(claim, p) for p in mine):
        return f"{str(claim)[:120]!r} is not in any of the {len(mine)} passage(s) of {source!r} retrieved"
    return None


@dataclass
class FactsFromSources:
    """Each (output, source) pair's output is supported by a passage of its source."""

    name: str
    claims: tuple[tuple[str, str], ...]
    strength: Strength = "strong"
    disputes: bool = False

    def applies(self, sub: Submission) -> bool:
        return True

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict | None:
        values = []
        for output, source in self.claims:
            present, value = named_value(sub, output)
            if not present:
                return verdict(self, "FAIL", f"the node gave no output {output!r}")
            values.append((output, source, value))
        index = tools.sources
        absent = {s for _, s, _ in values if index is not None and index.holds_source(s) is False}
        if all(is_abstention(v) and s not in absent for _, s, v in values):
            return None
        found = passages(sub.transcript)
        problems = []
        for output, source, value in values:
            if source in absent:
                if not is_abstention(value):
                    problems.append(f"{output}: {_no_such_source(source)}")
            elif (why := _from_source(value, source, found)) is not None:
                problems.append(f"{output}: {why}")
        return verdict(self, "FAIL", "; ".join(problems)) if problems else verdict(self, "PASS")


def _no_such_source(source: str) -> str:
    return (
        f"the corpus holds no article from {source!r}, so nothing can come from it; if the "
        f"task needs {source}, the answer is {ABSTENTION}"
    )


@dataclass
class ReportsInOrder:
    """The date `earlier` names is before (or on) the date `later` names."""

    name: str
    earlier: str
    later: str
    strength: Strength = "weak"
    disputes: bool = False

    def applies(self, sub: Submission) -> bool:
        return True

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict | None:
        dates = []
        for ref in (self.earlier, self.later):
            present, value = named_value(sub, ref)
            if not present:
                return verdict(self, "FAIL", f"no value {ref!r} in the node's outputs or inputs")
            if is_abstention(value):
                return None
            day = parse_date(value)
            if day is None:
                return verdict(self, "FAIL", f"{ref}: expected a date, got {value!r}")
            dates.append(day)
        if dates[0] > dates[1]:
            return verdict(
                self,
                "FAIL",
                f"{self.earlier} ({dates[0]}) is after {self.later} ({dates[1]}), against the "
                "order the task states: the reports found are not the ones it means",
            )
        return verdict(self, "PASS")


def evidence_check(
    name: str, check: str, args: dict[str, Any]
) -> FactsFromSources | ReportsInOrder:
    """The evidence check `check` (a catalog name) as the plan's VF `name` asks for it."""
    if check == FACT_IN_SOURCE:
        return FactsFromSources(name, ((str(args["output"]), str(args["source"])),))
    if check == FACTS_FROM_SOURCES:
        pairs = ((args["first"], args["first_source"]), (args["second"], args["second_source"]))
        return FactsFromSources(name, tuple((str(o), str(s)) for o, s in pairs))
    if check == REPORTS_IN_ORDER:
        return ReportsInOrder(name, str(args["earlier"]), str(args["later"]))
    raise ValueError(f"{check!r} is not an evidence check")
