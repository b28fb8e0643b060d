"""One self-contained HTML file for traces and eval directories (`verimap view`).

The page is static: all CSS, the small filter script and every SVG are inline, and a
Content-Security-Policy forbids any fetch and any script but ours (pinned by hash).
Everything that came from a model or a results file is escaped by Jinja's autoescape;
the only markup inserted as-is is the SVG that `svg.sanitize_svg` rebuilt from an
allow-list.

Inputs may be torn, foreign or hostile: every line that cannot be read is skipped, listed
on the page and handed to the caller as `file:line: reason`, and the rest is shown. The
page's size is bounded by counts as well as by string lengths: at most `MAX_TASKS` tasks,
`MAX_TABLE_ROWS` rows per table, and per run what `verimap.view.model` keeps, each cut
noted ("… K more").
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import math
import multiprocessing as mp
import os
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from verimap.base.out_files import OutFileError, check_replace, marked, write_file
from verimap.base.redaction import Redactor
from verimap.evals import question_types
from verimap.evals import report as tables
from verimap.evals.runner import CONFIG, RESULTS, RunDirError, unscored_errors
from verimap.observe.trace_files import DEFAULT_MAX_CHARS, clip_deep, clip_text, trace_path
from verimap.view.curves import MAX_RISK_PLOTS, Plots, RiskPlot, draw_plots, risk_plots
from verimap.view.svg import Dag, DagNode, Point, ViewError, render_dags
from verimap.view.trace import RunView, load_run, pretty, run_from_plans

TEMPLATES = Path(__file__).with_name("templates")
# Tasks (and traces given) shown, in order; the tables count every task.
MAX_TASKS = 2_000
MAX_TABLE_ROWS = 200  # per table, and methods or benchmarks in the filters
MAX_POINTS = 60  # method x benchmark points in the plot: the ones with the most tasks
T = TypeVar("T")
# In every page's <head>: how a later `verimap view` knows it may replace the file.
PAGE_MARK = '<meta name="generator" content="verimap view">'
PAGE = marked("verimap view page", PAGE_MARK)


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    hidden: int = 0


@dataclass
class EvalSource:
    path: str
    label: str
    config: dict[str, Any]
    models: dict[str, str] = field(default_factory=dict)
    records: int = 0
    errors: int = 0


@dataclass
class TaskEntry:
    anchor: str
    source: str
    record: dict[str, Any]
    run: RunView


@dataclass
class Report:
    title: str
    inputs: list[str]
    evals: list[EvalSource] = field(default_factory=list)
    # Accuracy and verification per method (`tables.table_summary`), first on the page.
    summary: Table | None = None
    tables: list[Table] = field(default_factory=list)
    risk_plots: list[RiskPlot] = field(default_factory=list)
    hidden_risk_plots: int = 0
    scatter: str = ""
    scatter_by_cost: bool = False
    tasks: list[TaskEntry] = field(default_factory=list)
    runs: list[RunView] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    benchmarks: list[str] = field(default_factory=list)
    # Every line skipped as unreadable (`file:line: reason`), and every file not read.
    problems: list[str] = field(default_factory=list)
    hidden_tasks: int = 0
    hidden_runs: int = 0

    @property
    def problems_listed(self) -> list[str]:
        return tables.problem_lines(self.problems)


# -- inputs --------------------------------------------------------------------------------------


def _is_eval_dir(p: Path) -> bool:
    return (p / RESULTS).is_file() or (p / CONFIG).is_file()


def classify(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[Path], list[Path]]:
    """Eval directories and trace files among `paths`. A directory that is neither an eval
    directory nor holds traces may hold eval directories (`runs/bench-small-b/*`)."""
    evals: list[Path] = []
    traces: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise ViewError(f"{p}: no such file or directory")
        if p.is_file():
            if p.name in (RESULTS, CONFIG):
                evals.append(p.parent)
            else:
                traces.append(p)
        elif _is_eval_dir(p):
            evals.append(p)
        elif found := sorted(d for d in p.iterdir() if d.is_dir() and _is_eval_dir(d)):
            evals.extend(found)
        elif found := sorted(p.glob("*.jsonl"), key=lambda f: _natural(f.name)):
            traces.extend(found)
        else:
            raise ViewError(
                f"{p}: neither a trace (.jsonl) nor an eval directory (config.json, results.jsonl)"
            )
    return list(dict.fromkeys(evals)), list(dict.fromkeys(traces))


def default_output(paths: Sequence[str | os.PathLike[str]]) -> Path:
    """report.html in the first PATH (a directory), or `<trace>.html` beside a trace, so views
    of several traces in one directory do not overwrite each other."""
    first = Path(paths[0])
    if first.is_dir():
        return first / "report.html"
    if first.name in (RESULTS, CONFIG):
        return first.parent / "report.html"
    return first.with_suffix(".html")


def _natural(text: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


# A bar between cells: one a cell holds is escaped (`verimap.evals.report.cell`).
_CELL_BAR = re.compile(r"(?<!\\)\|")


def _md_table(markdown: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of one of `verimap.evals.report`'s markdown tables: the paper's tables
    are computed there, once, and only re-drawn here."""
    lines = [ln.strip() for ln in markdown.strip().splitlines() if ln.strip().startswith("|")]
    cells = [[c.strip().replace("\\|", "|") for c in _CELL_BAR.split(ln[1:-1])] for ln in lines]
    if len(cells) < 2:
        return [], []
    header, rows = cells[0], cells[2:]
    return header, [(r + [""] * len(header))[: len(header)] for r in rows]


def _tables(records: list[dict[str, Any]]) -> list[Table]:
    specs = [
        ("Accuracy (%), mean ± std over runs (paper Table 1)", tables.table_accuracy, ""),
        ("Iterations and retries per task (paper Table 7)", tables.table_iterations, ""),
        ("Cost and tokens per task by role (paper Fig. 2 / 9)", tables.table_cost, ""),
        ("Verification functions per plan (paper Table 3)", tables.table_vfs, ""),
        (
            "Verification vs. gold correctness (paper Table 4)",
            tables.table_verification,
            "False positive: verification accepted a wrong final answer; "
            "false negative: it rejected a right one.",
        ),
    ]
    if any((r.get("meta") or {}).get("question_type") for r in records):
        specs.append(
            (
                "MultiHopRAG accuracy (%) by question type",
                tables.table_question_types,
                question_types.NOTE,
            )
        )
    return [_table(title, fn(records), note) for title, fn, note in specs]


def _table(title: str, markdown: str, note: str = "") -> Table:
    header, rows = _md_table(markdown)
    hidden = max(0, len(rows) - MAX_TABLE_ROWS)
    return Table(title, header, rows[:MAX_TABLE_ROWS], note, hidden)


def _summary(records: list[dict[str, Any]]) -> Table:
    return _table("Accuracy and verification", tables.table_summary(records), tables.SUMMARY_NOTE)


def _points(records: list[dict[str, Any]]) -> list[Point]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(str(r.get("method")), str(r.get("benchmark")))].append(r)
    biggest = sorted(groups.items(), key=lambda kv: -len(kv[1]))[:MAX_POINTS]
    pts = []
    for (m, b), recs in biggest:
        accs = tables.accuracy_by_run(recs)
        pts.append(
            Point(
                method=m,
                benchmark=tables.BENCH_TITLE.get(b, b),
                accuracy=statistics.fmean(accs) if accs else 0.0,
                cost=statistics.fmean(float(r.get("cost") or 0.0) for r in recs),
                tokens=statistics.fmean(float(r.get("tokens") or 0) for r in recs),
            )
        )
    return pts


def _safe_record(rec: dict[str, Any]) -> dict[str, Any]:
    """A results record (of `trace_files.RESULT`'s shape, clipped as it was read) with the
    optional fields the page uses filled in."""
    rec["task_id"] = str(rec.get("task_id", rec.get("key", "?")))
    rec["method"] = str(rec.get("method", "?"))
    rec["benchmark"] = str(rec.get("benchmark", "?"))
    rec["correct"] = bool(rec.get("correct"))
    rec["verified"] = bool(rec.get("verified"))
    for k in ("run", "iterations", "retries", "tokens"):
        v = rec.get(k)
        rec[k] = v if isinstance(v, int) and not isinstance(v, bool) else 0
    for k in ("cost", "wall_time_s"):
        v = rec.get(k)
        rec[k] = float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0
    return rec


def _load_records(
    d: Path, max_chars: int, problems: list[str] | None = None
) -> tuple[EvalSource, list[dict[str, Any]]]:
    """The directory's summary and its records, sorted; each line skipped goes to `problems`."""
    try:
        loaded = tables.load_dir(d, clip=max_chars)
    except RunDirError as e:
        raise ViewError(str(e)) from None
    seen = problems if problems is not None else []
    seen += loaded.problems
    config = clip_deep(loaded.config, max_chars)
    records = [_safe_record(r) for r in loaded.records]
    records.sort(key=lambda r: (r["run"], _natural(r["task_id"])))
    errors = len(unscored_errors(d, seen))  # tasks a later resume scored are not errors any more
    label = f"{_short(config.get('benchmark', '?'))}/{_short(config.get('method', '?'))}"
    models = config.get("models")
    roles = {_short(k): _short(v) for k, v in models.items()} if isinstance(models, dict) else {}
    src = EvalSource(
        path=str(d), label=label, config=config, models=roles, records=len(records), errors=errors
    )
    return src, records


def _entries(
    d: Path,
    label: str,
    records: list[dict[str, Any]],
    first_anchor: int,
    max_chars: int,
    problems: list[str],
) -> list[TaskEntry]:
    entries = []
    for k, rec in enumerate(records, first_anchor):
        anchor = f"t{k}"
        tp = trace_path(d, rec.get("trace"))
        if tp is not None and tp.is_file():
            run = load_run(tp, anchor, max_chars=max_chars)
            problems += run.problems
        else:
            why = (
                "the trace path points outside the run directory; not read"
                if rec.get("trace") and tp is None
                else f"no trace at {rec.get('trace')!s}; plans from results.jsonl only"
            )
            run = run_from_plans(rec.get("plans") or [], anchor, max_chars=max_chars, note=why)
            run.status = str(rec.get("status", "unfinished"))
            run.error = rec.get("error")
            usage = rec.get("usage")
            run.usage = usage if isinstance(usage, dict) else {}
            run.n_iterations = rec["iterations"]
            run.retries = rec["retries"]
            run.wall_time_s = rec["wall_time_s"]
        entries.append(TaskEntry(anchor=anchor, source=label, record=rec, run=run))
    return entries


def _in_background(fn: Callable[..., T], *args: Any) -> Callable[[], T]:
    """Run `fn(*args)` in a forked process while the caller goes on, where fork exists.

    The plots cost about a second, mostly matplotlib's import; on a big eval it
    overlaps with reading the traces instead of adding to it."""
    if "fork" not in mp.get_all_start_methods():
        done = fn(*args)
        return lambda: done
    pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("fork"))
    future = pool.submit(fn, *args)

    def result() -> T:
        try:
            return future.result()
        finally:
            pool.shutdown()

    return result


def build_report(
    paths: Sequence[str | os.PathLike[str]], *, max_chars: int = DEFAULT_MAX_CHARS
) -> Report:
    """Everything the page shows, with every DAG laid out (one `dot` run for all of them)."""
    evals, traces = classify(paths)
    report = Report(title="verimap report", inputs=[str(p) for p in paths])
    loaded = [(d, *_load_records(d, max_chars, report.problems)) for d in evals]
    if why := tables.double_counted((d, recs) for d, _, recs in loaded):
        report.problems.append(str(why))  # the page still shows every task of both
    all_records = [r for _, _, recs in loaded for r in recs]
    points = _points(all_records) if all_records else []
    risk = risk_plots(all_records)
    plots = _in_background(draw_plots, points, risk[:MAX_RISK_PLOTS]) if points or risk else Plots
    for d, src, recs in loaded:
        report.evals.append(src)
        room = max(0, MAX_TASKS - len(report.tasks))
        report.hidden_tasks += max(0, len(recs) - room)
        report.tasks.extend(
            _entries(d, src.label, recs[:room], len(report.tasks), max_chars, report.problems)
        )
    report.hidden_runs = max(0, len(traces) - MAX_TASKS)
    for k, t in enumerate(traces[:MAX_TASKS]):
        report.runs.append(load_run(t, f"r{k}", max_chars=max_chars))
        report.problems += report.runs[-1].problems
    if all_records:
        report.summary = _summary(all_records)
        report.tables = _tables(all_records)
        report.hidden_risk_plots = max(0, len(risk) - MAX_RISK_PLOTS)
        report.scatter_by_cost = any(p.cost > 0 for p in points)
        methods = tables._method_order(r["method"] for r in all_records)
        benchmarks = tables._bench_order(r["benchmark"] for r in all_records)
        report.methods, report.benchmarks = methods[:MAX_TABLE_ROWS], benchmarks[:MAX_TABLE_ROWS]
    if report.evals:
        report.title = "verimap eval: " + ", ".join(e.label for e in report.evals)
    elif len(report.runs) == 1:
        report.title = f"verimap run {report.runs[0].run_id or Path(traces[0]).name}"
    else:
        report.title = f"verimap runs ({len(report.runs)})"
    _draw(report)
    drawn = plots()
    report.scatter, report.risk_plots = drawn.scatter, drawn.risk
    return report


def _draw(report: Report) -> None:
    """Lay out every plan in one `dot` run; a plan too big to draw, or that `dot` did not lay
    out in time, gets a note and is listed on the page instead."""
    its = [it for run in _all_runs(report) for it in run.iterations if it.nodes]
    dags = [
        Dag(
            nodes=[
                DagNode(id=n.id, name=n.name, status=n.status, anchor=n.anchor, final=n.final)
                for n in it.nodes.values()
            ],
            edges=it.edges,
        )
        for it in its
    ]
    for it, dag, svg in zip(its, dags, render_dags(dags), strict=True):
        it.svg = svg
        if not svg:
            it.layout_note = dag.too_big() or "Graphviz did not lay it out in time"


def _all_runs(report: Report) -> list[RunView]:
    return [t.run for t in report.tasks] + report.runs


# -- HTML ----------------------------------------------------------------------------------------


def _finalizer() -> Callable[[Any], Any]:
    """What every value printed into the page passes before it is escaped: the page is a
    boundary where text leaves the process, so secrets are masked (`redaction.redact`)."""
    from markupsafe import Markup

    redact = Redactor()

    def finalize(value: Any) -> Any:
        if isinstance(value, Markup):  # an SVG rebuilt from an allow-list, our style and script
            return Markup(redact(str(value)))
        return redact(value)

    return finalize


def _env():
    try:
        import jinja2
    except ImportError:
        raise ViewError(
            "jinja2 is not installed: pip install 'verimap[view]' (jinja2 and matplotlib)"
        ) from None
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        finalize=_finalizer(),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        pretty=pretty,
        clip=clip_text,
        secs=_secs,
        num=lambda x: f"{x:,}" if isinstance(x, int) else f"{x:,.1f}",
        money=_money,
        short=_short,
    )
    return env


def _short(value: Any, limit: int = 80) -> str:
    """One line of at most `limit` characters, for summaries; the full text is one click away."""
    if value is None:
        return ""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _secs(x: Any) -> str:
    """A duration; anything that is no finite number (a hand-edited trace) is "–"."""
    if not _finite(x):
        return "–"
    return f"{x:.2f} s" if x < 60 else f"{x / 60:.1f} min"


def _money(x: Any) -> str:
    return f"${x:.4f}" if _finite(x) else "–"


def _finite(x: Any) -> bool:
    if not isinstance(x, int | float) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def render_html(report: Report, *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    env = _env()
    from markupsafe import Markup

    script = (TEMPLATES / "view.js").read_text(encoding="utf-8")
    style = (TEMPLATES / "view.css").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return env.get_template("report.html.j2").render(
        r=report,
        script=Markup(script),
        style=Markup(style),
        script_hash=f"sha256-{digest}",
        markup=Markup,
        max_chars=max_chars,
        generated=dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
    )


def write_report(
    paths: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str] | None = None,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    warn: Callable[[str], object] | None = None,
    named: bool = True,
) -> Path:
    """Build the report of `paths` and write it to `out` (default: `default_output`). Each
    line skipped as unreadable is listed on the page and, when given, passed to `warn`. An
    existing file is replaced only when it is a page verimap wrote, or `out` is given and
    `named` (the user chose that path: `verimap.base.out_files`)."""
    if not paths:
        raise ViewError("nothing to view: give a trace or an eval directory")
    target = Path(out) if out is not None else default_output(paths)
    named = named and out is not None
    try:
        check_replace(target, PAGE, named=named)  # before the work, not only after it
        report = build_report(paths, max_chars=max_chars)
        if warn is not None:
            for line in report.problems_listed:
                warn(line)
        return write_file(target, render_html(report, max_chars=max_chars), PAGE, named=named)
    except OutFileError as e:
        raise ViewError(str(e)) from None
