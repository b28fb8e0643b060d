"""The tables of benchmarks/verification_quality.py, built from the cells read back from its run
directories: per benchmark and method, accuracy and verification (verified precision, coverage,
the paper's Table 4 false positives and negatives), cost and time; verimap paired with every
other method; verimap's risk–coverage points; every task; and the README's pens task.

Every statistic is `verimap.evals.stats`'s, so these tables, `verimap eval report` and
`verimap eval compare` cannot disagree; here they are only formatted.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from _common import Cell, Row, seconds, unlike_speeds

from verimap.evals.runner import task_key
from verimap.evals.stats import (
    Proportion,
    compare_records,
    is_verified,
    risk_coverage_curve,
    verification_metrics,
)

VERIMAP, REACT = "verimap", "react"
TITLES = {
    "gsm8k": "GSM8K test",
    "humaneval": "HumanEval",
    "mbpp": "MBPP sanitized test",
    "multihoprag": "MultiHopRAG (strict)",
}
# The benchmarks whose every item was seen: their results are development data, not a measurement.
DEVELOPMENT_DATA = {
    "humaneval": "development data: every item was seen while the prompts and checks were "
    "developed; not a measurement",
}


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def share(p: Proportion) -> str:
    """k/n, the share and its Wilson 95% interval."""
    if not p.n:
        return "–"
    return f"{p.k}/{p.n} = {pct(p.value)} ({pct(p.low)}–{pct(p.high)})"


def points(x: float) -> str:
    return f"{100 * x:+.1f}"


def task_cell(r: Row | None, errored: bool = False) -> str:
    if r is None:
        return "error" if errored else "–"
    mark = "✓" if r.correct else "✗"
    return f"{mark}{' V' if is_verified(r.record) else ''} {r.wall_s:.0f} s, {r.calls}"


def mean_of(rows: list[Row], what: Callable[[Row], float]) -> float | None:
    return statistics.fmean(what(r) for r in rows) if rows else None


def time_ratio(cell: Cell, react: Cell | None) -> str:
    """Wall time over react's, on the tasks both finished, when both were timed at one speed."""
    if react is None:
        return "–"
    if unlike := unlike_speeds(cell, react):
        return unlike
    theirs = {r.task_id: r.wall_s for r in react.rows}
    common = [r for r in cell.rows if r.task_id in theirs]
    base = sum(theirs[r.task_id] for r in common)
    return f"{sum(r.wall_s for r in common) / base:.2f}×" if common and base > 0 else "–"


def summary_row(cell: Cell, react: Cell | None) -> str:
    m = verification_metrics(cell.records)
    tasks = str(m.tasks) + (f" (+{len(cell.errors)} errored)" if cell.errors else "")
    tasks += f" ({cell.note})" if cell.note else ""
    checked = m.has_checks  # by the method its records ran as (sc-planned as sc)
    fp_fn = f"{m.false_positives} ({pct(m.fp_rate)}) / {m.false_negatives} ({pct(m.fn_rate)})"
    calls = mean_of(cell.rows, lambda r: r.calls)
    counted = [r for r in cell.rows if r.record.get("completion_tokens", 0) is not None]
    tokens = mean_of(counted, lambda r: r.completion_tokens)
    wall = mean_of(cell.rows, lambda r: r.wall_s)
    cols = [
        cell.method,
        tasks,
        share(m.accuracy),
        str(m.coverage.k) if checked and m.tasks else "–",
        (share(m.precision) if m.precision else "none verified") if checked and m.tasks else "–",
        share(m.coverage) if checked else "–",
        fp_fn if checked and m.tasks else "–",
        "–" if calls is None else f"{calls:.1f}",
        "–" if tokens is None else f"{tokens:,.0f}",
        "–" if wall is None else seconds(wall),
        time_ratio(cell, react),
    ]
    return "| " + " | ".join(cols) + " |"


def caption(bench: str) -> list[str]:
    note = f" ({DEVELOPMENT_DATA[bench]})" if bench in DEVELOPMENT_DATA else ""
    return ["", f"**{TITLES.get(bench, bench)}**{note}", ""]


def summary_table(bench: str, ids: list[str], cells: list[Cell]) -> list[str]:
    react = next((c for c in cells if c.method == REACT), None)
    return [
        *caption(bench),
        "| method | tasks | accuracy (95% CI) | verified | verified precision (95% CI) "
        "| coverage (95% CI) | false pos. / false neg. | calls/task | completion tokens/task "
        "| wall/task | time vs react |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(summary_row(c, react) for c in cells),
    ]


def comparison_table(bench: str, ids: list[str], cells: list[Cell]) -> list[str]:
    """Each verimap method (plain, and any variant named `verimap-...`) against every other
    method on their common tasks, every sc cell included (each at its own k)."""
    ours = [c for c in cells if is_verimap(c.method) and c.rows]
    if not ours or len(cells) < 2:
        return []
    lines = [
        *caption(bench),
        "| verimap | vs | common tasks | verimap | other | wins | losses | exact McNemar p "
        "| accuracy difference, points (95% bootstrap CI) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mine in ours:
        for other in cells:
            if other is mine:
                continue
            found = compare_records(mine.records, other.records, benchmark=bench)
            if not found:
                lines.append(f"| {mine.method} | {other.method} | 0 | – | – | – | – | – | – |")
                continue
            c = found[0].comparison
            lines.append(
                f"| {mine.method} | {other.method} | {c.n} | {share(c.accuracy_a)} "
                f"| {share(c.accuracy_b)} | {c.wins} | {c.losses} | {c.p_value:.3g} "
                f"| {points(c.difference)} ({points(c.ci[0])} to {points(c.ci[1])}) |"
            )
    return lines


def is_verimap(method: str) -> bool:
    """Whether `method` is verimap or a variant of it (`verimap-planned`, `verimap --policy P`)."""
    return method == VERIMAP or method.startswith((f"{VERIMAP}-", f"{VERIMAP} "))


def risk_table(bench: str, ids: list[str], cells: list[Cell]) -> list[str]:
    ours = next((c for c in cells if c.method == VERIMAP), None)
    curve = risk_coverage_curve(ours.records) if ours else []
    if not curve:
        return []
    return [
        *caption(bench),
        "| coverage | answered | wrong | risk |",
        "|---|---|---|---|",
        *(f"| {pct(p.coverage)} | {p.covered} | {p.wrong} | {pct(p.risk)} |" for p in curve),
    ]


def per_task_table(bench: str, ids: list[str], cells: list[Cell]) -> list[str]:
    lines = [
        *caption(bench),
        "| task | " + " | ".join(c.method for c in cells) + " |",
        "|---|" + "---|" * len(cells),
    ]
    for tid in ids:
        row = [task_cell(_row(c, tid), tid in c.errors) for c in cells]
        lines.append(f"| {tid} | " + " | ".join(row) + " |")
    return lines


def _row(cell: Cell, task_id: str, key: str | None = None) -> Row | None:
    return next(
        (r for r in cell.rows if r.task_id == task_id and key in (None, r.record.get("key"))),
        None,
    )


def median_wall(cell: Cell) -> float | None:
    return statistics.median(r.wall_s for r in cell.rows) if cell.rows else None


def pens_table(cells: list[Cell], rounds: int) -> list[str]:
    """The README's task: every run of react and verimap, and verimap's median time over
    react's (the goal: right, in <= 60 s and <= 2x react)."""
    lines = [
        "### The README's first task (pens, answer 391)",
        "",
        "| method | " + " | ".join(f"run {r}" for r in range(rounds)) + " | right | median wall |",
        "|---|" + "---|" * (rounds + 2),
    ]
    for c in cells:
        runs = [task_cell(_row(c, "pens", task_key(r, "pens"))) for r in range(rounds)]
        right = f"{sum(r.correct for r in c.rows)}/{len(c.rows)}"
        med = median_wall(c)
        lines.append(
            f"| {c.method} | " + " | ".join(runs) + f" | {right} | {seconds(med) if med else '–'} |"
        )
    walls = {c.method: median_wall(c) for c in cells}
    ours, react = walls.get(VERIMAP), walls.get(REACT)
    ratio = f"{ours / react:.2f}×" if ours and react else "–"
    by = {c.method: c for c in cells}
    if VERIMAP in by and REACT in by and (unlike := unlike_speeds(by[VERIMAP], by[REACT])):
        ratio = unlike
    return [*lines, "", f"verimap's median time over react's: {ratio}"]


LEGEND = (
    "*accuracy*: right out of the tasks that finished (errored tasks are not scored). *verified*: "
    'a check accepted the final answer; "–" for a method with no checks, whose answers are '
    "never counted as verified. *verified precision*: the share of verified answers that are "
    "right. *coverage*: the share of tasks verified. *false pos. / false neg.* (the paper's "
    "Table 4): verified but wrong / right but not verified, rates over all tasks. Intervals are "
    "Wilson 95%. *time vs react*: wall time over react's on the tasks both finished, unless "
    "the two were timed at generation speeds more than 2x apart (another host or another "
    "load, as a resumed run may be): then the two speeds are shown instead. Paired "
    "comparisons: wins = verimap right and the other wrong; the exact McNemar p is over the "
    "tasks where they disagree; the interval is a seeded paired bootstrap (10,000 resamples). "
    "All from `verimap.evals.stats`."
)


# A table per benchmark: (benchmark, its task ids in run order, its cells) -> Markdown lines.
Table = Callable[[str, list[str], list[Cell]], list[str]]
LATER: tuple[tuple[str, Table], ...] = (
    ("verimap against each method, on the tasks both finished", comparison_table),
    ("verimap's risk–coverage points (verified answers first)", risk_table),
    ("Per task (✓ right / ✗ wrong, V verified, wall seconds, model calls)", per_task_table),
)


def section(title: str, table: Table, sets: dict[str, list[str]], cells: list[Cell]) -> list[str]:
    """One table per benchmark under one heading; nothing when no benchmark has one."""
    body = [x for b, ids in sets.items() for x in table(b, ids, [c for c in cells if c.bench == b])]
    return ["", f"### {title}", *body] if body else []


def render(header: str, sets: dict[str, list[str]], cells: list[Cell], rounds: int) -> str:
    """The header, the summary per benchmark and what its columns mean, the pens task, then the
    paired comparisons, the risk–coverage points and the per-task tables."""
    lines = [header, *section("Accuracy and verification", summary_table, sets, cells)]
    lines += ["", LEGEND]
    pens = [c for c in cells if c.bench == "pens"]
    if pens:
        lines += ["", *pens_table(pens, rounds)]
    for title, table in LATER:
        lines += section(title, table, sets, cells)
    return "\n".join(lines) + "\n"
