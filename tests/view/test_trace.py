import json

from verimap.observe.trace_files import clip_deep, clip_text, read_events
from verimap.view.trace import build_run, load_run, run_from_plans

from .conftest import HOSTILE, HUGE, events


def _trace(d):
    return sorted((d / "traces").rglob("*.jsonl"))[0]


def test_hostile_run_folds_into_iterations_nodes_and_attempts(hostile_dir):
    run = load_run(_trace(hostile_dir), "t0", max_chars=1000)
    assert run.status == "success" and run.n_iterations == 2 and run.retries == 2
    first, second = run.iterations
    assert first.kind == "plan" and second.kind == "replan"
    assert second.replan["failed_node"] == "answer"
    assert {n.id: n.status for n in first.nodes.values()} == {
        "extract": "verified",
        "answer": "failed",
    }
    assert {n.id: n.status for n in second.nodes.values()} == {
        "extract": "reused",
        "answer": "verified",
    }
    extract = first.nodes["extract"]
    assert [a.passed for a in extract.attempts] == [False, True]
    fail, skipped = extract.attempts[0].verdicts
    assert (fail.name, fail.outcome, skipped.outcome) == ("positive", "FAIL", "SKIPPED")
    assert fail.check.startswith("assert outputs['n'] > 0")  # the VF's code, from the plan
    assert HOSTILE in fail.message
    assert extract.attempts[1].feedback["failures"][0]["name"] == "positive"
    judged = extract.attempts[1].verdicts[1]
    assert judged.type == "llm" and judged.check.startswith("The count is right")
    assert all(a.seconds is not None for a in extract.attempts)
    assert extract.final is False and first.nodes["answer"].final is True
    assert first.edges == [("extract", "answer")]
    assert run.usage["planner"]["calls"] >= 2


def test_replan_diff_shows_the_changed_instruction(hostile_dir):
    run = load_run(_trace(hostile_dir), "t0")
    first, second = run.iterations
    assert first.diff == []
    changed = [(k, line) for k, line in second.diff if k in ("add", "del")]
    assert changed == [
        ("del", '-      "instruction": "Give the answer.",'),
        ("add", '+      "instruction": "Give the answer, briefly.",'),
    ]


def test_every_string_is_clipped_with_a_note(hostile_dir):
    run = load_run(_trace(hostile_dir), "t0", max_chars=500)
    out = run.iterations[0].nodes["answer"].attempts[0].outputs["answer"]
    assert len(out) < 600 and f"[{HUGE + len(HOSTILE) - 500:,} more characters not shown]" in out
    assert clip_text("abc", 3) == "abc"
    assert clip_deep({"k" * 5: ["x" * 5]}, 2) == {
        "kk\n… [3 more characters not shown]": ["xx\n… [3 more characters not shown]"]
    }


def test_torn_and_foreign_lines_are_skipped_with_a_note(tmp_path, hostile_dir):
    lines = _trace(hostile_dir).read_text().splitlines()
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join([*lines[:6], "[1, 2]", "not json", '{"type": "tool_call", "run_id']))
    evs, problems = read_events(p)
    assert len(evs) == 6 and len(problems) == 3
    run = load_run(p, "r0")
    assert run.status == "unfinished" and len(run.problems) == 3
    # a node started and never finished (the run was cut) is `running`, not skipped
    assert run.iterations[0].nodes["extract"].status == "running"
    assert run.iterations[0].nodes["answer"].status == "pending"


def test_unknown_events_are_kept_where_they_belong():
    evs = [
        {"type": "run_start", "run_id": "x", "data": {"task": "t"}},
        {"type": "bare_reply", "run_id": "x", "data": {"reply": "hi"}},
        {
            "type": "tool_call",
            "run_id": "x",
            "node_id": "a",
            "iteration": 1,
            "attempt": 2,
            "data": {"tool": "calculator"},
        },
        {
            "type": "new_kind",
            "run_id": "x",
            "node_id": "a",
            "iteration": 1,
            "attempt": 2,
            "data": {"k": 1},
        },
    ]
    run = build_run(evs, "r0")
    assert run.other[0]["type"] == "bare_reply"
    node = run.iterations[0].nodes["a"]
    assert not node.in_plan and node.attempts[0].number == 2
    assert node.attempts[0].tool_calls == [{"tool": "calculator"}]
    assert node.attempts[0].other[0]["data"] == {"k": 1}


def test_plans_of_a_record_without_its_trace(oracle_dirs):
    d = oracle_dirs[0]
    rec = json.loads((d / "results.jsonl").read_text().splitlines()[0])
    run = run_from_plans(rec["plans"], "t9", note="no trace")
    assert run.source == "record" and run.problems == ["no trace"]
    assert [n.status for n in run.iterations[0].nodes.values()] == ["pending"]


def test_oracle_trace_has_what_the_runner_recorded(oracle_dirs):
    d = oracle_dirs[0]
    for line in (d / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        run = load_run(d / rec["trace"], "t0")
        verdicts = [
            v
            for it in run.iterations
            for n in it.nodes.values()
            for a in n.attempts
            for v in a.verdicts
        ]
        raw = [e for e in events(d / rec["trace"]) if e["type"] == "vf_verdict"]
        assert [(v.name, v.outcome) for v in verdicts] == [
            (e["data"]["name"], e["data"]["outcome"]) for e in raw
        ]
        assert run.status == rec["status"]


def test_read_events_clips_long_lines_only_and_load_run_matches_build_run(tmp_path):
    short = {"type": "note", "data": {"text": "x" * 10}}
    long = {"type": "note", "data": {"text": "y" * 500, "k" * 300: 1}}
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(short) + "\n" + json.dumps(long) + "\n")
    evs, problems = read_events(p, clip=100)
    assert not problems and evs[0] == short
    assert evs[1] == clip_deep(long, 100) != long
    assert len(evs[1]["data"]["text"]) < 200
    unclipped, _ = read_events(p)
    assert unclipped[1] == long
    via_load = load_run(p, "r0", max_chars=100)
    via_build = build_run(unclipped, "r0", max_chars=100, path=str(p))
    assert via_load.other == via_build.other


def test_pretty_reads_like_indented_json_with_or_without_orjson(monkeypatch):
    from verimap.view import model as trace

    obj = {"a": [1, 2.5, None, True], "é": {"n": "ünï"}, "big": 2**70}
    fast = trace.pretty(obj)
    monkeypatch.setattr(trace, "orjson", None)
    slow = trace.pretty(obj)
    assert json.loads(fast) == json.loads(slow) == obj
    assert "ünï" in fast and '\n  "a": [' in fast and trace.pretty("plain") == "plain"


def test_stopped_retries_belong_to_the_node_not_to_an_attempt():
    evs = [
        {"type": "run_start", "run_id": "x", "data": {"task": "t"}},
        {
            "type": "attempt",
            "run_id": "x",
            "node_id": "a",
            "iteration": 1,
            "attempt": 1,
            "data": {},
        },
        {
            "type": "retries_stopped",
            "run_id": "x",
            "node_id": "a",
            "iteration": 1,
            "attempt": 1,
            "data": {"reason": "no answer is one vote short of confirmation"},
        },
    ]
    node = build_run(evs, "r0").iterations[0].nodes["a"]
    assert node.stopped == "no answer is one vote short of confirmation"
    assert node.stopped_after == 1
    assert not node.attempts[0].other and not node.other
