import importlib.util
import re

import pytest

from verimap.view import svg as svgmod
from verimap.view.svg import Dag, DagNode, Point, ViewError, dag_dot, render_dags, sanitize_svg

from .conftest import HOSTILE, PWN, Page, need, need_dot

EVIL_SVG = """<?xml version="1.0"?>
<!DOCTYPE svg [<!ENTITY x "boom">]>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" onload="alert(1)" width="10">
<!-- a comment with </svg><script>alert(2)</script> -->
<script>alert(3)</script>
<foreignObject><div>html</div></foreignObject>
<style>@import url(http://evil.example/x.css);</style>
<a xlink:href="javascript:alert(4)"><text x="1">link &lt;b&gt;</text></a>
<a href="#ok"><text>local</text></a>
<image href="http://evil.example/i.png"/>
<use xlink:href="http://evil.example/s.svg#a"/>
<use xlink:href="#glyph-1"/>
<rect fill="url(http://evil.example/p)" style="fill: url(#grad)" id="keep" onclick="alert(5)"/>
<g clip-path="url(#c1)"><title>n0</title><title>drop me</title></g>
</svg>"""


def test_sanitizer_keeps_drawing_and_drops_everything_active():
    out = sanitize_svg(EVIL_SVG, titles={"n0": "node <zero>"})
    page = Page(out)
    tags = {t for t, _ in page.tags}
    assert tags <= {"svg", "g", "text", "a", "use", "rect", "title"}
    assert "script" not in out and "alert" not in out and "evil" not in out
    assert not any(k.startswith("on") for _, a in page.tags for k in a)
    assert page.all("a", href="#ok") and page.all("use", href="#glyph-1")
    assert page.all("rect")[0] == {"style": "fill: url(#grad)"}  # id dropped, bad fill dropped
    assert "link <b>" in page.body_text and "node <zero>" in page.body_text
    assert "drop me" not in out and "n0" not in page.body_text
    assert "http" not in out
    assert sanitize_svg(EVIL_SVG, keep_ids=True).count('id="keep"') == 1


def test_sanitizer_refuses_what_is_not_svg():
    with pytest.raises(ViewError):
        sanitize_svg("<html><script>alert(1)</script></html>")
    with pytest.raises(ViewError):
        sanitize_svg("<svg><unclosed></svg>")


NODE_STMT = re.compile(
    r'  n\d+ \[label="(?:[^"\\]|\\.)*", fillcolor="#[0-9a-f]{6}", color="#[0-9a-f]{6}", '
    r'href="#[\w-]+"(?:, style="[a-z,]+")?(?:, peripheries=2)?\];'
)


def test_dot_source_never_uses_plan_text_as_identifiers():
    dag = Dag(
        [
            DagNode(HOSTILE, HOSTILE, "failed", "t0-i1-n0"),
            DagNode("b", "B", "verified", "t0-i1-n1", final=True),
        ],
        [(HOSTILE, "b"), ("b", "nowhere")],
    )
    lines = dag_dot(dag, "g0").splitlines()
    nodes = [ln for ln in lines if re.match(r"  n\d", ln) and "->" not in ln]
    assert len(nodes) == 2 and all(NODE_STMT.fullmatch(ln) for ln in nodes)
    assert [ln for ln in lines if "->" in ln] == ["  n0 -> n1;"]
    assert '\\"];' in nodes[0]  # the quote inside the label is escaped
    src = dag_dot(Dag([DagNode("a", "x\\N &lt;", "verified", "a")]), "g1")
    assert 'label="a\\nx\\\\N &amp;lt;' in src  # dot reads no \N escape and no entity in it


def test_render_dags_lays_out_each_graph_once_and_inline_safe():
    need_dot()
    dags = [
        Dag(
            [
                DagNode(HOSTILE, HOSTILE, "failed", f"t{i}-n0"),
                DagNode("b", "B", "verified", f"t{i}-n1", final=True),
            ],
            [(HOSTILE, "b")],
        )
        for i in range(30)
    ]
    svgs = render_dags(dags)
    assert len(svgs) == 30
    for i, s in enumerate(svgs):
        page = Page(s)
        assert (
            page.all("svg") and page.all("a", href=f"#t{i}-n0") and page.all("a", href=f"#t{i}-n1")
        )
        assert PWN not in s and "<script" not in s and "<!--" not in s and "id=" not in s
        assert PWN[:20] in page.body_text  # shortened, shown as text
        assert "#ffcdd2" in s and "#c8e6c9" in s  # failed / verified fills, as in picture.py


def test_missing_dot_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(svgmod.shutil, "which", lambda name: None)
    with pytest.raises(ViewError, match="apt-get install graphviz"):
        render_dags([Dag([DagNode("a", "", "verified", "x")])])


def test_scatter_is_an_inline_svg_without_references_outside():
    need(importlib.util.find_spec("matplotlib") is not None, "matplotlib is not installed")
    pts = [
        Point("verimap", "GSM8K", 80.0, 0.0, 5000.0),
        Point(f"$x$ {PWN}", "HumanEval", 40.0, 0.0, 1200.0),
    ]
    out = svgmod.scatter_svg(pts)
    page = Page(out)
    assert page.all("svg") and "<script" not in out and "http" not in out
    assert all((a.get("href") or "#").startswith("#") for _, a in page.tags)
    assert svgmod.scatter_svg([]) == ""
