"""The page's plots, drawn together: accuracy vs. cost, and one risk–coverage plot per benchmark.

The curves come from `verimap.evals.stats.risk_coverage_curve`, the same points that
`verimap eval report` prints in its accuracy-and-verification table, so the page and the
markdown cannot disagree. Both kinds of plot are drawn in one call (`draw_plots`), which
`verimap.view.report` runs in a forked process: matplotlib's import, about a second, is then
paid once and overlaps with reading the traces.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from verimap.evals import report as tables
from verimap.evals import stats
from verimap.view.svg import Curve, Point, risk_coverage_svg, scatter_svg

# Benchmarks given a risk–coverage plot, and lines in one (tab10 has 10 colours).
MAX_RISK_PLOTS = 6
MAX_CURVES = 10

Record = dict[str, Any]


@dataclass
class RiskPlot:
    benchmark: str  # its title, as the tables print it
    curves: list[Curve]
    hidden: int = 0  # methods with a curve that were not drawn
    svg: str = ""


@dataclass
class Plots:
    scatter: str = ""
    risk: list[RiskPlot] = field(default_factory=list)


def has_curve(records: Sequence[Record]) -> bool:
    """Whether the records rank their tasks at all: by checks, or by a recorded confidence
    (self-consistency's vote share). Otherwise the curve is the single point "answer all",
    which the accuracy column already says."""
    return any(stats.method_has_checks(r.get("method")) for r in records) or any(
        stats.confidence(r) is not None for r in records
    )


def _curve(method: str, records: Sequence[Record], colour: int) -> Curve:
    """The stats module's points, without the one at coverage 0 (no risk: nothing answered)."""
    points = [
        (p.coverage, p.risk) for p in stats.risk_coverage_curve(records) if p.risk is not None
    ]
    return Curve(method, [c for c, _ in points], [r for _, r in points], colour)


def risk_plots(records: Sequence[Record]) -> list[RiskPlot]:
    """One plot per benchmark with a method that has a curve, benchmarks and methods in the
    tables' order; a method keeps its colour across the plots."""
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        groups[(str(r["benchmark"]), str(r["method"]))].append(r)
    ranked = {key: recs for key, recs in groups.items() if has_curve(recs)}
    methods = tables._method_order(m for _, m in ranked)
    out = []
    for bench in tables._bench_order(b for b, _ in ranked):
        curves = [
            _curve(m, ranked[(bench, m)], colour)
            for colour, m in enumerate(methods)
            if (bench, m) in ranked
        ]
        hidden = max(0, len(curves) - MAX_CURVES)
        out.append(RiskPlot(tables.BENCH_TITLE.get(bench, bench), curves[:MAX_CURVES], hidden))
    return out


def draw_plots(points: Sequence[Point], risk: Sequence[RiskPlot]) -> Plots:
    """Every plot of the page as sanitised SVG; each risk plot's ids get their own prefix."""
    drawn = [
        RiskPlot(p.benchmark, p.curves, p.hidden, risk_coverage_svg(p.curves, f"rc{i}-"))
        for i, p in enumerate(risk)
    ]
    return Plots(scatter=scatter_svg(points) if points else "", risk=drawn)
