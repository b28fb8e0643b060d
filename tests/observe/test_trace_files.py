"""The one lenient reader of run files: good records kept, every bad line named file:line."""

import json
import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verimap.observe.trace_files import (
    EVENT,
    MAX_DEPTH,
    RESULT,
    clip_deep,
    read_events,
    read_json_object,
    read_jsonl,
    read_results,
    trace_path,
)

GOOD = {
    "key": "r0/gsm8k/0",
    "task_id": "gsm8k/0",
    "method": "verimap",
    "benchmark": "gsm8k",
    "run": 0,
    "correct": True,
    "usage": {"planner": {"prompt_tokens": 3, "cost": 0.5}},
}
DEEP = "[" * 5_000 + "]" * 5_000


def _line(obj) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def test_trace_paths_outside_the_run_directory_are_refused(tmp_path):
    (tmp_path / "traces").mkdir()
    assert trace_path(tmp_path, "traces/a.jsonl") == (tmp_path / "traces" / "a.jsonl").resolve()
    assert trace_path(tmp_path, "../../etc/passwd") is None
    assert trace_path(tmp_path, "/etc/passwd") is None
    assert trace_path(tmp_path, None) is None
    assert trace_path(tmp_path, "a\x00b") is None


def test_each_bad_results_line_is_named_and_the_rest_kept(tmp_path):
    p = tmp_path / "results.jsonl"
    bad = {
        2: b"\xff\xfe not utf-8\n",
        3: b"[1, 2]\n",
        4: _line({**GOOD, "key": None}),
        5: _line({k: v for k, v in GOOD.items() if k != "task_id"}),
        6: _line({**GOOD, "usage": [1, 2]}),
        7: _line({**GOOD, "usage": {"planner": ["x"]}}),
        8: _line({**GOOD, "meta": {"question_type": ["a"]}}),
        9: b'{"key": ' + b"1" * 5_000 + b"}\n",
        10: DEEP.encode() + b"\n",
        11: _line({**GOOD, "tokens": 10**30}),
        12: b"not json\n",
    }
    lines = [_line(GOOD), *(bad[n] for n in sorted(bad)), b"\n", _line({**GOOD, "key": "b"})]
    p.write_bytes(b"".join(lines))
    got = read_results(p)
    assert [r["key"] for r in got.records] == ["r0/gsm8k/0", "b"] and got.lines == [1, 14]
    assert [q.line for q in got.problems] == sorted(bad)
    for q in got.problems:
        assert str(q).startswith(f"{p}:{q.line}: ") and str(q).endswith("; skipped")
    reasons = {q.line: q.reason for q in got.problems}
    assert "not UTF-8" in reasons[2] and "not a JSON object (a list)" in reasons[3]
    assert "`key` is not a string" in reasons[4] and "has no `task_id`" in reasons[5]
    assert "`usage`" in reasons[6] and "`usage`" in reasons[7] and "`meta`" in reasons[8]
    assert "too long" in reasons[9] and f"deeper than {MAX_DEPTH}" in reasons[10]
    assert "`tokens` is not an integer" in reasons[11] and "not JSON" in reasons[12]
    assert not got.unterminated and got.torn_at is None


def test_a_torn_last_line_is_reported_and_a_complete_one_kept(tmp_path):
    p = tmp_path / "results.jsonl"
    whole = _line(GOOD)
    p.write_bytes(whole + whole[:20])
    got = read_results(p)
    assert len(got.records) == 1 and got.unterminated and got.torn_at == len(whole)
    assert "the last line, with no newline" in str(got.problems[0])
    p.write_bytes(whole + whole[:-1])
    got = read_results(p)
    assert len(got.records) == 2 and got.unterminated and got.torn_at is None
    assert not got.problems


def test_overlong_lines_are_skipped_without_reading_them_whole(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(
        _line({"type": "a"}) + b'{"type": "' + b"x" * 500 + b'"}\n' + _line({"type": "b"})
    )
    got = read_jsonl(p, EVENT, max_line=100)
    assert [e["type"] for e in got.records] == ["a", "b"] and got.lines == [1, 3]
    assert [str(q) for q in got.problems] == [f"{p}:2: longer than 100 bytes; skipped"]


def test_a_fifo_or_a_directory_is_named_not_waited_on(tmp_path):
    fifo = tmp_path / "results.jsonl"
    os.mkfifo(fifo)
    assert [str(q) for q in read_results(fifo).problems] == [
        f"{fifo}: cannot be read (not a regular file)"
    ]
    assert "not a regular file" in read_json_object(fifo)[1]
    assert "cannot be read" in str(read_results(tmp_path).problems[0])


def test_events_with_lists_where_mappings_belong_are_skipped(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(
        _line({"type": "plan", "data": [1]})
        + _line({"type": "plan", "iteration": "1"})
        + _line({"type": "finish", "ts": 1e300})
        + _line({"type": "finish", "data": {"usage": []}})
    )
    events, problems = read_events(p)
    assert [e["type"] for e in events] == ["finish"]
    assert [q.split(": ", 1)[0] for q in problems] == [f"{p}:1", f"{p}:2", f"{p}:3"]


def test_a_json_object_file_is_read_or_says_why(tmp_path):
    p = tmp_path / "config.json"
    for raw, why in [
        (b"[1]", "not a JSON object"),
        (b"\xff", "not UTF-8"),
        (DEEP.encode(), "deeper than"),
        (b"{", "not JSON"),
    ]:
        p.write_bytes(raw)
        assert read_json_object(p)[0] is None and why in read_json_object(p)[1]
        assert read_json_object(p)[1].startswith(f"{p}: ")
    p.write_text('{"models": {"planner": "m"}}')
    assert read_json_object(p) == ({"models": {"planner": "m"}}, None)
    assert "cannot be read" in read_json_object(tmp_path / "missing.json")[1]


def test_clip_deep_bounds_items_and_nodes_as_well_as_strings():
    many = clip_deep(["ab"] * 10_000, 1, max_items=5)
    assert many == ["a\n… [1 more characters not shown]"] * 5 + ["… [9,995 more items not shown]"]
    wide = clip_deep({str(i): i for i in range(300)}, 10, max_items=2)
    assert wide == {"0": 0, "1": 1, "…": "[298 more entries not shown]"}
    nested = clip_deep([[0] * 100] * 100, 10, max_items=100, max_nodes=500)
    assert sum(len(x) for x in nested if isinstance(x, list)) < 600


# -- property: whatever the bytes, no exception, and every line accounted for -----------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4)
    ),
    max_leaves=12,
)
_record = st.fixed_dictionaries(
    {
        "key": st.text(max_size=5),
        "task_id": st.text(max_size=5),
        "method": st.just("m"),
        "benchmark": st.just("b"),
        "run": st.integers(0, 3),
        "correct": st.booleans(),
    },
    optional={"usage": _json, "plans": _json, "meta": _json, "tokens": _json, "trace": _json},
)
_event = st.fixed_dictionaries(
    {"type": st.sampled_from(["plan", "node_start", "vf_verdict", "finish", "x"])},
    optional={"data": _json, "node_id": _json, "iteration": _json, "attempt": _json},
)
LINE = st.one_of(
    _json.map(lambda v: json.dumps(v).encode()),
    _record.map(lambda v: json.dumps(v).encode()),
    _event.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
    st.integers(1, 3 * MAX_DEPTH).map(lambda d: b"[" * d + b"]" * d),
    st.integers(1, 3 * MAX_DEPTH).map(lambda d: b'{"a":' * d + b"1" + b"}" * d),
    st.sampled_from([DEEP.encode(), b'{"type": "x", "data": {"a": ' + DEEP.encode() + b"}}"]),
)
FILE = st.tuples(st.lists(LINE, max_size=12), st.booleans())


def _bytes(lines: list[bytes], newline_at_end: bool) -> bytes:
    return b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(FILE)
def test_any_bytes_give_records_or_named_problems_never_an_exception(tmp_path, file):
    lines, newline_at_end = file
    p = tmp_path / "results.jsonl"
    p.write_bytes(_bytes(lines, newline_at_end))
    for shape in (RESULT, EVENT):
        got = read_jsonl(p, shape, clip=50)
        nonblank = {n for n, raw in enumerate(lines, 1) if raw.strip()}
        bad = {q.line for q in got.problems}
        assert set(got.lines) | bad == nonblank and not set(got.lines) & bad
        assert all(
            re.match(rf"{re.escape(str(p))}:{q.line}: .+; skipped$", str(q)) for q in got.problems
        )
        assert all(isinstance(r, dict) for r in got.records)
