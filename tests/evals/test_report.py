import json
import statistics

import pytest

from verimap.evals.report import (
    load_records,
    render,
    table_accuracy,
    table_cost,
    table_verification,
    table_vfs,
)
from verimap.evals.runner import RESULTS, ResultsLog, RunDirError


def rec(method, bench, run, i, correct, verified=True, **kw):
    return {
        "key": f"r{run}/{bench}/{i}", "run": run, "task_id": f"{bench}/{i}", "benchmark": bench,
        "method": method, "correct": correct, "verified": verified, "iterations": kw.get("it", 1),
        "retries": kw.get("re", 0), "usage": kw.get("usage", {}), "vf_stats": kw.get("vf", {}),
    }  # fmt: skip


def test_accuracy_is_mean_and_sample_std_over_runs():
    # run 0: 3/4 right, run 1: 1/4, run 2: 4/4
    pattern = {0: [1, 1, 1, 0], 1: [1, 0, 0, 0], 2: [1, 1, 1, 1]}
    recs = [
        rec("verimap", "gsm8k", r, i, bool(c))
        for r, cs in pattern.items()
        for i, c in enumerate(cs)
    ]
    accs = [75.0, 25.0, 100.0]
    expected = f"{statistics.fmean(accs):.1f} ± {statistics.stdev(accs):.1f} (n=4, runs=3)"
    assert f"| verimap | {expected} |" in table_accuracy(recs)


def test_methods_and_benchmarks_are_laid_out_like_table_1():
    recs = [
        rec(m, b, 0, 0, True) for m in ("verimap", "react", "map") for b in ("multihoprag", "gsm8k")
    ]
    lines = table_accuracy(recs).splitlines()
    assert lines[0] == "| Method | GSM8K | MultiHopRAG |"
    assert [ln.split("|")[1].strip() for ln in lines[2:]] == ["react", "map", "verimap"]


def test_false_positives_and_negatives():
    recs = [
        rec("verimap", "gsm8k", 0, 0, correct=True, verified=True),
        rec("verimap", "gsm8k", 0, 1, correct=False, verified=True),  # FP
        rec("verimap", "gsm8k", 0, 2, correct=True, verified=False),  # FN
        rec("verimap", "gsm8k", 0, 3, correct=False, verified=False),
        rec("map", "gsm8k", 0, 0, correct=False, verified=True),  # no verification: not reported
    ]
    t = table_verification(recs)
    assert "| verimap | GSM8K | 4 | 2 | 1 (25.0%) | 1 (25.0%) |" in t
    assert "| map |" not in t


def test_cost_per_role_and_vf_statistics():
    u = {"planner": {"cost": 0.02, "prompt_tokens": 100, "completion_tokens": 50},
         "executor": {"cost": 0.01, "prompt_tokens": 10, "completion_tokens": 10}}  # fmt: skip
    vf = {"plans": 2, "nodes": 6, "python": 4, "python_chars": 400, "llm": 2, "llm_chars": 60}
    recs = [rec("verimap", "gsm8k", 0, i, True, usage=u, vf=vf) for i in range(2)]
    assert (
        "| verimap | GSM8K | $0.02000 / 150 | $0.01000 / 20 | $0.00000 / 0 | $0.03000 |"
        in table_cost(recs)
    )
    assert "| verimap | GSM8K | 2.00 | 100 | 1.00 | 30 | 3.00 |" in table_vfs(recs)


def test_load_records_from_dirs(tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    (a / "config.json").write_text(json.dumps({"models": {"planner": "gpt-4.1"}}))
    ResultsLog(a / RESULTS).append(rec("react", "gsm8k", 0, 0, True))
    recs = load_records([a])
    assert len(recs) == 1 and recs[0]["models"] == {"planner": "gpt-4.1"}
    assert "planner=gpt-4.1" in render(recs)
    with pytest.raises(RunDirError, match=r"no results\.jsonl"):
        load_records([tmp_path / "empty"])


def test_multihoprag_question_types():
    recs = []
    for i, (qt, ok) in enumerate(
        [("null_query", True), ("null_query", False), ("temporal_query", True)]
    ):
        r = rec("verimap", "multihoprag", 0, i, ok)
        r["meta"] = {"question_type": qt}
        recs.append(r)
    text = render(recs)
    assert "| Method | null_query | temporal_query |" in text
    assert "| verimap | 50.0 (n=2) | 100.0 (n=1) |" in text
