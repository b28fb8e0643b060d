"""`verimap view` on files no verimap run wrote: torn, foreign, hostile or huge.

Every line that cannot be read is skipped and named (file:line) on stderr and on the page,
and the rest renders; plans too big or too slow to lay out are listed instead of drawn; and
the page stays small however many items the inputs hold.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verimap.cli import main
from verimap.view import build_report, write_report

from .conftest import PWN, Page, need_dot, records

BAD_UTF8 = b'{"type": "note", "data": {"x": "\xff\xfe"}}\n'
DEEP = b"[" * 50_000 + b"]" * 50_000 + b"\n"


def _events(path: Path, evs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in evs))
    return path


def _run(evs: list[dict], run_id: str = "r") -> list[dict]:
    """`evs` between a run's start and finish."""
    start = {"type": "run_start", "run_id": run_id, "ts": 1.0, "data": {"task": "t"}}
    finish = {"type": "finish", "run_id": run_id, "ts": 2.0, "data": {"status": "success"}}
    return [start, *evs, finish]


@pytest.fixture
def messy_eval(oracle_dirs, tmp_path) -> tuple[Path, dict[Path, list[int]]]:
    """A copy of a real eval directory with bad lines in results.jsonl, errors.jsonl and a
    trace, and a config.json that is a list: the lines each file should be named with."""
    need_dot()
    d = tmp_path / "run"
    shutil.copytree(oracle_dirs[0], d)
    results = (d / "results.jsonl").read_bytes().splitlines(keepends=True)
    extra = [
        b"\xff\xfe\n",
        b"[1, 2]\n",
        b'{"task_id": "x"}\n',
        DEEP,
        json.dumps({**json.loads(results[0]), "key": "r0/y", "usage": [1]}).encode() + b"\n",
    ]
    (d / "results.jsonl").write_bytes(b"".join([results[0], *extra, *results[1:]]))
    (d / "errors.jsonl").write_bytes(b"\xff\n")
    trace = d / json.loads(results[0])["trace"]
    lines = trace.read_bytes().splitlines(keepends=True)
    trace.write_bytes(
        b"".join([lines[0], BAD_UTF8, b'{"type": "plan", "data": [1]}\n', *lines[1:]])
    )
    (d / "config.json").write_text("[1, 2]")
    named = {d / "results.jsonl": [2, 3, 4, 5, 6], d / "errors.jsonl": [1], trace: [2, 3]}
    return d, named


def test_view_skips_and_names_every_bad_line_and_renders_the_rest(messy_eval, oracle_dirs):
    d, named = messy_eval
    r = CliRunner().invoke(main, ["view", str(d)])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    for path, lines in named.items():
        for n in lines:
            assert f"skipped: {path}:{n}: " in r.stderr
    assert f"skipped: {d / 'config.json'}: not a JSON object" in r.stderr
    p = Page((d / "report.html").read_text())
    rows = [a for t, a in p.tags if t == "tr" and "data-correct" in a]
    assert len(rows) == len(records(oracle_dirs[0]))
    for path, lines in named.items():
        for n in lines:
            assert f"{path}:{n}: " in p.body_text
    # the trace with bad lines still shows its run, its verdicts and its plan
    assert p.all("tr", **{"class": "verdict"}) and p.all("svg")


def test_one_hostile_record_does_not_kill_the_report(tmp_path):
    """Valid events whose fields have every wrong shape: lists for mappings, strings for
    numbers, numbers for lists. Each used to raise from the fold or the template; now each is
    shown as it was recorded, saying which field did not validate."""
    need_dot()
    plan = {
        "nodes": [
            {"id": "a", "inputs": 5, "verification": 7, "outputs": ["x"]},
            {"id": ["b"], "name": {"n": 1}, "inputs": ["a.x"]},
            "junk",
        ],
        "edges": 3,
    }
    evs = _run(
        [
            {"type": "plan", "iteration": 1, "data": {"plan": plan}},
            {"type": "plan_invalid", "iteration": 1, "data": {"problems": 5, "reply": [1]}},
            {"type": "model_call", "data": {"role": "planner", "duration_s": "slow", "model": [1]}},
            {
                "type": "tool_call",
                "node_id": "a",
                "iteration": 1,
                "attempt": 1,
                "data": {"tool": {"x": 1}, "duration_s": [1], "arguments": None},
            },
            {
                "type": "vf_verdict",
                "node_id": "a",
                "iteration": 1,
                "attempt": 1,
                "data": {"name": [1], "outcome": {"o": 1}, "message": 5},
            },
            {
                "type": "attempt_result",
                "node_id": "a",
                "iteration": 1,
                "attempt": 1,
                "data": {"score": 10**300, "passed": "yes"},
            },
            {"type": "replan", "iteration": 2, "data": {"failed_node": [1], "failure": "x"}},
            {"type": "error", "data": {"error": {"e": 1}, "type": 5}},
        ]
    )
    evs[-1]["data"] = {
        "status": [1],
        "usage": {"roles": [1]},
        "iterations": "2",
        "wall_time_s": "x",
        "final_output": {"a": [PWN]},
    }
    trace = _events(tmp_path / "t.jsonl", evs)
    text = write_report([trace]).read_text()
    p = Page(text)
    for typ, key in (
        ("vf_verdict", "name"),
        ("tool_call", "tool"),
        ("model_call", "model"),
        ("plan_invalid", "problems"),
        ("replan", "failed_node"),
    ):
        assert f"a `{typ}` event that does not validate (`{key}`" in p.body_text
    assert not p.all("tr", **{"class": "verdict"}) and not p.all("tr", **{"class": "tool-call"})
    assert PWN not in text and PWN in p.body_text and len(p.all("script")) == 1


def _dense_plan(n: int) -> dict:
    """n nodes, each taking an input from every node before it: n(n-1)/2 edges."""
    return {
        "nodes": [
            {
                "id": f"n{i}",
                "instruction": "i",
                "outputs": ["x"],
                "inputs": [f"n{j}.x" for j in range(i)] or ["USER_TASK"],
            }
            for i in range(n)
        ]
    }


def test_a_dense_150_node_plan_is_listed_not_laid_out(tmp_path):
    """Laid out, it kept `dot` busy past its 120 s limit and the report failed; its replan's
    diff alone took difflib 8 s."""
    need_dot()
    replanned = _dense_plan(150)
    replanned["nodes"][0]["instruction"] = "again"
    trace = _events(
        tmp_path / "t.jsonl",
        _run(
            [
                {"type": "plan", "iteration": 1, "data": {"plan": _dense_plan(150)}},
                {"type": "plan", "iteration": 2, "data": {"plan": replanned}},
            ]
        ),
    )
    t0 = time.monotonic()
    p = Page(write_report([trace]).read_text())
    assert time.monotonic() - t0 < 15
    assert "plan not drawn (150 nodes and 2,000 edges, past the 150 nodes" in p.body_text
    assert not p.all("svg") and "(not compared: the plans are" in p.body_text
    for it in (1, 2):
        links = [a for a in p.all("a") if (a.get("href") or "").startswith(f"#r0-i{it}-n")]
        assert len(links) == 150


def test_a_plan_dot_cannot_lay_out_in_time_is_listed(tmp_path, monkeypatch):
    need_dot()
    slow = tmp_path / "dot"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setattr("verimap.view.svg._dot_binary", lambda: str(slow))
    monkeypatch.setattr("verimap.view.svg.DOT_TIMEOUT", 1.0)
    monkeypatch.setattr("verimap.view.svg.DOT_TIMEOUT_ONE", 0.3)
    trace = _events(
        tmp_path / "t.jsonl",
        _run([{"type": "plan", "iteration": 1, "data": {"plan": _dense_plan(3)}}]),
    )
    t0 = time.monotonic()
    p = Page(write_report([trace]).read_text())
    assert time.monotonic() - t0 < 10
    assert "plan not drawn (Graphviz did not lay it out in time)" in p.body_text
    assert p.all("a", href="#r0-i1-n2")


def test_many_short_strings_make_a_small_page(tmp_path):
    """About 12 MB of short strings and tiny events, in every shape a trace allows: one
    output holding 600,000 strings, 60,000 tool calls of one attempt, 20,000 nodes that no
    plan declares, 5,000 iterations. The page says what it left out and stays small."""
    need_dot()
    at = {"node_id": "a", "iteration": 1, "attempt": 1}
    evs = _run(
        [
            {"type": "plan", "iteration": 1, "data": {"plan": _dense_plan(2)}},
            {"type": "attempt_result", **at, "data": {"outputs": {"x": ["ab"] * 600_000}}},
            *(
                {"type": "tool_call", **at, "data": {"tool": "t", "result": "r"}}
                for _ in range(60_000)
            ),
            *({"type": "node_start", "node_id": f"x{i}", "iteration": 1} for i in range(20_000)),
            *({"type": "note", "iteration": i, "node_id": "a"} for i in range(2, 5_000)),
        ]
    )
    trace = _events(tmp_path / "t.jsonl", evs)
    size_in = trace.stat().st_size
    out = write_report([trace])
    text = out.read_text()
    assert size_in > 10e6 and out.stat().st_size < 2e6, out.stat().st_size
    body = Page(text).body_text
    assert "… [599,800 more items not shown]" in text
    assert "more tool calls not shown" in body and "more events of this trace not shown" in body


def test_a_results_file_of_many_tasks_lists_the_first_and_counts_all(
    oracle_dirs, tmp_path, monkeypatch
):
    need_dot()
    monkeypatch.setattr("verimap.view.report.MAX_TASKS", 2)
    report = build_report([oracle_dirs[0]])
    assert len(report.tasks) == 2 and report.hidden_tasks == len(records(oracle_dirs[0])) - 2
    assert report.tables[0].rows  # the tables count every task


# -- property: any lines into `verimap view` ---------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3)
    ),
    max_leaves=10,
)
_types = st.sampled_from(
    [
        "run_start",
        "plan",
        "plan_invalid",
        "node_start",
        "node_finish",
        "attempt",
        "retry",
        "vf_verdict",
        "attempt_result",
        "tool_call",
        "model_call",
        "replan",
        "plan_kept",
        "error",
        "finish",
        "other",
    ]
)
_event = st.fixed_dictionaries(
    {
        "type": _types,
        "data": st.dictionaries(
            st.sampled_from(
                [
                    "plan",
                    "problems",
                    "status",
                    "outputs",
                    "usage",
                    "name",
                    "feedback",
                    "duration_s",
                    "score",
                    "task",
                    "final_output",
                    "roles",
                ]
            ),
            _json,
        ),
    },
    optional={
        "node_id": st.sampled_from(["a", "b"]),
        "iteration": st.integers(0, 3),
        "attempt": st.integers(0, 3),
        "ts": st.floats(0, 10),
    },
)
# Bytes that are no good line whatever they say: not UTF-8, not an object, nested too deep.
_bad = st.one_of(
    st.binary(min_size=1, max_size=20).map(lambda b: b"\xff" + b.replace(b"\n", b"")),
    st.lists(_json, max_size=3).map(lambda v: json.dumps(v).encode()),
    st.integers(65, 3_000).map(lambda d: b"[" * d + b"]" * d),
)
_line = st.one_of(
    _bad.map(lambda b: (b, True)),
    _event.map(lambda e: (json.dumps(e).encode(), False)),
    _json.map(lambda v: (json.dumps(v).encode(), None)),
)
_record = st.fixed_dictionaries(
    {
        "key": st.text(min_size=1, max_size=4),
        "task_id": st.text(max_size=4),
        "method": st.sampled_from(["verimap", "react", PWN]),
        "benchmark": st.just("gsm8k"),
        "run": st.integers(0, 2),
        "correct": st.booleans(),
        "trace": st.just("t.jsonl"),
    },
    optional={"usage": _json, "plans": _json, "cost": _json, "verified": _json},
)
_result = st.one_of(
    _bad.map(lambda b: (b, True)), _record.map(lambda r: (json.dumps(r).encode(), None))
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    config=st.one_of(st.binary(max_size=30), _json.map(lambda v: json.dumps(v).encode())),
    results=st.lists(_result, max_size=6),
    trace=st.lists(_line, max_size=10),
)
def test_any_lines_into_view_give_a_page_naming_every_bad_line(
    tmp_path_factory, monkeypatch, config, results, trace
):
    need_dot()
    monkeypatch.setattr("verimap.view.report._points", lambda records: [])  # no plot: slow
    monkeypatch.setattr("verimap.view.report.risk_plots", lambda records: [])
    d = tmp_path_factory.mktemp("run")
    (d / "config.json").write_bytes(config)
    (d / "results.jsonl").write_bytes(b"".join(raw + b"\n" for raw, _ in results))
    (d / "t.jsonl").write_bytes(b"\n".join(raw for raw, _ in trace))
    warned: list[str] = []
    out = write_report([d, d / "t.jsonl"], d / "report.html", warn=warned.append)
    body = Page(out.read_text()).body_text
    must = [(d / "results.jsonl", n) for n, (_, bad) in enumerate(results, 1) if bad]
    must += [(d / "t.jsonl", n) for n, (_, bad) in enumerate(trace, 1) if bad]
    for path, n in must:
        assert any(w.startswith(f"{path}:{n}: ") for w in warned), (path, n, warned)
    for w in warned:
        assert w in body
    assert not any(
        w.startswith(f"{d / 't.jsonl'}:") and not w.split(":")[1].isdigit() for w in warned
    )
    assert os.path.getsize(out) < 5e6
