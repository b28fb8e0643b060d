"""SVG for the report: plan DAGs laid out by Graphviz `dot`, the accuracy-vs-cost and the
risk–coverage plots by matplotlib, and the sanitiser every SVG passes before it is inlined.

Node ids and names come from model-written plans, so they reach `dot` only as escaped,
shortened labels of nodes named `n0`, `n1`, ...; and whatever `dot` or matplotlib emit
is parsed and re-serialised through an allow-list (elements, attributes, local `#`
links only), so no script, event handler, external reference or comment reaches the page.
"""

from __future__ import annotations

import html
import io
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from verimap.base.errors import VerimapError
from verimap.observe.picture import STATUS_STYLE


class ViewError(VerimapError, RuntimeError):
    """The report cannot be made (a missing tool or an unreadable input); the message says
    what to do."""


_ALLOWED_ELEMENTS = {
    "svg",
    "g",
    "title",
    "a",
    "path",
    "polygon",
    "polyline",
    "ellipse",
    "circle",
    "rect",
    "line",
    "text",
    "tspan",
    "defs",
    "use",
    "clipPath",
}
_ALLOWED_ATTRS = {
    "id",
    "class",
    "transform",
    "fill",
    "stroke",
    "stroke-width",
    "stroke-dasharray",
    "stroke-linejoin",
    "stroke-linecap",
    "stroke-miterlimit",
    "stroke-opacity",
    "fill-opacity",
    "fill-rule",
    "opacity",
    "points",
    "d",
    "x",
    "y",
    "x1",
    "y1",
    "x2",
    "y2",
    "cx",
    "cy",
    "r",
    "rx",
    "ry",
    "width",
    "height",
    "viewBox",
    "text-anchor",
    "font-family",
    "font-size",
    "font-weight",
    "font-style",
    "clip-path",
    "style",
    "preserveAspectRatio",
    "href",
    "dominant-baseline",
}
_LOCAL_REF = re.compile(r"#[A-Za-z0-9_.:-]{1,200}")
_URL = re.compile(r"url\(\s*([^)]*)\)", re.I)
_UNSAFE_STYLE = re.compile(r"expression|@import|javascript:|\\|<", re.I)
_QUOTES = "'\" "
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1]


def _safe_value(name: str, value: str) -> str | None:
    if name == "href":
        return value if _LOCAL_REF.fullmatch(value) else None
    if name in ("style", "clip-path", "fill", "stroke"):
        if _UNSAFE_STYLE.search(value):
            return None
        for m in _URL.finditer(value):
            if not _LOCAL_REF.fullmatch(m.group(1).strip(_QUOTES)):
                return None
    return value


def _prefixed(name: str, value: str, prefix: str) -> str:
    """`value` (already safe) with its id, or its references to ids, given `prefix`."""
    if not prefix:
        return value
    if name == "id":
        return prefix + value
    if name == "href":
        return "#" + prefix + value[1:]
    return _URL.sub(lambda m: f"url(#{prefix}{m.group(1).strip(_QUOTES)[1:]})", value)


def sanitize_svg(
    text: str,
    *,
    keep_ids: bool = False,
    id_prefix: str = "",
    titles: dict[str, str] | None = None,
) -> str:
    """`text` (an SVG document) re-serialised through the allow-list, as markup safe to inline
    in HTML. Ids are dropped unless `keep_ids` (dot's `node1`, `edge1` repeat in every graph
    of a page); `id_prefix` then goes before every kept id and every `#` reference, so two
    matplotlib plots on one page (each with its `figure_1`) share none. A `<title>` is kept
    only when `titles` maps its text, and gets the mapped text."""
    try:
        root = ET.fromstring(_CONTROL.sub("", text).encode("utf-8"))
    except ET.ParseError as e:
        raise ViewError(f"could not read an SVG that Graphviz or matplotlib wrote: {e}") from None
    if _local(root.tag) != "svg":
        raise ViewError("not an SVG document")
    out: list[str] = []

    def walk(el: ET.Element) -> None:
        tag = _local(el.tag)
        if tag not in _ALLOWED_ELEMENTS:
            return
        if tag == "title":
            mapped = (titles or {}).get((el.text or "").strip())
            if mapped is not None:
                out.append(f"<title>{html.escape(mapped)}</title>")
            return
        attrs = []
        for k, v in el.attrib.items():
            name = _local(k)
            if name not in _ALLOWED_ATTRS or (name == "id" and not keep_ids):
                continue
            safe = _safe_value(name, v)
            if safe is not None:
                safe = _prefixed(name, safe, id_prefix)
                attrs.append(f' {name}="{html.escape(safe, quote=True)}"')
        if tag == "a" and not any(a.startswith(" href=") for a in attrs):
            tag = "g"  # a link whose target was dropped is just a group
        out.append(f"<{tag}{''.join(attrs)}>")
        if el.text and tag in ("text", "tspan"):
            out.append(html.escape(el.text))
        for child in el:
            walk(child)
            if child.tail and tag in ("text", "tspan"):
                out.append(html.escape(child.tail))
        out.append(f"</{tag}>")

    walk(root)
    return "".join(out)


# -- plan DAGs ---------------------------------------------------------------------------------

# Past these, a plan is listed, not drawn: `dot` on a dense plan of 60 nodes and 1,000 edges
# ran for minutes, and a drawing that size is unreadable anyway. Within them the densest
# plans tried took under a second.
MAX_DAG_NODES = 150
MAX_DAG_EDGES = 300
# All plans of a page get this long, in all, to be laid out; one that is not is listed.
DOT_TIMEOUT = 60.0
DOT_TIMEOUT_ONE = 10.0

_STATUS_COLOURS: dict[str, tuple[str, str]] = {}
for _status, _style in STATUS_STYLE.items():
    _parts = dict(p.split(":", 1) for p in _style.split(",") if ":" in p)
    _STATUS_COLOURS[_status] = (_parts.get("fill", "#ffffff"), _parts.get("stroke", "#9e9e9e"))
_STATUS_COLOURS["running"] = ("#fff9c4", "#f9a825")  # started, never finished (a cut trace)


def status_colours(status: str) -> tuple[str, str]:
    """Fill and stroke of a node status: the mermaid picture's colours, so both agree."""
    return _STATUS_COLOURS.get(status, _STATUS_COLOURS["pending"])


def _dot_label(text: str, limit: int = 36) -> str:
    text = " ".join(_CONTROL.sub("", text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;")


@dataclass
class DagNode:
    id: str
    name: str
    status: str
    anchor: str
    final: bool = False


@dataclass
class Dag:
    nodes: list[DagNode]
    edges: list[tuple[str, str]] = field(default_factory=list)

    def too_big(self) -> str | None:
        """Why `dot` is not asked to draw this plan, or None."""
        if len(self.nodes) > MAX_DAG_NODES or len(self.edges) > MAX_DAG_EDGES:
            return (
                f"{len(self.nodes):,} nodes and {len(self.edges):,} edges, past the "
                f"{MAX_DAG_NODES} nodes or {MAX_DAG_EDGES} edges a drawing shows"
            )
        return None


def dag_dot(dag: Dag, name: str) -> str:
    """The DOT source of `dag`. Nothing from the plan is used as a DOT identifier: nodes are
    `n0`, `n1`, ...; ids and names appear only inside escaped, shortened labels."""
    index = {n.id: i for i, n in enumerate(dag.nodes)}
    lines = [
        f"digraph {name} {{",
        '  graph [rankdir=TB, bgcolor="transparent", nodesep=0.3, ranksep=0.35];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, penwidth=1.4];',
        '  edge [color="#757575", arrowsize=0.7];',
    ]
    for i, n in enumerate(dag.nodes):
        fill, stroke = status_colours(n.status)
        label = _dot_label(n.id) + (
            ("\\n" + _dot_label(n.name)) if n.name and n.name != n.id else ""
        )
        label += "\\n[" + _dot_label(n.status, 20) + "]"
        extra = ", peripheries=2" if n.final else ""
        style = ', style="rounded,filled,dashed"' if n.status == "skipped" else ""
        lines.append(
            f'  n{i} [label="{label}", fillcolor="{fill}", color="{stroke}", '
            f'href="#{n.anchor}"{style}{extra}];'
        )
    for s, t in dag.edges:
        if s in index and t in index:
            lines.append(f"  n{index[s]} -> n{index[t]};")
    lines.append("}")
    return "\n".join(lines)


def _dot_binary() -> str:
    dot = shutil.which("dot")
    if dot is None:
        raise ViewError(
            "Graphviz `dot` is not installed, and the report draws plans with it: "
            "install it (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)"
        )
    return dot


def _run_dot(source: str, timeout: float) -> str:
    try:
        proc = subprocess.run(
            [_dot_binary(), "-Tsvg"],
            input=source.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ViewError(f"Graphviz `dot` took longer than {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise ViewError(f"Graphviz `dot` failed: {proc.stderr.decode(errors='replace')[:500]}")
    return proc.stdout.decode("utf-8", errors="replace")


def _run_one(dag: Dag, i: int, timeout: float) -> str:
    """One DAG laid out alone, or "" when it fails or there is no time left."""
    if timeout <= 0:
        return ""
    try:
        return _run_dot(dag_dot(dag, f"g{i}"), timeout)
    except ViewError:
        return ""


def _titles(dag: Dag) -> dict[str, str]:
    return {f"n{i}": f"{n.id}: {n.name} [{n.status}]" for i, n in enumerate(dag.nodes)}


def render_dags(
    dags: Sequence[Dag], *, timeout: float | None = None, timeout_one: float | None = None
) -> list[str]:
    """Sanitised inline SVG for each DAG, laid out by one `dot` process for all of them (one
    process per graph costs ~50 ms each: 25 s for a 500-task eval); "" for a DAG past the
    size limits (`Dag.too_big`), which `dot` is never given, and for one that could not be
    laid out within `timeout` in all. The page lists the nodes of those instead.

    When the one process fails or runs out of time, each DAG is laid out alone, at most
    `timeout_one` each, until `timeout` is up: one bad plan does not cost the others theirs."""
    if not dags:
        return []
    _dot_binary()
    timeout = DOT_TIMEOUT if timeout is None else timeout
    timeout_one = DOT_TIMEOUT_ONE if timeout_one is None else timeout_one
    deadline = time.monotonic() + timeout
    todo = [(i, d) for i, d in enumerate(dags) if d.too_big() is None]
    if not todo:
        return [""] * len(dags)
    try:
        out = _run_dot("\n".join(dag_dot(d, f"g{i}") for i, d in todo), timeout / 2)
    except ViewError:
        out = ""
    docs = [d + "</svg>" for d in out.split("</svg>")[:-1]]
    if len(docs) != len(todo):
        docs = [_run_one(d, i, min(timeout_one, deadline - time.monotonic())) for i, d in todo]
    svgs = [""] * len(dags)
    for doc, (i, dag) in zip(docs, todo, strict=True):
        svgs[i] = _sanitized(doc, dag)
    return svgs


def _sanitized(doc: str, dag: Dag) -> str:
    start = doc.find("<svg")
    if start < 0:
        return ""
    try:
        return sanitize_svg(doc[start:], titles=_titles(dag))
    except ViewError:  # output dot cut short, say; the page lists the plan instead
        return ""


# -- plots (matplotlib) ---------------------------------------------------------------------------


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display), or a ViewError saying what to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ViewError(
            "matplotlib is not installed: pip install 'verimap[view]' (jinja2 and matplotlib)"
        ) from None
    return plt


def _figure_svg(fig: Any, id_prefix: str = "") -> str:
    """`fig` as sanitised inline SVG, without the dates and versions that make two runs differ."""
    buf = io.StringIO()
    fig.savefig(
        buf, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None}
    )
    text = buf.getvalue()
    return sanitize_svg(text[text.find("<svg") :], keep_ids=True, id_prefix=id_prefix)


# Text as paths: no font is needed where the page is opened; a fixed salt: the same ids each run.
_RC = {"svg.fonttype": "path", "svg.hashsalt": "verimap"}


@dataclass
class Point:
    method: str
    benchmark: str
    accuracy: float  # percent
    cost: float  # dollars per task
    tokens: float  # per task


def scatter_svg(points: Sequence[Point]) -> str:
    """Accuracy against cost per task, one point per method and benchmark (the paper's Fig. 2).
    With no cost recorded (a local model is free) the x axis is tokens per task instead."""
    if not points:
        return ""
    plt = _pyplot()
    by_cost = any(p.cost > 0 for p in points)
    methods = sorted({p.method for p in points})
    benches = sorted({p.benchmark for p in points})
    markers = "os^Dv<>P*X"
    colours = plt.get_cmap("tab10")
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        try:
            for p in points:
                x = p.cost if by_cost else p.tokens
                ax.scatter(
                    x,
                    p.accuracy,
                    s=60,
                    color=colours(methods.index(p.method) % 10),
                    marker=markers[benches.index(p.benchmark) % len(markers)],
                    edgecolors="black",
                    linewidths=0.6,
                    zorder=3,
                )
                ax.annotate(
                    _plot_label(p.method),
                    (x, p.accuracy),
                    textcoords="offset points",
                    xytext=(6, 4),
                    fontsize=8,
                )
            ax.set_xlabel("cost per task ($)" if by_cost else "tokens per task (no cost recorded)")
            ax.set_ylabel("accuracy (%)")
            ax.set_ylim(-5, 105)
            ax.grid(True, alpha=0.3)
            if len(benches) > 1:
                for b in benches:
                    ax.scatter(
                        [],
                        [],
                        marker=markers[benches.index(b) % len(markers)],
                        color="white",
                        edgecolors="black",
                        label=_plot_label(b),
                    )
                ax.legend(fontsize=8, loc="best")
            fig.tight_layout()
            return _figure_svg(fig)
        finally:
            plt.close(fig)


# -- risk–coverage -----------------------------------------------------------------------------


@dataclass
class Curve:
    """One method's risk–coverage curve on one benchmark, as fractions; `colour` indexes the
    palette, so a method keeps its colour in every benchmark's plot."""

    method: str
    coverage: list[float]
    risk: list[float]
    colour: int = 0


def risk_coverage_svg(curves: Sequence[Curve], id_prefix: str) -> str:
    """Risk (the share of answered tasks that is wrong, 1 − precision) against coverage (the
    share answered), one line per method: the lower a line lies, the more its ranking (verified
    first) can be trusted. `id_prefix` keeps this plot's ids apart from the other plots'."""
    if not curves:
        return ""
    plt = _pyplot()
    colours = plt.get_cmap("tab10")
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(5.2, 3.4))
        try:
            for c in curves:
                ax.plot(
                    [100 * x for x in c.coverage],
                    [100 * y for y in c.risk],
                    marker="o",
                    markersize=4,
                    linewidth=1.5,
                    color=colours(c.colour % 10),
                    label=_plot_label(c.method),
                )
            ax.set_xlabel("coverage (% of tasks answered)")
            ax.set_ylabel("risk (% of answered wrong)")
            ax.set_xlim(-3, 103)
            ax.set_ylim(-3, 103)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8, loc="upper left")
            fig.tight_layout()
            return _figure_svg(fig, id_prefix)
        finally:
            plt.close(fig)


def _plot_label(text: Any) -> str:
    # matplotlib reads $...$ as mathtext; a method name is plain text.
    return " ".join(str(text).split())[:40].replace("$", r"\$")
