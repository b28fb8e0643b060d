import base64
import hashlib
import json
import re
from collections import Counter

import pytest

from verimap.view import ViewError, build_report, default_output, write_report
from verimap.view.report import classify

from .conftest import HOSTILE, HUGE, PWN, Page, events, need_dot, records


@pytest.fixture(scope="module")
def page(report_file) -> tuple[str, Page]:
    need_dot()
    text = report_file.read_text(encoding="utf-8")
    return text, Page(text)


def test_every_task_has_a_row_a_section_and_a_dag(page, oracle_dirs, hostile_dir):
    text, p = page
    recs = [r for d in [*oracle_dirs, hostile_dir] for r in records(d)]
    rows = [a for t, a in p.tags if t == "tr" and "data-correct" in a]
    assert len(rows) == len(recs) == 14
    assert Counter(r["data-method"] for r in rows) == {"verimap": 8, "react": 6}
    assert sum(r["data-correct"] == "0" for r in rows) == sum(not r["correct"] for r in recs)
    links = {a["href"] for t, a in p.tags if t == "a" and (a.get("href") or "").startswith("#t")}
    sections = [a["id"] for t, a in p.tags if t == "details" and a.get("class") == "task"]
    assert len(sections) == 14 and {f"#{s}" for s in sections} <= links
    assert text.count('<div class="dag"') >= 14
    assert len(p.all("svg")) >= 15  # the DAGs and the plot


def test_paper_tables_and_the_scatter_come_from_the_report_module(page):
    text, p = page
    for title in (
        "paper Table 1",
        "paper Table 7",
        "paper Table 3",
        "paper Table 4",
        "paper Fig. 2",
    ):
        assert title in text
    body = p.body_text
    assert "GSM8K" in body and "False positives" in body and "Python VFs" in body
    assert re.search(r'<div class="plot"><svg [^>]*viewBox', text)


def test_every_verdict_of_every_trace_is_shown(page, oracle_dirs, hostile_dir):
    _, p = page
    shown = Counter(
        (a["data-vf"], a["data-outcome"]) for t, a in p.tags if t == "tr" and "data-vf" in a
    )
    expected: Counter = Counter()
    for d in [*oracle_dirs, hostile_dir]:
        for rec in records(d):
            for e in events(d / rec["trace"]):
                if e["type"] == "vf_verdict":
                    expected[(e["data"]["name"], e["data"]["outcome"])] += 1
    assert shown == expected and {o for _, o in expected} >= {"PASS", "FAIL", "SKIPPED"}


def test_hostile_text_is_only_ever_text(page):
    text, p = page
    assert len(p.all("script")) == 1 and len(p.scripts) == 1
    assert "pwned" not in p.scripts[0]
    for bad in ("textarea", "img", "iframe", "object", "embed", "foreignobject", "base", "form"):
        assert not p.all(bad), bad
    assert not [k for _, a in p.tags for k in a if k.startswith("on")]
    assert PWN not in text and "</textarea>" not in text and "]]>" not in text
    assert "<!-- <img" not in text
    assert PWN in p.body_text and "]]></textarea><!--" in p.body_text
    assert HOSTILE.split("\n")[0] in p.body_text


def test_huge_outputs_are_cut_with_a_note(page, report_file):
    text, p = page
    assert "A" * HUGE not in text and "A" * 9_000 in p.body_text
    assert re.search(r"\[[\d,]+ more characters not shown\]", p.body_text)
    assert report_file.stat().st_size < 2_000_000


def test_nothing_is_fetched_and_only_the_pinned_script_runs(page):
    _, p = page
    for tag, attrs in p.tags:
        for k in ("src", "href", "action", "data", "poster", "xlink:href"):
            v = attrs.get(k)
            assert v is None or not re.match(r"\s*(https?:|//|javascript:)", v, re.I), (tag, k, v)
        assert "src" not in attrs or tag not in ("script", "img", "iframe")
    (csp,) = [
        a["content"] for a in p.all("meta") if a.get("http-equiv") == "Content-Security-Policy"
    ]
    digest = base64.b64encode(hashlib.sha256(p.scripts[0].encode()).digest()).decode()
    assert "default-src 'none'" in csp and f"'sha256-{digest}'" in csp
    assert [a["href"] for a in p.all("link")] == ["data:,"]


def test_filters_cover_outcome_verification_and_method(page):
    _, p = page
    assert {a["id"] for t, a in p.tags if t == "select"} >= {"f-correct", "f-verified", "f-method"}
    methods = [
        a["value"] for t, a in p.tags if t == "option" and a.get("value") in ("verimap", "react")
    ]
    assert sorted(methods) == ["react", "verimap"]


def test_a_single_trace_gets_its_run_and_default_output_beside_it(hostile_dir, tmp_path):
    need_dot()
    trace = sorted((hostile_dir / "traces").rglob("*.jsonl"))[0]
    copy = tmp_path / trace.name
    copy.write_bytes(trace.read_bytes())
    out = write_report([copy])
    assert out == tmp_path / (trace.stem + ".html") == default_output([copy])
    p = Page(out.read_text())
    assert not p.all("tr", **{"data-correct": "1"}) and p.all("svg")
    assert (
        "iteration 2: replan" in p.body_text
        and "what changed from the previous plan" in p.body_text
    )


def test_inputs_are_classified_and_missing_traces_fall_back_to_the_plans(oracle_dirs, tmp_path):
    need_dot()
    d = tmp_path / "copy"
    d.mkdir()
    for name in ("config.json", "results.jsonl"):
        (d / name).write_bytes((oracle_dirs[0] / name).read_bytes())
    rec = json.loads((d / "results.jsonl").read_text().splitlines()[0])
    rec["key"], rec["trace"] = "r0/evil", "../../../../etc/passwd"
    with (d / "results.jsonl").open("a") as f:
        f.write(json.dumps(rec) + "\n")
    assert classify([tmp_path]) == ([d], [])
    assert classify([d / "results.jsonl"]) == ([d], [])
    report = build_report([d])
    notes = [n for t in report.tasks for n in t.run.problems]
    assert sum("no trace at" in n for n in notes) == 6
    assert sum("outside the run directory" in n for n in notes) == 1
    assert all(t.run.iterations and t.run.iterations[0].svg for t in report.tasks)
    assert default_output([d]) == d / "report.html"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ViewError, match="neither a trace"):
        classify([tmp_path / "empty"])
    with pytest.raises(ViewError, match="no such file"):
        classify([tmp_path / "missing"])


def test_a_task_of_one_method_in_two_directories_is_flagged(oracle_dirs, tmp_path):
    """The page pools its directories into one row per method, as `eval report` does, so a
    rerun of the same tasks beside the run counts each task twice: the page still shows both
    runs' tasks (looking at a rerun is what it is for) and says so among its problems."""
    need_dot()
    rerun = tmp_path / "rerun"
    rerun.mkdir()
    for name in ("config.json", "results.jsonl"):
        (rerun / name).write_bytes((oracle_dirs[0] / name).read_bytes())
    report = build_report([oracle_dirs[0], rerun])
    assert len(report.tasks) == 2 * len(records(oracle_dirs[0]))
    flagged = [p for p in report.problems if "so the tables count it twice" in p]
    assert len(flagged) == 1 and flagged[0].startswith(f"{rerun}: task r0/")
    assert not [p for p in build_report([oracle_dirs[0]]).problems if "twice" in p]


def test_hostile_node_ids_from_a_hand_written_trace_stay_text(tmp_path):
    # Plans from the runner always have identifier ids; an edited or foreign trace may not.
    need_dot()
    bad = f"{PWN}]]>"
    plan = {
        "nodes": [
            {"id": bad, "name": HOSTILE, "instruction": "i", "outputs": ["x"]},
            {"id": "b", "instruction": "j", "inputs": [f"{bad}.x"], "outputs": ["y"]},
        ]
    }
    evs = [
        {"type": "run_start", "run_id": PWN, "data": {"task": HOSTILE}},
        {"type": "plan", "run_id": PWN, "iteration": 1, "data": {"plan": plan}},
        {"type": "node_start", "run_id": PWN, "iteration": 1, "node_id": bad, "data": {}},
        {
            "type": "vf_verdict",
            "run_id": PWN,
            "iteration": 1,
            "node_id": bad,
            "attempt": 1,
            "data": {"name": bad, "type": "python", "outcome": bad, "traceback": HOSTILE},
        },
    ]
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps(e) for e in evs))
    text = write_report([trace]).read_text()
    p = Page(text)
    assert len(p.all("script")) == 1 and PWN not in text and "]]>" not in text
    assert p.body_text.count(PWN) >= 4 and p.all("a", href="#r0-i1-n0")
    assert p.all("tr", **{"data-vf": bad, "data-outcome": bad})


def test_stopped_retries_are_said_once_after_the_attempts(tmp_path):
    need_dot()
    evs = [
        {"type": "run_start", "run_id": "x", "data": {"task": "t"}},
        {
            "type": "attempt",
            "run_id": "x",
            "iteration": 1,
            "node_id": "a",
            "attempt": 1,
            "data": {},
        },
        {
            "type": "retries_stopped",
            "run_id": "x",
            "iteration": 1,
            "node_id": "a",
            "attempt": 1,
            "data": {"reason": HOSTILE},
        },
    ]
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps(e) for e in evs))
    text = write_report([trace]).read_text()
    p = Page(text)
    assert f"no more retries after attempt 1: {HOSTILE}" in p.body_text
    assert "event retries_stopped" not in p.body_text and PWN not in text


def test_only_errors_no_resume_has_scored_yet_are_counted(oracle_dirs, tmp_path):
    import shutil

    from verimap.view.report import _load_records

    d = tmp_path / "run"
    shutil.copytree(oracle_dirs[0], d)
    scored = records(d)[0]["key"]
    lines = [
        {"key": scored, "task_id": "x", "error": "old outage"},
        {"key": "r9/never-scored", "task_id": "y", "error": "endpoint down"},
    ]
    (d / "errors.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    src, _ = _load_records(d, 10_000)
    assert src.errors == 1


def test_model_and_tool_calls_are_shown_per_attempt_and_stay_text(page, oracle_dirs, tmp_path):
    _, p = page
    calls = sum(
        1
        for d in oracle_dirs
        for t in (d / "traces").rglob("*.jsonl")
        for e in events(t)
        if e["type"] == "model_call" and e.get("attempt")
    )
    assert calls and len(p.all("tr", **{"class": "model-call"})) >= calls
    evs = [
        {"type": "run_start", "run_id": "r", "data": {"task": "t"}},
        {
            "type": "plan",
            "run_id": "r",
            "iteration": 1,
            "data": {"plan": {"nodes": [{"id": "a", "instruction": "i", "outputs": ["x"]}]}},
        },
        {
            "type": "model_call",
            "run_id": "r",
            "iteration": 1,
            "data": {
                "role": "planner",
                "model": PWN,
                "provider": "openai",
                "prompt_tokens": 7,
                "completion_tokens": 3,
            },
        },
        {
            "type": "tool_call",
            "run_id": "r",
            "iteration": 1,
            "node_id": "a",
            "attempt": 1,
            "data": {"tool": "python", "arguments": HOSTILE, "result": PWN, "duration_s": 0.25},
        },
        {
            "type": "model_call",
            "run_id": "r",
            "iteration": 1,
            "node_id": "a",
            "attempt": 1,
            "data": {
                "role": "executor",
                "model": "m",
                "provider": "openai",
                "prompt_tokens": 11,
                "cached_tokens": 5,
                "completion_tokens": 2,
                "duration_s": 1.5,
                "finish_reason": "stop",
            },
        },
    ]
    trace = tmp_path / "calls.jsonl"
    trace.write_text("\n".join(json.dumps(e) for e in evs))
    out = write_report([trace]).read_text()
    q = Page(out)
    assert len(q.all("tr", **{"class": "tool-call"})) == 1 and len(q.all("script")) == 1
    assert len(q.all("tr", **{"class": "model-call"})) == 2 and PWN not in out
    assert "11 (5)" in q.body_text and "0.25 s" in q.body_text and PWN in q.body_text
