"""Markdown tables shaped like the paper's, from one or more eval directories.

- Accuracy and verification: per method and benchmark, accuracy and verified precision with
  Wilson 95% intervals, coverage, false positives and negatives, and the risk–coverage points,
  every figure from `verimap.evals.stats` (which `verimap eval compare` uses too).
- Table 1: accuracy, mean ± sample std over runs, methods x benchmarks.
- Table 7: average iterations and retries per task.
- Fig. 2 / 9: cost (and tokens) per task by role: planner, executor, verifier (judge).
- Table 3: verification functions, counted two ways, each labelled: VF calls per task (the
  executions in a run, which is what the paper's Table 3 counts) and VFs written per plan, with
  their average length.
- Table 4: verification against gold correctness: false positives (verified but wrong)
  and false negatives (rejected but right).

Every value read from a directory (method, benchmark and model names, question types, the
problems found) may come from somebody else's files: it is shown `visible` (controls spelled
out), and in a table cell its `|` is escaped, so it can neither break a row nor a line.
"""

from __future__ import annotations

import os
import statistics
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verimap.base.out_files import marked
from verimap.base.redaction import visible
from verimap.evals import compact, question_types, stats
from verimap.evals.report_cache import cache_section
from verimap.evals.run_dir import read_config
from verimap.evals.runner import CONFIG, ERRORS, RESULTS, RunDirError, unscored_errors
from verimap.methods.presets import METHODS
from verimap.observe.trace_files import read_results

BENCH_ORDER = ["gsm8k", "humaneval", "mbpp", "multihoprag"]
BENCH_TITLE = {
    "gsm8k": "GSM8K",
    "humaneval": "HumanEval",
    "mbpp": "MBPP",
    "multihoprag": "MultiHopRAG",
}
# The first line of a report written to a file, by which a later report knows it may replace it.
REPORT_MARK = "<!-- verimap eval report -->"
REPORT_FILE = marked("eval report", REPORT_MARK)


@dataclass
class EvalDir:
    """One eval directory as the report reads it: lines that are no record are skipped, and
    each is a problem (`file:line: reason`), as is a config.json that cannot be read."""

    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def load_dir(d: str | os.PathLike[str], *, clip: int | None = None) -> EvalDir:
    """The config and finished records of one eval directory (the first record of a key wins,
    as on a resume), or a compact results file's records. A directory with neither
    results.jsonl nor config.json is an error; with only config.json, it has finished nothing."""
    p = Path(d)
    out = EvalDir(path=p)
    if compact.is_compact(p):
        out.records = compact.read_records(p, out.problems)
        return out
    if (p / CONFIG).exists():
        config, why = read_config(p / CONFIG)
        out.config = config or {}
        out.problems += [why] if why else []
    elif not (p / RESULTS).exists():
        raise RunDirError(f"{p}: no {RESULTS} here; is this an eval output directory?")
    if not (p / RESULTS).exists():
        return out
    got = read_results(p / RESULTS, clip=clip)
    out.problems += [str(q) for q in got.problems]
    models = out.config.get("models")
    seen: set[str] = set()
    for rec in got.records:
        if rec["key"] not in seen:
            seen.add(rec["key"])
            rec.setdefault("models", models if isinstance(models, dict) else {})
            out.records.append(rec)
    return out


def load_records(
    dirs: Iterable[str | os.PathLike[str]], problems: list[str] | None = None
) -> list[dict[str, Any]]:
    """Every finished record in `dirs` (a directory without results.jsonl is an error); each
    line skipped is noted in `problems` when given. A task a method finished in two of the
    directories is an error (`double_counted`)."""
    loaded = [load_dir(d) for d in dirs]
    if why := double_counted((x.path, x.records) for x in loaded):
        raise RunDirError(
            f"{why}; pooled directories must hold different tasks (another draw): "
            "report each directory on its own"
        )
    if problems is not None:
        problems += [q for x in loaded for q in x.problems]
    return [r for x in loaded for r in x.records]


@dataclass(frozen=True)
class DoubleCount:
    """A task found again in a later directory of a pool: where, and where it was first."""

    path: Path
    first: Path
    record: dict[str, Any]

    def __str__(self) -> str:
        return (
            f"{self.path}: task {visible(self.record['key'])} of method "
            f"{visible(self.record.get('method'))} is also in {self.first}, so the tables "
            "count it twice"
        )


def _method_and_key(rec: dict[str, Any]) -> Hashable:
    return (str(rec.get("method")), rec["key"])


def double_counted(
    dirs: Iterable[tuple[Path, Sequence[dict[str, Any]]]],
    key: Callable[[dict[str, Any]], Hashable] = _method_and_key,
) -> DoubleCount | None:
    """Several directories pool into one row per method, which is how draws of fresh tasks add
    up; a task a method finished in two of them (a run and its rerun under another setting)
    would count twice. The first such task, or None. `key` says what may occur once (a side of
    `eval compare` holds each task once, whatever the method)."""
    where: dict[Hashable, tuple[int, Path]] = {}
    for i, (path, records) in enumerate(dirs):
        for rec in records:
            j, first = where.setdefault(key(rec), (i, path))
            if j != i:
                return DoubleCount(path, first, rec)
    return None


def _fmt(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}f}"


def _method_order(methods: Iterable[str]) -> list[str]:
    known = list(METHODS)
    return sorted(set(methods), key=lambda m: (known.index(m) if m in known else len(known), m))


def _bench_order(benches: Iterable[str]) -> list[str]:
    return sorted(set(benches), key=lambda b: (BENCH_ORDER.index(b) if b in BENCH_ORDER else 9, b))


def _group(records: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    g: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        g[(r["method"], r["benchmark"])].append(r)
    return g


def cell(value: object) -> str:
    """`value` as a markdown table cell: `visible`, with `|` escaped."""
    return visible(value).replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table; every cell goes through `cell`."""
    lines = [
        "| " + " | ".join(map(cell, header)) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(map(cell, r)) + " |" for r in rows]
    return "\n".join(lines)


def accuracy_by_run(recs: Sequence[dict[str, Any]]) -> list[float]:
    runs: dict[int, list[bool]] = defaultdict(list)
    for r in recs:
        runs[int(r["run"])].append(bool(r["correct"]))
    return [100.0 * sum(v) / len(v) for _, v in sorted(runs.items()) if v]


def table_accuracy(records: Sequence[dict[str, Any]]) -> str:
    g = _group(records)
    benches = _bench_order(r["benchmark"] for r in records)
    rows = []
    for m in _method_order(r["method"] for r in records):
        row = [m]
        for b in benches:
            recs = g.get((m, b), [])
            accs = accuracy_by_run(recs)
            if not accs:
                row.append("–")
                continue
            mean = statistics.fmean(accs)
            std = statistics.stdev(accs) if len(accs) > 1 else 0.0
            n = len({r["task_id"] for r in recs})
            row.append(f"{_fmt(mean)} ± {_fmt(std)} (n={n}, runs={len(accs)})")
        rows.append(row)
    return _table(["Method", *[BENCH_TITLE.get(b, b) for b in benches]], rows)


def table_iterations(records: Sequence[dict[str, Any]]) -> str:
    g = _group(records)
    rows = []
    for (m, b), recs in sorted(g.items(), key=lambda kv: (_method_order([kv[0][0]]), kv[0][1])):
        rows.append(
            [
                m,
                BENCH_TITLE.get(b, b),
                _fmt(statistics.fmean(r.get("iterations", 0) for r in recs), 2),
                _fmt(statistics.fmean(r.get("retries", 0) for r in recs), 2),
            ]
        )
    return _table(["Method", "Benchmark", "Avg. iterations", "Avg. retries"], rows)


def _role_avg(recs: Sequence[dict[str, Any]], role: str, field: str) -> float:
    vals = []
    for r in recs:
        u = r.get("usage", {}).get(role, {})
        if field == "tokens":
            vals.append(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0))
        else:
            vals.append(u.get(field, 0.0))
    return statistics.fmean(vals) if vals else 0.0


def table_cost(records: Sequence[dict[str, Any]]) -> str:
    g = _group(records)
    rows = []
    for (m, b), recs in sorted(g.items(), key=lambda kv: (_method_order([kv[0][0]]), kv[0][1])):
        row = [m, BENCH_TITLE.get(b, b)]
        total = 0.0
        for role in ("planner", "executor", "judge"):
            c = _role_avg(recs, role, "cost")
            total += c
            row.append(f"${c:.5f} / {_role_avg(recs, role, 'tokens'):.0f}")
        row.append(f"${total:.5f}")
        prompt = statistics.fmean(
            sum(u.get("prompt_tokens", 0) for u in r.get("usage", {}).values()) for r in recs
        )
        cached = statistics.fmean(
            sum(u.get("cached_tokens", 0) for u in r.get("usage", {}).values()) for r in recs
        )
        row.append(f"{prompt:.0f} ({cached:.0f})")
        rows.append(row)
    return _table(
        [
            "Method",
            "Benchmark",
            "Planner ($ / tok)",
            "Executor ($ / tok)",
            "Verifier ($ / tok)",
            "Total $",
            "Prompt tok (from cache)",
        ],
        rows,
    )


def _calls_per_task(recs: Sequence[dict[str, Any]], kind: str) -> str:
    """Records written before VF calls were counted have none: they are left out, not zeros."""
    counted = [r["vf_calls"].get(kind, 0) for r in recs if r.get("vf_calls")]
    return _fmt(statistics.fmean(counted), 2) if counted else "–"


def table_vfs(records: Sequence[dict[str, Any]]) -> str:
    g = _group(records)
    rows = []
    for (m, b), recs in sorted(g.items(), key=lambda kv: (_method_order([kv[0][0]]), kv[0][1])):
        tot: dict[str, float] = defaultdict(float)
        for r in recs:
            for k, v in r.get("vf_stats", {}).items():
                tot[k] += v
        plans = tot["plans"] or 1
        rows.append(
            [
                m,
                BENCH_TITLE.get(b, b),
                _calls_per_task(recs, "python"),
                _calls_per_task(recs, "llm"),
                _fmt(tot["python"] / plans, 2),
                _fmt(tot["python_chars"] / tot["python"], 0) if tot["python"] else "–",
                _fmt(tot["llm"] / plans, 2),
                _fmt(tot["llm_chars"] / tot["llm"], 0) if tot["llm"] else "–",
                _fmt(tot["nodes"] / plans, 2),
                _fmt(tot["check"] / plans, 2),
                _calls_per_task(recs, "check"),
            ]
        )
    return _table(
        [
            "Method",
            "Benchmark",
            "Python VF calls / task",
            "NL VF calls / task",
            "Python VFs written / plan",
            "Python VF length (chars)",
            "NL VFs written / plan",
            "NL VF length (chars)",
            "Nodes / plan",
            "Checks named / plan",
            "Check calls / task",
        ],
        rows,
    )


def table_verification(records: Sequence[dict[str, Any]]) -> str:
    g = _group(records)
    rows = []
    for (m, b), recs in sorted(g.items(), key=lambda kv: (_method_order([kv[0][0]]), kv[0][1])):
        if not stats.method_has_checks(m):
            continue
        n = len(recs)
        fp = sum(1 for r in recs if r.get("verified") and not r.get("correct"))
        fn = sum(1 for r in recs if not r.get("verified") and r.get("correct"))
        ver = sum(1 for r in recs if r.get("verified"))
        rows.append(
            [
                m,
                BENCH_TITLE.get(b, b),
                str(n),
                str(ver),
                f"{fp} ({100.0 * fp / n:.1f}%)",
                f"{fn} ({100.0 * fn / n:.1f}%)",
            ]
        )
    return _table(
        ["Method", "Benchmark", "Tasks", "Verified", "False positives", "False negatives"], rows
    )


# A risk–coverage cell lists at most this many points; a method recording many distinct
# confidences would otherwise fill a line (the page's plot draws them all).
MAX_CURVE_POINTS = 7
SUMMARY_NOTE = (
    "Tasks: task × run. Accuracy and verified precision (the share of verified answers that "
    "are right) with Wilson 95% intervals; coverage: the share of tasks verified. False "
    "positive: verified but wrong; false negative: right but not verified (as in Table 4). "
    "Risk–coverage: answering only the tasks ranked first (verified, then by a recorded "
    "confidence), the share of them that is wrong. –: the method has no checks, so it "
    "verifies nothing. With several runs the intervals treat runs as independent, which they "
    "are not: read them as optimistic."
)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _with_ci(p: stats.Proportion | None) -> str:
    """`60.0 [31.3, 83.2]`: the percentage and its interval; "–" when nothing was measured."""
    if p is None or p.value is None:
        return "–"
    return f"{_pct(p.value)} [{_pct(p.low)}, {_pct(p.high)}]"


def _pct_short(x: float) -> str:
    """50%, 33.3%: a curve's cell is read at a glance, so whole percentages lose their .0."""
    return f"{100 * x:.1f}".removesuffix(".0") + "%"


def _thin(points: Sequence[stats.RiskPoint], limit: int) -> list[stats.RiskPoint]:
    """At most `limit` points, evenly spread, keeping the first (coverage 0) and the last (all)."""
    if len(points) <= limit:
        return list(points)
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def risk_coverage_cell(points: Sequence[stats.RiskPoint], limit: int = MAX_CURVE_POINTS) -> str:
    """`0% → –, 50% → 20% risk, 100% → 40% risk`: coverage → risk at each point of the curve."""
    shown = _thin(points, limit)
    cells = [
        f"{_pct_short(p.coverage)} → " + ("–" if p.risk is None else f"{_pct_short(p.risk)} risk")
        for p in shown
    ]
    more = f" ({len(shown)} of {len(points)} points)" if len(shown) < len(points) else ""
    return ", ".join(cells) + more


def summary_row(method: str, bench: str, recs: Sequence[dict[str, Any]]) -> list[str]:
    """One row of the accuracy-and-verification table. A method with no checks shows "–"
    where a verified count would be: its records may say verified, but nothing checked them."""
    v = stats.verification_metrics(recs)
    checked = [
        str(v.coverage.k),
        _with_ci(v.precision),
        _pct(v.coverage.value or 0.0),
        f"{v.false_positives} / {v.false_negatives}",
    ]
    return [
        method,
        BENCH_TITLE.get(bench, bench),
        str(v.tasks),
        _with_ci(v.accuracy),
        *(checked if v.has_checks else ["–"] * len(checked)),
        risk_coverage_cell(stats.risk_coverage_curve(recs)),
    ]


def table_summary(records: Sequence[dict[str, Any]]) -> str:
    """Accuracy and verification per method and benchmark, methods in the presets' order."""
    g = _group(records)
    rows = [
        summary_row(m, b, g[(m, b)])
        for m in _method_order(m for m, _ in g)
        for b in _bench_order(b for _, b in g)
        if (m, b) in g
    ]
    return _table(
        [
            "Method",
            "Benchmark",
            "Tasks",
            "Accuracy % [95% CI]",
            "Verified",
            "Verified precision % [95% CI]",
            "Coverage %",
            "FP / FN",
            "Risk–coverage",
        ],
        rows,
    )


def table_question_types(records: Sequence[dict[str, Any]]) -> str:
    """MultiHopRAG accuracy by question type (`question_types.NOTE`), one row per method and
    scoring, with the method's calls, tokens and seconds per task."""
    groups = question_types.by_method(records)
    types = question_types.ordered(
        t for recs in groups.values() for r in recs if (t := question_types.question_type(r))
    )
    rows = [
        row
        for m in _method_order(groups)
        for row in question_types.method_rows(m, groups[m], types)
    ]
    return _table(question_types.header(types), rows)


def render(records: Sequence[dict[str, Any]], *, title: str | None = None) -> str:
    """All tables as one markdown document."""
    if not records:
        return "No finished tasks yet."
    models = sorted(
        {visible(f"{k}={v}") for r in records for k, v in (r.get("models") or {}).items()}
    )
    parts = [f"# {visible(title)}" if title else "# verimap eval report"]
    if models:
        parts.append("Models: " + ", ".join(models))
    parts += [
        "## Accuracy and verification",
        SUMMARY_NOTE,
        table_summary(records),
        "## Accuracy (%), mean ± std over runs (paper Table 1)",
        table_accuracy(records),
    ]
    if any(r.get("compact") for r in records):
        parts += [
            "## Calls, tokens and seconds per task",
            "Compact results files keep no roles, plans or checks: the other tables need runs.",
            table_effort(records),
        ]
    else:
        parts += [
            "## Iterations and retries per task (paper Table 7)",
            table_iterations(records),
            "## Cost and tokens per task by role (paper Fig. 2 / 9)",
            table_cost(records),
            *cache_section(records),
            "## Verification functions (paper Table 3)",
            "VF calls / task: VF executions in a run (Python VFs run, NL criteria judged), which is "
            "what the paper's Table 3 counts. VFs written / plan: VFs in the planner's plans, whether "
            "they ran or not. Lengths are per VF written. Checks: the named checks of the catalog a "
            "plan asks for, and the built-in and named checks run.",
            table_vfs(records),
            "## Verification vs. gold correctness (paper Table 4)",
            "False positive: verification accepted a wrong final answer; false negative: it rejected a right one.",
            table_verification(records),
        ]
    if any((r.get("meta") or {}).get("question_type") for r in records):
        parts += [
            "## MultiHopRAG accuracy (%) by question type",
            question_types.NOTE,
            table_question_types(records),
        ]
    return "\n\n".join(parts) + "\n"


def table_effort(records: Sequence[dict[str, Any]]) -> str:
    """Mean model calls, tokens and seconds per task, per method and benchmark."""
    g = _group(records)
    rows = [
        [
            m,
            BENCH_TITLE.get(b, b),
            str(len(recs)),
            _fmt(statistics.fmean(stats.total_calls(r) for r in recs)),
            _fmt(statistics.fmean(int(r.get("tokens", 0)) for r in recs), 0),
            _fmt(statistics.fmean(float(r.get("wall_time_s", 0.0)) for r in recs)),
        ]
        for (m, b), recs in sorted(g.items(), key=lambda kv: (_method_order([kv[0][0]]), kv[0][1]))
    ]
    return _table(
        ["Method", "Benchmark", "Tasks", "Calls / task", "Tokens / task", "s / task"], rows
    )


# Skipped lines listed by name; past this many only their number is given.
MAX_PROBLEMS_LISTED = 200


def problem_lines(problems: Sequence[str], limit: int = MAX_PROBLEMS_LISTED) -> list[str]:
    """The first `limit` problems, and a line saying how many more there are."""
    more = len(problems) - limit
    return [*map(visible, problems[:limit]), *([f"… and {more:,} more"] if more > 0 else [])]


def report_dirs(dirs: Sequence[str | os.PathLike[str]]) -> str:
    """The tables, then the tasks each directory could not score: left out of every table,
    they must still be seen, or a run with an endpoint outage would pass for a complete one.
    Last, every line skipped as unreadable, by file and line."""
    problems: list[str] = []
    text = render(load_records(dirs, problems))
    notes = [
        f"- {visible(d)}: {n} task(s) errored, not scored (why: {visible(Path(d) / ERRORS)}); "
        "`--resume` retries them"
        for d in dirs
        if (n := len(unscored_errors(d, problems)))
    ]
    if notes:
        text = text.rstrip("\n") + "\n\n## Errored, not scored\n\n" + "\n".join(notes) + "\n"
    if problems:
        listed = "\n".join(f"- {p}" for p in problem_lines(problems))
        text = text.rstrip("\n") + f"\n\n## Skipped lines ({len(problems):,})\n\n{listed}\n"
    return text
