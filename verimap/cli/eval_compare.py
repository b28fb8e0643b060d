"""`verimap eval compare DIR_A DIR_B`: two eval runs on their common tasks.

Totals from two runs differ by chance as much as by method, and more so on 20 or 60 tasks. So
the comparison pairs the runs task by task and reports what the pairing shows: wins, losses,
ties, the exact McNemar p and a paired-bootstrap interval of the accuracy difference, beside
each side's accuracy, verified precision and coverage with Wilson intervals.

verimap eval compare runs/gsm8k-verimap runs/gsm8k-react
verimap eval compare runs/a runs/b --benchmark humaneval --json
verimap eval compare d1/gsm8k-verimap d1/gsm8k-sc --also d2/gsm8k-verimap d2/gsm8k-sc
verimap eval compare eval/draws/vq-6441.jsonl#verimap eval/draws/vq-6441.jsonl#react
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from verimap.evals.question_types import TypeRow
    from verimap.evals.stats import (
        BenchmarkComparison,
        Pairing,
        Proportion,
        VerificationMetrics,
    )

Record = dict[str, Any]


class ResultsPath(click.ParamType):
    """An eval run directory, a compact results file, or `FILE#METHOD`: one method's lines of a
    compact file (`verimap.evals.compact`)."""

    name = "path"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        from verimap.evals.compact import select

        file, _ = select(value)
        if not file.exists():
            self.fail(f"{value!r}: no such run directory or compact results file", param, ctx)
        return str(value)


RESULTS_PATH = ResultsPath()


def _load(dirs: Sequence[str]) -> list[Record]:
    """One side's records, pooled over its directories; a task must be in only one of them,
    whatever the method, or it would be paired twice."""
    from verimap.base.redaction import visible
    from verimap.evals.report import double_counted, load_records
    from verimap.evals.runner import RunDirError
    from verimap.evals.stats import record_key

    loaded: list[tuple[Path, list[Record]]] = []
    for d in dirs:
        try:
            got = load_records([d])
        except RunDirError as e:
            raise click.ClickException(str(e)) from None
        if not got:
            raise click.ClickException(f"{d}: no finished tasks yet; nothing to compare")
        loaded.append((Path(d), got))
    if twice := double_counted(loaded, key=record_key):
        raise click.ClickException(
            f"{twice.path}: task {visible(record_key(twice.record))} is also in {twice.first}, on the "
            "same side; each --also pair must hold other tasks (another draw)"
        )
    return [r for _, got in loaded for r in got]


def _methods(records: Sequence[Record]) -> list[str]:
    return sorted({str(r.get("method", "?")) for r in records})


def _label(records: Sequence[Record]) -> str:
    """The methods of a side, as a table cell may show them (read from files: escaped)."""
    from verimap.evals.report import cell

    return ", ".join(map(cell, _methods(records)))


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _prop(p: Proportion | None) -> str:
    if p is None or p.value is None:
        return "–"
    return f"{_pct(p.value)}% ({p.k}/{p.n}) [{_pct(p.low)}, {_pct(p.high)}]"


def _precision(v: VerificationMetrics) -> str:
    if not v.has_checks:
        return "– (no checks)"
    return _prop(v.precision) if v.precision else "– (nothing verified)"


def _coverage(v: VerificationMetrics) -> str:
    return _prop(v.coverage) if v.has_checks else "– (no checks)"


def _errors(v: VerificationMetrics) -> str:
    return f"{v.false_positives} / {v.false_negatives}" if v.has_checks else "– (no checks)"


def _signed(x: float) -> str:
    return f"{100 * x:+.1f}".replace("-", "−")


def render_comparison(bc: BenchmarkComparison, label_a: str, label_b: str) -> str:
    """One benchmark's comparison as markdown."""
    from verimap.evals.report import BENCH_TITLE, cell

    c, va, vb = bc.comparison, bc.verification_a, bc.verification_b
    rows = [
        f"| | A: {label_a} | B: {label_b} |",
        "|---|---|---|",
        f"| accuracy [95% CI] | {_prop(c.accuracy_a)} | {_prop(c.accuracy_b)} |",
        f"| verified precision [95% CI] | {_precision(va)} | {_precision(vb)} |",
        f"| coverage (share verified) [95% CI] | {_coverage(va)} | {_coverage(vb)} |",
        f"| false positives / negatives | {_errors(va)} | {_errors(vb)} |",
    ]
    disagree = c.wins + c.losses
    lines = [
        f"## {cell(BENCH_TITLE.get(bc.benchmark, bc.benchmark))}: {c.n} common tasks",
        "",
        *rows,
        "",
        f"- wins (A right, B wrong): {c.wins}; losses (A wrong, B right): {c.losses}; "
        f"ties: {c.both_right} both right, {c.both_wrong} both wrong",
        f"- accuracy difference A − B: {_signed(c.difference)} points, 95% CI "
        f"[{_signed(c.ci[0])}, {_signed(c.ci[1])}] (paired bootstrap, {c.resamples} resamples, "
        f"seed {c.seed})",
        f"- exact McNemar p = {c.p_value:.3g} (on the {disagree} tasks where A and B disagree)",
    ]
    if bc.only_a or bc.only_b:
        lines.append(f"- left out: {bc.only_a} tasks only in A, {bc.only_b} only in B")
    return "\n".join(lines)


def render_question_types(rows: Sequence[TypeRow], label_a: str, label_b: str) -> str:
    """A and B per question type, as markdown."""
    from verimap.evals.question_types import title

    lines = [
        "## By question type (common tasks)",
        "",
        f"| question type | tasks | A: {label_a} | B: {label_b} | wins / losses | McNemar p |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, b = 100 * r.right_a / r.tasks, 100 * r.right_b / r.tasks
        lines.append(
            f"| {title(r.question_type)} | {r.tasks} | {a:.1f}% ({r.right_a}) | "
            f"{b:.1f}% ({r.right_b}) | {r.wins} / {r.losses} | {r.p_value:.3g} |"
        )
    return "\n".join(lines)


def _paired(
    a: list[Record], b: list[Record], names: tuple[str, str], benchmark: str | None, **boot: int
) -> tuple[Pairing, list[BenchmarkComparison]]:
    """The pairing and the comparisons, or an error that says why there is nothing to compare."""
    from verimap.evals.stats import benchmark_of, compare_records, pair_records

    pairing = pair_records(a, b)
    if not pairing.pairs:
        raise click.ClickException(
            f"no common tasks: {names[0]} has {len(a)}, {names[1]} has {len(b)}, and no task "
            "(and run) is in both; compare runs of the same benchmark on the same tasks (same "
            "--sample and --seed, or --limit)"
        )
    comps = compare_records(a, b, benchmark=benchmark, **boot)
    if not comps:
        shared = sorted({benchmark_of(ra) for ra, _ in pairing.pairs})
        raise click.ClickException(
            f"no common tasks in benchmark {benchmark!r}; the common tasks are in: "
            f"{', '.join(shared)}"
        )
    return pairing, comps


def _header(
    names: tuple[str, str], a: list[Record], b: list[Record], pairing: Pairing, runs: int
) -> list[str]:
    label_a, label_b = _label(a), _label(b)
    lines = [
        f"# {label_a} (A) vs {label_b} (B)",
        "",
        f"- A: {names[0]} ({label_a}; {len(a)} tasks)",
        f"- B: {names[1]} ({label_b}; {len(b)} tasks)",
        f"- common: {len(pairing.pairs)} tasks; only in A: {len(pairing.only_a)}, "
        f"only in B: {len(pairing.only_b)} (left out)",
    ]
    if runs > 1:
        lines.append(
            f"- {runs} runs: each run of a task is paired with the same run; runs of one task "
            "are not independent, so the p value and the interval are optimistic"
        )
    return lines


@click.command("compare")
@click.argument("dir_a", type=RESULTS_PATH)
@click.argument("dir_b", type=RESULTS_PATH)
@click.option("--benchmark", "-b", default=None, help="Only this benchmark (e.g. gsm8k).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option(
    "--resamples",
    type=click.IntRange(min=100),
    default=10_000,
    show_default=True,
    help="Bootstrap resamples of the accuracy difference.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option(
    "--also",
    "also",
    nargs=2,
    multiple=True,
    metavar="DIR_A DIR_B",
    type=RESULTS_PATH,
    help="Pool another pair of directories (another draw of tasks) into A and B; repeatable.",
)
def compare(
    dir_a: str,
    dir_b: str,
    benchmark: str | None,
    as_json: bool,
    resamples: int,
    seed: int,
    also: tuple[tuple[str, str], ...],
) -> None:
    """Pair two eval output dirs on their common tasks (run i of a task with run i of it); a
    side may be a compact results file's method, FILE.jsonl#METHOD:
    wins, losses, exact McNemar p, bootstrap CI of the accuracy difference, per benchmark, and
    per question type where tasks have one (MultiHopRAG).
    With --also, several draws are pooled, each side's directories holding different tasks."""
    from verimap.evals.question_types import paired_by_type
    from verimap.evals.stats import benchmark_of, to_json

    dirs_a, dirs_b = [dir_a, *(x for x, _ in also)], [dir_b, *(y for _, y in also)]
    a, b = _load(dirs_a), _load(dirs_b)
    names = (" + ".join(dirs_a), " + ".join(dirs_b))
    pairing, comps = _paired(a, b, names, benchmark, resamples=resamples, seed=seed)
    runs = len({ra.get("run", 0) for ra, _ in pairing.pairs})
    types = paired_by_type(
        (ra, rb) for ra, rb in pairing.pairs if benchmark is None or benchmark_of(ra) == benchmark
    )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "a": {"dir": dir_a, "dirs": dirs_a, "methods": _methods(a), "tasks": len(a)},
                    "b": {"dir": dir_b, "dirs": dirs_b, "methods": _methods(b), "tasks": len(b)},
                    "common": len(pairing.pairs),
                    "only_a": len(pairing.only_a),
                    "only_b": len(pairing.only_b),
                    "runs": runs,
                    "benchmarks": to_json(comps),
                    "question_types": [r._asdict() for r in types],
                },
                indent=2,
            )
        )
        return
    from verimap.base.redaction import printable
    from verimap.evals.report import cell

    label_a, label_b = _label(a), _label(b)
    if label_a == label_b:
        label_a, label_b = cell(Path(dir_a).name), cell(Path(dir_b).name)
    body = [render_comparison(bc, label_a, label_b) for bc in comps]
    if types:
        body.append(render_question_types(types, label_a, label_b))
    click.echo(printable("\n\n".join(["\n".join(_header(names, a, b, pairing, runs)), *body])))
