"""`verimap eval compare DIR_A DIR_B` on small hand-written eval directories."""

import json

from click.testing import CliRunner

from verimap.cli import main
from verimap.evals.runner import CONFIG, RESULTS, ResultsLog


def rec(method, i, correct, verified, *, bench="gsm8k", run=0):
    return {
        "key": f"r{run}/{bench}/{i}",
        "run": run,
        "task_id": f"{bench}/{i}",
        "benchmark": bench,
        "method": method,
        "status": "success" if verified else "failed",
        "correct": correct,
        "verified": verified,
    }


def write(d, records):
    d.mkdir(parents=True, exist_ok=True)
    log = ResultsLog(d / RESULTS)
    for r in records:
        log.append(r)
    return str(d)


def invoke(*args):
    return CliRunner().invoke(main, ["eval", "compare", *args], catch_exceptions=False)


def margin_dirs(tmp_path):
    """The issue's GSM8K margin: verimap wins 6, loses 3, 32 both right, 19 both wrong; it
    verifies the even tasks. react has one more task that verimap lacks."""
    a_right = [1] * 38 + [0] * 22
    b_right = [1] * 32 + [0] * 6 + [1] * 3 + [0] * 19
    a = [rec("verimap", i, bool(c), i % 2 == 0) for i, c in enumerate(a_right)]
    b = [rec("react", i, bool(c), True) for i, c in enumerate(b_right)]
    b.append(rec("react", 60, True, True))
    return write(tmp_path / "a", a), write(tmp_path / "b", b)


def test_text_report_of_the_issue_margin(tmp_path):
    a, b = margin_dirs(tmp_path)
    r = invoke(a, b)
    assert r.exit_code == 0, r.output
    out = r.output
    assert "common: 60 tasks; only in A: 0, only in B: 1 (left out)" in out
    assert "## GSM8K: 60 common tasks" in out
    assert "| accuracy [95% CI] | 63.3% (38/60) [50.7, 74.4] | 58.3% (35/60) [45.7, 69.9] |" in out
    # verimap verified 30, 19 of them right; react checks nothing although its records say so
    assert "| verified precision [95% CI] | 63.3% (19/30) [45.5, 78.1] | – (no checks) |" in out
    assert (
        "| coverage (share verified) [95% CI] | 50.0% (30/60) [37.7, 62.3] | – (no checks) |" in out
    )
    assert "| false positives / negatives | 11 / 19 | – (no checks) |" in out
    assert (
        "wins (A right, B wrong): 6; losses (A wrong, B right): 3; ties: 32 both right, 19 both wrong"
        in out
    )
    assert "exact McNemar p = 0.508 (on the 9 tasks where A and B disagree)" in out
    assert "accuracy difference A − B: +5.0 points, 95% CI [−" in out


def test_json_and_seeded_bootstrap(tmp_path):
    a, b = margin_dirs(tmp_path)
    first = json.loads(invoke(a, b, "--json").output)
    assert json.loads(invoke(a, b, "--json").output) == first
    assert (first["common"], first["only_a"], first["only_b"]) == (60, 0, 1)
    assert first["a"]["methods"] == ["verimap"] and first["b"]["methods"] == ["react"]
    (g,) = first["benchmarks"]
    c = g["comparison"]
    assert (c["wins"], c["losses"], c["n"]) == (6, 3, 60)
    assert c["p_value"] == 0.5078125
    assert c["ci"][0] < c["difference"] < c["ci"][1]
    assert g["verification_a"]["precision"]["k"] == 19 and g["verification_b"]["precision"] is None
    other = json.loads(invoke(a, b, "--json", "--seed", "7", "--resamples", "500").output)
    assert other["benchmarks"][0]["comparison"]["seed"] == 7


def test_benchmarks_and_runs_are_paired_separately(tmp_path):
    a = [rec("verimap", 0, True, True, run=r) for r in (0, 1)]
    a += [rec("verimap", 0, True, True, bench="humaneval")]
    b = [rec("map-v", 0, False, False, run=r) for r in (0, 1)]
    b += [rec("map-v", 0, True, True, bench="humaneval")]
    da, db = write(tmp_path / "a", a), write(tmp_path / "b", b)
    out = invoke(da, db).output
    assert "## GSM8K: 2 common tasks" in out and "## HumanEval: 1 common tasks" in out
    assert "2 runs: each run of a task is paired with the same run" in out
    only = json.loads(invoke(da, db, "--json", "-b", "humaneval").output)
    assert [g["benchmark"] for g in only["benchmarks"]] == ["humaneval"]


def test_same_method_on_both_sides_is_labelled_by_directory(tmp_path):
    da = write(tmp_path / "old", [rec("verimap", 0, True, True)])
    db = write(tmp_path / "new", [rec("verimap", 0, False, True)])
    assert "| | A: old | B: new |" in invoke(da, db).output


def test_draws_pool_with_also_into_one_pairing(tmp_path):
    """Two draws of different tasks: the pooled pairing is the sum of the two, by hand."""
    right_a, right_b = [1, 1, 0, 1], [1, 0, 0, 0]  # draw 1: A wins 2, both right 1, both wrong 1
    draw1 = (
        write(
            tmp_path / "d1" / "a",
            [rec("verimap", i, bool(c), c == 1) for i, c in enumerate(right_a)],
        ),
        write(tmp_path / "d1" / "b", [rec("sc", i, bool(c), False) for i, c in enumerate(right_b)]),
    )
    draw2 = (  # tasks 10-12: A loses 3 (one A task has no B counterpart)
        write(tmp_path / "d2" / "a", [rec("verimap", i, False, False) for i in (10, 11, 12, 13)]),
        write(tmp_path / "d2" / "b", [rec("sc", i, True, False) for i in (10, 11, 12)]),
    )
    got = json.loads(invoke(*draw1, "--also", *draw2, "--json").output)
    assert got["a"]["dirs"] == [draw1[0], draw2[0]] and got["b"]["dirs"] == [draw1[1], draw2[1]]
    assert (got["common"], got["only_a"], got["only_b"]) == (7, 1, 0)
    c = got["benchmarks"][0]["comparison"]
    assert (c["wins"], c["losses"], c["both_right"], c["both_wrong"]) == (2, 3, 1, 1)
    assert c["p_value"] == 1.0  # exact McNemar on 2 against 3: 2 * P(X <= 2 | n=5) capped at 1
    assert got["benchmarks"][0]["verification_a"]["precision"]["k"] == 3
    text = invoke(*draw1, "--also", *draw2).output
    assert f"- A: {draw1[0]} + {draw2[0]} (verimap; 8 tasks)" in text


def test_a_task_in_two_draws_of_one_side_is_refused(tmp_path):
    a1 = write(tmp_path / "a1", [rec("verimap", 0, True, True)])
    b1 = write(tmp_path / "b1", [rec("sc", 0, True, False)])
    a2 = write(tmp_path / "a2", [rec("map-v", 0, False, False)])  # the same task again
    b2 = write(tmp_path / "b2", [rec("sc", 1, True, False)])
    r = invoke(a1, b1, "--also", a2, b2)
    assert r.exit_code == 1
    assert f"{a2}: task r0/gsm8k/0 is also in {a1}, on the same side" in r.output
    r = invoke(a1, b1, "--also", a1, b2)  # one directory twice
    assert r.exit_code == 1 and f"{a1}: task r0/gsm8k/0 is also in {a1}" in r.output


def test_errors_are_clear(tmp_path):
    a, b = margin_dirs(tmp_path)
    (tmp_path / "plain").mkdir()
    r = invoke(str(tmp_path / "plain"), b)
    assert (
        r.exit_code == 1 and "no results.jsonl here; is this an eval output directory?" in r.output
    )

    started = tmp_path / "started"
    started.mkdir()
    (started / CONFIG).write_text(json.dumps({"verimap_eval": 1}))
    r = invoke(str(started), b)
    assert r.exit_code == 1 and "no finished tasks yet" in r.output

    other = write(tmp_path / "h", [rec("react", 0, True, True, bench="humaneval")])
    r = invoke(a, other)
    assert r.exit_code == 1 and "no common tasks" in r.output

    r = invoke(a, b, "--benchmark", "humaneval")
    assert r.exit_code == 1 and "no common tasks in benchmark 'humaneval'" in r.output
    assert "gsm8k" in r.output


def test_compare_is_listed_under_eval():
    r = CliRunner().invoke(main, ["eval", "--help"])
    assert "compare" in r.output


def test_question_types_are_compared_one_by_one(tmp_path):
    """MultiHopRAG tasks carry a question type: the pairs are also split by it."""
    types = ["inference_query"] * 4 + ["null_query"] * 3
    a_right = [1, 1, 1, 0, 1, 1, 1]
    b_right = [1, 0, 0, 0, 0, 0, 1]

    def side(method, right):
        out = []
        for i, (qt, c) in enumerate(zip(types, right, strict=True)):
            r = rec(method, i, bool(c), False, bench="multihoprag")
            r["meta"] = {"question_type": qt}
            out.append(r)
        return out

    a = write(tmp_path / "a", side("rag", a_right))
    b = write(tmp_path / "b", side("bare", b_right))
    r = invoke(a, b)
    assert r.exit_code == 0, r.output
    assert "## By question type (common tasks)" in r.output
    assert "| inference | 4 | 75.0% (3) | 25.0% (1) | 2 / 0 | 0.5 |" in r.output
    assert "| null | 3 | 100.0% (3) | 33.3% (1) | 2 / 0 | 0.5 |" in r.output
    js = json.loads(invoke(a, b, "--json").output)
    assert [(t["question_type"], t["wins"], t["losses"]) for t in js["question_types"]] == [
        ("inference_query", 2, 0),
        ("null_query", 2, 0),
    ]
    plain = json.loads(invoke(*margin_dirs(tmp_path / "g"), "--json").output)
    assert plain["question_types"] == []
