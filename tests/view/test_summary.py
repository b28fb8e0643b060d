"""The page's accuracy-and-verification table and its risk–coverage plots.

Both come from `verimap.evals.stats` through `verimap.evals.report.table_summary` and
`verimap.view.curves`, so the page must show what `verimap eval report` prints; and the
plots are matplotlib SVG inlined like the accuracy-vs-cost one, so they must stay inert.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from verimap.evals import stats
from verimap.evals.report import table_summary
from verimap.view import write_report
from verimap.view.curves import risk_plots
from verimap.view.svg import sanitize_svg

from .conftest import PWN, Page, need_dot, records

# Model-written text that a method or benchmark name could carry.
NASTY = f'{PWN}"];]]></textarea><!-- <img src=x onerror="window.pwned=2">'


@pytest.fixture(scope="module")
def page(report_file) -> tuple[str, Page]:
    need_dot()
    text = report_file.read_text(encoding="utf-8")
    return text, Page(text)


def _rows(text: str, table_class: str) -> list[list[str]]:
    body = text.split(f'<table class="{table_class}">', 1)[1].split("</table>", 1)[0]
    return [
        [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", tr)]
        for tr in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1])
    ]


def _md_rows(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in markdown.splitlines()[2:]]


def test_the_summary_table_is_near_the_top_with_the_report_s_numbers(
    page, oracle_dirs, hostile_dir
):
    text, _ = page
    recs = [r for d in [*oracle_dirs, hostile_dir] for r in records(d)]
    assert _rows(text, "summary") == _md_rows(table_summary(recs))
    assert text.index('id="overview"') < text.index('id="summary"') < text.index("paper Table 1")
    assert text.index('id="summary"') < text.index('id="risk-coverage"') < text.index('id="tasks"')
    assert "Wilson 95% intervals" in text


def test_a_method_without_checks_shows_a_dash(page):
    text, _ = page
    (react,) = [r for r in _rows(text, "summary") if r[0] == "react"]
    assert react[4:8] == ["–", "–", "–", "–"]
    (verimap,) = [r for r in _rows(text, "summary") if r[0] == "verimap"]
    assert verimap[4].isdigit() and verimap[5] != "–" and " / " in verimap[7]


def test_one_risk_coverage_plot_per_benchmark_with_its_own_ids(page):
    text, p = page
    figures = re.findall(r'<figure class="plot risk-plot">(.*?)</figure>', text, re.S)
    assert len(figures) == 1  # every task here is GSM8K
    (fig,) = figures
    assert "<figcaption>GSM8K" in fig and re.search(r"<svg [^>]*viewBox", fig)
    ids = re.findall(r' id="([^"]+)"', fig)
    assert ids and all(i.startswith("rc0-") for i in ids)
    refs = re.findall(r'href="#([^"]+)"|url\(#([^)]+)\)', fig)
    assert refs and all((a or b) in ids for a, b in refs)
    assert "http" not in fig and "<script" not in fig and "<style" not in fig
    page_ids = Counter(a["id"] for _, a in p.tags if a.get("id"))
    assert [i for i, n in page_ids.items() if n > 1] == []


def test_curves_are_drawn_for_methods_that_rank_their_tasks():
    """verimap has checks, sc records a vote share, react has neither: its curve would be the
    single point "answer all", which the accuracy column says already."""

    def rec(method, bench, i, correct, verified, conf=None):
        meta = {} if conf is None else {"confidence": conf}
        return {
            "key": f"r0/{bench}/{i}",
            "run": 0,
            "task_id": f"{bench}/{i}",
            "benchmark": bench,
            "method": method,
            "correct": correct,
            "verified": verified,
            "meta": meta,
        }

    recs = []
    for bench in ("humaneval", "gsm8k"):
        for i in range(4):
            recs.append(rec("verimap", bench, i, i != 1, i < 2))
            recs.append(rec("react", bench, i, i < 3, True))
            recs.append(rec("sc", bench, i, i < 2, False, conf=[1.0, 0.6, 0.6, 0.2][i]))
    plots = risk_plots(recs)
    assert [p.benchmark for p in plots] == ["GSM8K", "HumanEval"]
    for p in plots:
        assert [c.method for c in p.curves] == ["verimap", "sc"]
        verimap = p.curves[0]
        # verified first: tasks 0 (right) and 1 (wrong), then 2 and 3 (right)
        assert (verimap.coverage, verimap.risk) == ([0.5, 1.0], [0.5, 0.25])
        sc = [x for x in recs if x["method"] == "sc" and x["benchmark"] == "gsm8k"]
        points = stats.risk_coverage_curve(sc)[1:]
        assert p.curves[1].coverage == [q.coverage for q in points] == [0.25, 0.75, 1.0]
        assert p.curves[1].risk == [q.risk for q in points]
    assert {c.colour for p in plots for c in p.curves if c.method == "sc"} == {1}


def test_hostile_method_and_benchmark_names_stay_text(tmp_path: Path):
    need_dot()
    d = tmp_path / "run"
    d.mkdir()
    lines = [
        {
            "key": f"r0/x/{i}",
            "run": 0,
            "task_id": f"x/{i}",
            "benchmark": NASTY,
            "method": NASTY,
            "correct": i % 2 == 0,
            "verified": i < 3,
            "meta": {"confidence": i / 4},
        }
        for i in range(4)
    ]
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    text = write_report([d], tmp_path / "r.html").read_text()
    p = Page(text)
    assert PWN not in text and "<!-- <img" not in text and "]]>" not in text
    assert len(p.all("script")) == 1 and not p.all("img") and not p.all("textarea")
    assert not [k for _, a in p.tags for k in a if k.startswith("on")]
    assert NASTY in p.body_text  # the summary row and the plot's caption, as text
    (row,) = _rows(text, "summary")
    assert row[0] == NASTY and row[4:8] == ["3", "66.7 [20.8, 93.9]", "75.0", "1 / 0"]
    assert text.count('<figure class="plot risk-plot">') == 1


def test_a_bar_or_a_newline_in_a_name_stays_in_its_cell(tmp_path: Path):
    need_dot()
    d = tmp_path / "run"
    d.mkdir()
    rec = {
        "key": "r0/x/0",
        "run": 0,
        "task_id": "x/0",
        "benchmark": "b|x",
        "method": "m|a\nb",
        "correct": True,
        "verified": True,
    }
    (d / "results.jsonl").write_text(json.dumps(rec) + "\n")
    text = write_report([d], tmp_path / "r.html").read_text()
    (row,) = _rows(text, "summary")
    assert row[:3] == ["m|a\\nb", "b|x", "1"]


def test_sanitize_gives_kept_ids_and_their_references_a_prefix():
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
        '<defs><path id="m1" d="M 0 0"/><clipPath id="p1"><rect width="1"/></clipPath></defs>'
        '<use xlink:href="#m1"/><g clip-path="url(#p1)" style="fill: url(\'#p1\')"/>'
        '<use href="https://example.com/x.svg#m1"/></svg>'
    )
    out = sanitize_svg(svg, keep_ids=True, id_prefix="rc3-")
    assert 'id="rc3-m1"' in out and 'id="rc3-p1"' in out and 'href="#rc3-m1"' in out
    assert 'clip-path="url(#rc3-p1)"' in out and "url(#rc3-p1)" in out.split("style=")[1]
    assert "example.com" not in out and out.count("href") == 1
    assert 'id="m1"' in sanitize_svg(svg, keep_ids=True)
