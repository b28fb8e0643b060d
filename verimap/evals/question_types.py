"""MultiHopRAG's question types: accuracy per type by the strict and the official scorer, and two
runs paired per type. `verimap eval report` and `verimap view` show the first, `verimap eval
compare` the second."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from verimap.evals.scoring import OFFICIAL_MARK
from verimap.evals.stats import mcnemar_exact, total_calls

Record = dict[str, Any]

# The paper's order; a type it does not have goes after them.
QUESTION_TYPES = ("inference_query", "comparison_query", "temporal_query", "null_query")
NOTE = (
    "Accuracy % (right/tasks) per question type, pooled over runs. Strict: the gold answer inside "
    'the answer as whole words (yes/no: the first yes/no word; the null answer, "Insufficient '
    "information\": saying the information is insufficient). Official: MultiHop-RAG's "
    "qa_evaluate.py, right when the answer shares any word with the gold answer (the paper's "
    "accuracy; lenient). Null queries have no evidence in the corpus. Calls, tokens and seconds "
    "are means per task over all types."
)


def question_type(record: Record) -> str | None:
    return (record.get("meta") or {}).get("question_type")


def ordered(types: Iterable[str]) -> list[str]:
    found = set(types)
    return [t for t in QUESTION_TYPES if t in found] + sorted(found - set(QUESTION_TYPES))


def title(qt: str) -> str:
    """`inference` for `inference_query`: what a column or row is headed."""
    return qt.removesuffix("_query")


def official_correct(record: Record) -> bool | None:
    """MultiHop-RAG's own verdict on a record, as its scorer left it in `score_detail`; None
    for a record scored before it was kept. A compact record carries it as `official`."""
    if "official" in record:
        return None if record["official"] is None else bool(record["official"])
    detail = str(record.get("score_detail") or "")
    if OFFICIAL_MARK not in detail:
        return None
    return detail.split(OFFICIAL_MARK, 1)[1].startswith("True")


def by_method(records: Iterable[Record]) -> dict[str, list[Record]]:
    """The records that have a question type, by method."""
    out: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if question_type(r):
            out[str(r["method"])].append(r)
    return out


def header(types: Sequence[str]) -> list[str]:
    return [
        "Method",
        "Scoring",
        *[title(t) for t in types],
        "all",
        "Calls / task",
        "Tokens / task",
        "s / task",
    ]


def _right(verdicts: Sequence[bool]) -> str:
    k, n = sum(verdicts), len(verdicts)
    return f"{100.0 * k / n:.1f} ({k}/{n})" if n else "–"


def method_rows(method: str, recs: Sequence[Record], types: Sequence[str]) -> list[list[str]]:
    """One method's rows under `header(types)`: strict, then official unless a record lacks
    the official verdict; each with the method's calls, tokens and seconds per task."""
    cost = [
        f"{statistics.fmean(total_calls(r) for r in recs):.1f}",
        f"{statistics.fmean(int(r.get('tokens', 0)) for r in recs):.0f}",
        f"{statistics.fmean(float(r.get('wall_time_s', 0.0)) for r in recs):.1f}",
    ]
    scorings: list[tuple[str, Callable[[Record], bool | None]]] = [
        ("strict", lambda r: bool(r["correct"])),
        ("official", official_correct),
    ]
    rows = []
    for name, verdict in scorings:
        said = [(question_type(r), verdict(r)) for r in recs]
        if any(v is None for _, v in said):
            continue
        cells = [_right([bool(v) for q, v in said if q == t]) for t in types]
        rows.append([method, name, *cells, _right([bool(v) for _, v in said]), *cost])
    return rows


class TypeRow(NamedTuple):
    """A against B on the common tasks of one question type."""

    question_type: str
    tasks: int
    right_a: int
    right_b: int
    wins: int
    losses: int
    p_value: float


def paired_by_type(pairs: Iterable[tuple[Record, Record]]) -> list[TypeRow]:
    """Pairs (A's record, B's record of the same task) split by the task's question type, with
    each type's wins, losses and exact McNemar p; none when no task has a type."""
    groups: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for ra, rb in pairs:
        if qt := question_type(ra):
            groups[qt].append((bool(ra.get("correct")), bool(rb.get("correct"))))
    rows = []
    for qt in ordered(groups):
        g = groups[qt]
        wins = sum(a and not b for a, b in g)
        losses = sum(b and not a for a, b in g)
        rows.append(
            TypeRow(
                qt,
                len(g),
                sum(a for a, _ in g),
                sum(b for _, b in g),
                wins,
                losses,
                mcnemar_exact(wins, losses),
            )
        )
    return rows
