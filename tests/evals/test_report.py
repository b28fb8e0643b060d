import importlib.util
import json
import re
import statistics

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verimap.evals import stats
from verimap.evals.report import (
    load_records,
    render,
    report_dirs,
    risk_coverage_cell,
    table_accuracy,
    table_cost,
    table_summary,
    table_verification,
    table_vfs,
)
from verimap.evals.runner import RESULTS, ResultsLog, RunDirError, TaskRecord, run_eval
from verimap.evals.tasksets import get_benchmark
from verimap.testing import InProcessSandboxDouble, ScriptedModel, need

from .conftest import SAMPLES


def rec(method, bench, run, i, correct, verified=True, **kw):
    return {
        "key": f"r{run}/{bench}/{i}",
        "run": run,
        "task_id": f"{bench}/{i}",
        "benchmark": bench,
        "method": method,
        "correct": correct,
        "verified": verified,
        "iterations": kw.get("it", 1),
        "retries": kw.get("re", 0),
        "usage": kw.get("usage", {}),
        "vf_stats": kw.get("vf", {}),
    }


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


def _squash(text):
    return re.sub(r"\W+", "", text.replace("\\n", " "))


def plan_with(vf_code):
    return {
        "nodes": [
            {
                "id": "solve",
                "instruction": "Solve the word problem.",
                "inputs": ["USER_TASK"],
                "outputs": {"answer": "number"},
                "verification": [{"name": "checked", "type": "python", "code": vf_code}],
            }
        ]
    }


# Pins the answer the executor gives (strong: a nearby number fails it), right or not.
SOUND = "assert outputs['answer'] == {answer}, 'the answer is {answer}'"
PLANTED = "assert outputs['answer'] < 0, 'planted: rejects every answer here'"


async def test_table_4_counts_what_the_real_pipeline_produces(tmp_path):
    """Four GSM8K tasks through the real coordinator with scripted models: verification passes
    on 0 and 1 and rejects 2 and 3 (a VF no answer here meets); the executor is right on 0 and
    2. Task 2 is a real false negative: its run fails, keeps its answer marked unverified, and
    the scorer finds it right."""
    bench = get_benchmark("gsm8k", SAMPLES)
    tasks = bench.tasks()[:4]
    keys = [_squash(t.prompt)[:60] for t in tasks]

    def reply(req):
        text = _squash(" ".join(m.content for m in req.messages))
        i = next(i for i, k in enumerate(keys) if k in text)
        gold = float(tasks[i].gold)
        answer = gold if i in (0, 2) else gold + 1
        if req.role == "planner":
            return plan_with(SOUND.format(answer=answer) if i < 2 else PLANTED)
        return json.dumps({"answer": answer})

    model = ScriptedModel(reply, name="scripted")
    models = {"planner": model, "executor": model, "judge": model}
    await run_eval(
        bench,
        "verimap",
        models,
        InProcessSandboxDouble(),
        tmp_path,
        limit=4,
        progress=False,
        config={"loop": {"max_retries": 2, "max_iterations": 2}},
    )
    recs = {r["task_id"]: r for r in load_records([tmp_path])}
    fn = recs["gsm8k/2"]
    assert fn["status"] == "failed" and not fn["verified"] and fn["correct"]
    assert fn["predicted"] == "70000"
    assert [recs[f"gsm8k/{i}"]["verified"] for i in range(4)] == [True, True, False, False]
    assert [recs[f"gsm8k/{i}"]["correct"] for i in range(4)] == [True, False, True, False]
    assert "| verimap | GSM8K | 4 | 2 | 1 (25.0%) | 1 (25.0%) |" in table_verification(
        list(recs.values())
    )
    # 2 retries x 2 iterations of the planted VF; one run of the sound one
    assert fn["vf_calls"] == {"python": 4, "llm": 0}
    assert recs["gsm8k/0"]["vf_calls"] == {
        "python": 1,
        "llm": 0,
    }  # the strength probes: not counted


def test_methods_without_verification_are_left_out_of_table_4():
    recs = [rec("verimap", "gsm8k", 0, 0, True), rec("map", "gsm8k", 0, 0, False)]
    t = table_verification(recs)
    assert "| verimap | GSM8K | 1 | 1 |" in t and "| map |" not in t


def test_cost_per_role_and_vf_statistics():
    u = {
        "planner": {"cost": 0.02, "prompt_tokens": 100, "completion_tokens": 50},
        "executor": {
            "cost": 0.01,
            "prompt_tokens": 10,
            "completion_tokens": 10,
            "cached_tokens": 6,
        },
    }
    vf = {"plans": 2, "nodes": 6, "python": 4, "python_chars": 400, "llm": 2, "llm_chars": 60}
    recs = [rec("verimap", "gsm8k", 0, i, True, usage=u, vf=vf) for i in range(2)]
    assert (
        "| verimap | GSM8K | $0.02000 / 150 | $0.01000 / 20 | $0.00000 / 0 | $0.03000 | 110 (6) |"
        in table_cost(recs)
    )
    # records from before VF calls were counted: no call figures, not zeros
    assert "| verimap | GSM8K | – | – | 2.00 | 100 | 1.00 | 30 | 3.00 |" in table_vfs(recs)
    recs[0]["vf_calls"] = {"python": 6, "llm": 1}
    recs[1]["vf_calls"] = {"python": 2, "llm": 2}
    table = table_vfs(recs)
    assert "| verimap | GSM8K | 4.00 | 1.50 | 2.00 | 100 | 1.00 | 30 | 3.00 |" in table
    assert "| Python VF calls / task | NL VF calls / task | Python VFs written / plan |" in table
    recs[0]["vf_stats"] = {**vf, "check": 3}
    recs[0]["vf_calls"]["check"] = 5
    recs[1]["vf_calls"]["check"] = 1
    assert "| 3.00 | 0.75 | 3.00 |" in table_vfs(recs)
    assert "VF calls / task: VF executions in a run" in render(recs)


def test_records_written_before_vf_calls_still_load():
    old = {
        "key": "r0/gsm8k/0",
        "run": 0,
        "task_id": "gsm8k/0",
        "benchmark": "gsm8k",
        "method": "verimap",
        "status": "success",
        "correct": True,
        "verified": True,
    }
    assert TaskRecord.model_validate(old).vf_calls == {}


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


def test_directories_pool_but_a_task_counts_once_per_method(tmp_path):
    """Draws add up in one row; the same task of a method in two directories (a run and its
    rerun under another setting) would count twice, and is refused with both names."""
    d1, d2, d3 = (tmp_path / n for n in ("d1", "d2", "rerun"))
    for d, tasks in ((d1, (0, 1)), (d2, (2,)), (d3, (1,))):
        d.mkdir()
        for i in tasks:
            ResultsLog(d / RESULTS).append(rec("verimap", "gsm8k", 0, i, i != 1))
    ResultsLog(d2 / RESULTS).append(rec("react", "gsm8k", 0, 1, True))  # another method: fine
    pooled = load_records([d1, d2])
    assert sorted((r["method"], r["task_id"]) for r in pooled) == [
        ("react", "gsm8k/1"),
        ("verimap", "gsm8k/0"),
        ("verimap", "gsm8k/1"),
        ("verimap", "gsm8k/2"),
    ]
    why = f"{d3}: task r0/gsm8k/1 of method verimap is also in {d1}, so the tables count it twice"
    with pytest.raises(RunDirError, match=re.escape(why)):
        load_records([d1, d3])
    with pytest.raises(RunDirError, match="is also in"):
        load_records([d1, d1])


def test_multihoprag_question_types():
    recs = []
    for i, (qt, ok, official) in enumerate(
        [("null_query", True, True), ("null_query", False, True), ("temporal_query", True, False)]
    ):
        usage = {"executor": {"calls": 2 + i}}
        r = rec("rag", "multihoprag", 0, i, ok, usage=usage)
        r.update(
            meta={"question_type": qt},
            score_detail=f"upstream_match={official}",
            tokens=100 * (i + 1),
            wall_time_s=3.0,
        )
        recs.append(r)
    old = rec("react", "multihoprag", 0, 0, False)  # scored before the official verdict was kept
    old["meta"] = {"question_type": "null_query"}
    text = render([*recs, old])
    head = "| Method | Scoring | temporal | null | all | Calls / task | Tokens / task | s / task |"
    assert head in text
    assert "| rag | strict | 100.0 (1/1) | 50.0 (1/2) | 66.7 (2/3) | 3.0 | 200 | 3.0 |" in text
    assert "| rag | official | 0.0 (0/1) | 100.0 (2/2) | 66.7 (2/3) | 3.0 | 200 | 3.0 |" in text
    assert "| react | strict | – | 0.0 (0/1) | 0.0 (0/1) |" in text
    assert "| react | official |" not in text
    assert "MultiHop-RAG's qa_evaluate.py" in text


# -- accuracy and verification (the first table) ------------------------------------------------

# 10 GSM8K tasks: 0-3 verified and right, 4 verified and wrong, 5-6 right but not verified,
# 7-9 wrong and not verified. So 6 right, 5 verified of which 4 right.
RIGHT = [True, True, True, True, False, True, True, False, False, False]
VERIFIED = [True] * 5 + [False] * 5


def ten(method="verimap"):
    return [
        rec(method, "gsm8k", 0, i, c, v)
        for i, (c, v) in enumerate(zip(RIGHT, VERIFIED, strict=True))
    ]


def summary_rows(records):
    lines = table_summary(records).splitlines()
    return {
        ln.split("|")[1].strip(): [c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]
    }


def test_accuracy_and_verification_against_hand_computed_wilson_bounds():
    """Wilson 95%, z = 1.95996, z^2 = 3.84146, bounds = (centre -/+ half) with
    denom = 1 + z^2/n, centre = (p + z^2/(2n)) / denom, half = z sqrt(p(1-p)/n + z^2/(4n^2)) / denom.

    accuracy 6/10: p = 0.6, denom = 1.384146; centre = (0.6 + 0.192073) / 1.384146 = 0.572247;
    half = 1.959964 * sqrt(0.024 + 0.0096037) / 1.384146 = 1.959964 * 0.183313 / 1.384146
    = 0.259576; interval [0.312671, 0.831823] -> 60.0 [31.3, 83.2].

    precision 4/5 (verified and right / verified): p = 0.8, denom = 1.768292;
    centre = (0.8 + 0.384146) / 1.768292 = 0.669658; half = 1.959964 * sqrt(0.032 + 0.0384146)
    / 1.768292 = 1.959964 * 0.265358 / 1.768292 = 0.294127; interval [0.375531, 0.963785]
    -> 80.0 [37.6, 96.4].

    coverage 5/10 = 50.0; FP = verified and wrong = 1 (task 4); FN = right and not verified = 2
    (tasks 5, 6). Risk-coverage: verified first (tasks 0-4, 1 wrong: 20% risk at 50%), then
    all (4 wrong of 10: 40% risk at 100%)."""
    row = summary_rows(ten())["verimap"]
    assert row == [
        "verimap",
        "GSM8K",
        "10",
        "60.0 [31.3, 83.2]",
        "5",
        "80.0 [37.6, 96.4]",
        "50.0",
        "1 / 2",
        "0% → –, 50% → 20% risk, 100% → 40% risk",
    ]


def test_the_header_names_every_column():
    header = table_summary(ten()).splitlines()[0]
    assert header == (
        "| Method | Benchmark | Tasks | Accuracy % [95% CI] | Verified | "
        "Verified precision % [95% CI] | Coverage % | FP / FN | Risk–coverage |"
    )


def test_a_method_without_checks_verifies_nothing_whatever_its_records_say():
    """react's records say `verified: true` (issue 40); nothing checked them, so every
    verification cell is "–", and its curve is the one point "answer all"."""
    react = [{**r, "verified": True} for r in ten("react")]
    row = summary_rows(react)["react"]
    assert row[3] == "60.0 [31.3, 83.2]"
    assert row[4:8] == ["–", "–", "–", "–"]
    assert row[8] == "0% → –, 100% → 40% risk"


def test_a_method_with_checks_that_verified_nothing_has_no_precision():
    row = summary_rows([{**r, "verified": False} for r in ten()])["verimap"]
    assert row[4:8] == ["0", "–", "0.0", "0 / 6"]
    assert row[8] == "0% → –, 100% → 40% risk"


def test_false_positives_and_negatives_agree_with_table_4():
    assert "| verimap | GSM8K | 10 | 5 | 1 (10.0%) | 2 (20.0%) |" in table_verification(ten())


def test_every_figure_is_the_stats_module_s():
    """No second implementation: with confidences (a vote share) the cell is the stats
    module's curve, one point per rank. By hand: verified first, by confidence: task 0 (1.0,
    right) 10% -> 0%; tasks 1-2 (0.8, right) 30% -> 0%; tasks 3-4 (0.6, one wrong) 50% -> 20%;
    then the unverified: task 5 (1.0, right) 60% -> 1/6; task 8 (0.6, wrong) 70% -> 2/7;
    tasks 6, 7, 9 (0.4, two wrong) 100% -> 4/10."""
    recs = ten()
    for r, c in zip(recs, [1.0, 0.8, 0.8, 0.6, 0.6, 1.0, 0.4, 0.4, 0.6, 0.4], strict=True):
        r["meta"] = {"confidence": c}
    row = summary_rows(recs)["verimap"]
    assert row[8] == (
        "0% → –, 10% → 0% risk, 30% → 0% risk, 50% → 20% risk, 60% → 16.7% risk, "
        "70% → 28.6% risk, 100% → 40% risk"
    )
    assert row[8] == risk_coverage_cell(stats.risk_coverage_curve(recs))
    v = stats.verification_metrics(recs)
    assert row[5] == f"80.0 [{100 * v.precision.low:.1f}, {100 * v.precision.high:.1f}]"


def test_a_long_curve_is_thinned_to_its_ends_and_says_so():
    points = [stats.RiskPoint(i / 20, None if i == 0 else 0.5, i, i // 2) for i in range(21)]
    cell = risk_coverage_cell(points, limit=5)
    assert cell == (
        "0% → –, 25% → 50% risk, 50% → 50% risk, 75% → 50% risk, 100% → 50% risk (5 of 21 points)"
    )
    assert risk_coverage_cell(points[:3], limit=5).count("→") == 3


def test_rows_follow_the_presets_order_then_the_benchmarks():
    recs = [rec(m, b, 0, 0, True) for m in ("verimap", "react") for b in ("humaneval", "gsm8k")]
    rows = table_summary(recs).splitlines()[2:]
    assert [tuple(c.strip() for c in r.split("|")[1:3]) for r in rows] == [
        ("react", "GSM8K"),
        ("react", "HumanEval"),
        ("verimap", "GSM8K"),
        ("verimap", "HumanEval"),
    ]


def test_the_report_opens_with_the_table_and_keeps_the_paper_s(tmp_path):
    from click.testing import CliRunner

    from verimap.cli import main

    d = tmp_path / "run"
    d.mkdir()
    for r in ten():
        ResultsLog(d / RESULTS).append(r)
    out = CliRunner().invoke(main, ["eval", "report", str(d)])
    assert out.exit_code == 0, out.output
    text = out.output
    first = text.index("## Accuracy and verification")
    assert first < text.index("(paper Table 1)") < text.index("(paper Table 4)")
    assert "| verimap | GSM8K | 10 | 60.0 [31.3, 83.2] | 5 | 80.0 [37.6, 96.4] |" in text
    assert "Wilson 95% intervals" in text


# -- directories with lines no verimap run wrote ----------------------------------------------

GOOD_LINES = [rec("verimap", "gsm8k", 0, 0, True), rec("verimap", "gsm8k", 0, 1, False)]
BAD_LINES = {  # line number -> what makes it no record
    2: b"\xff\xfe invalid UTF-8\n",
    3: b"[1, 2, 3]\n",
    4: b'{"task_id": "gsm8k/9", "run": 0}\n',  # no key
    5: json.dumps({**rec("verimap", "gsm8k", 0, 5, True), "usage": [1]}).encode() + b"\n",
    6: b"[" * 50_000 + b"]" * 50_000 + b"\n",
}


def _messy_dir(d, config: bytes = b'{"benchmark": "gsm8k", "method": "verimap"}'):
    """An eval directory whose results.jsonl holds two records among lines that are none."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_bytes(config)
    good = [json.dumps(r).encode() + b"\n" for r in GOOD_LINES]
    lines = [good[0], *(BAD_LINES[n] for n in sorted(BAD_LINES)), good[1]]
    (d / RESULTS).write_bytes(b"".join(lines))
    (d / "errors.jsonl").write_bytes(b'{"key": "r0/gsm8k/7", "task_id": "gsm8k/7"}\n\xff\n')
    return d


def _named(text: str, path, lines) -> bool:
    return all(f"{path}:{n}: " in text for n in lines)


def test_report_skips_every_bad_line_by_file_and_line_and_counts_the_rest(tmp_path):
    d = _messy_dir(tmp_path / "run")
    text = report_dirs([d])
    assert "(n=2, runs=1)" in text and "1 task(s) errored, not scored" in text
    assert "## Skipped lines (6)" in text
    assert _named(text, d / RESULTS, BAD_LINES) and _named(text, d / "errors.jsonl", [2])
    problems: list[str] = []
    assert len(load_records([d], problems)) == 2 and len(problems) == len(BAD_LINES)


@pytest.mark.parametrize(
    "config",
    [b"[1, 2]", b"\xff{}", b"{" * 5_000, b'{"models": [1]}'],
    ids=["a-list", "not-utf8", "too-deep", "models-a-list"],
)
def test_a_bad_config_json_is_named_and_the_records_still_count(tmp_path, config):
    d = _messy_dir(tmp_path / "run", config)
    text = report_dirs([d])
    assert "(n=2, runs=1)" in text
    if config != b'{"models": [1]}':
        assert f"{d / 'config.json'}: " in text


def test_every_reader_of_eval_directories_skips_and_names_bad_lines(tmp_path):
    """The Inspect export and the preference export read results.jsonl as the report does."""
    need(importlib.util.find_spec("inspect_ai") is not None, "inspect_ai is not installed")
    from verimap.evals.inspect_export import export_dirs
    from verimap.evals.preferences import preference_pairs

    config = json.dumps({"benchmark": "gsm8k", "method": "verimap", "data": {"dir": str(SAMPLES)}})
    d = _messy_dir(tmp_path / "run", config.encode())
    (written,) = export_dirs([d], tmp_path / "logs")
    assert written.scored == 2 and written.errored == 1
    assert _named("\n".join(written.problems), d / RESULTS, BAD_LINES)
    _, summary = preference_pairs([d])
    assert _named("\n".join(summary.warnings), d / RESULTS, BAD_LINES)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3)
    ),
    max_leaves=10,
)
_record = st.fixed_dictionaries(
    {
        "key": st.text(min_size=1, max_size=4),
        "task_id": st.sampled_from(["gsm8k/0", "x"]),
        "method": st.sampled_from(["verimap", "react"]),
        "benchmark": st.just("gsm8k"),
        "run": st.integers(0, 2),
        "correct": st.booleans(),
    },
    optional={
        k: _json
        for k in (
            "usage",
            "plans",
            "meta",
            "vf_stats",
            "vf_calls",
            "tokens",
            "cost",
            "verified",
            "status",
            "trace",
            "finished_at",
            "wall_time_s",
            "score_detail",
            "predicted",
        )
    },
)
# (line, whether it can be no record whatever it says)
_line = st.one_of(
    _record.map(lambda r: (json.dumps(r).encode(), False)),
    _json.map(lambda v: (json.dumps(v).encode(), not isinstance(v, dict))),
    st.binary(min_size=1, max_size=20).map(lambda b: (b"\xff" + b.replace(b"\n", b""), True)),
    st.integers(65, 3_000).map(lambda d: (b"{" * d + b"}" * d, True)),
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_line, max_size=8), errors=st.lists(_line, max_size=3))
def test_any_lines_into_the_report_and_the_exports_raise_nothing(tmp_path_factory, lines, errors):
    need(importlib.util.find_spec("inspect_ai") is not None, "inspect_ai is not installed")
    from verimap.evals.inspect_export import to_eval_log
    from verimap.evals.preferences import preference_pairs

    d = tmp_path_factory.mktemp("run")
    config = {"benchmark": "gsm8k", "method": "verimap", "data": {"dir": str(SAMPLES)}}
    (d / "config.json").write_text(json.dumps(config))
    (d / RESULTS).write_bytes(b"".join(raw + b"\n" for raw, _ in lines))
    (d / "errors.jsonl").write_bytes(b"".join(raw + b"\n" for raw, _ in errors))
    text = report_dirs([d])
    must = [f"{d / RESULTS}:{n}: " for n, (_, bad) in enumerate(lines, 1) if bad]
    must += [f"{d / 'errors.jsonl'}:{n}: " for n, (_, bad) in enumerate(errors, 1) if bad]
    assert all(m in text for m in must)
    problems: list[str] = []
    to_eval_log(d, problems)
    assert all(any(p.startswith(m) for p in problems) for m in must)
    _, summary = preference_pairs([d])
    assert all(any(m in w for w in summary.warnings) for m in must if "results" in m)


# What a foreign config.json or results.jsonl can hold to break a report: a newline that starts
# a line of its own (which a shell reading the file would run), a bar that opens a cell, an
# OSC 52 clipboard write, an 8-bit CSI and a bidi override.
HOSTILE = "qwen\ntouch MARKER\n#|\x1b]52;c;Y3VybCBldmls\x07\x9b2J\u202e"


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row)) - 1


def test_names_from_a_foreign_directory_cannot_break_a_row_or_a_line(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    models = {"planner": HOSTILE, "executor": "a|b", "judge": "\x1bc"}
    (d / "config.json").write_text(json.dumps({"benchmark": "gsm8k", "models": models}))
    recs = [rec(f"m{HOSTILE}", f"b{HOSTILE}", 0, 0, True), rec("verimap", "gsm8k", 0, 1, False)]
    recs[0]["meta"] = {"question_type": HOSTILE}
    (d / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in recs))
    text = report_dirs([d])
    assert not any(c in text for c in "\x1b\x07\x9b\u202e")
    assert "touch MARKER" not in text.splitlines()
    assert r"qwen\ntouch MARKER\n#\|\x1b]52;c;Y3VybCBldmls\x07\x9b2J\u202e" in text
    tables = [block.splitlines() for block in text.split("\n\n") if block.startswith("|")]
    assert len(tables) >= 6
    for lines in tables:
        assert all(ln.startswith("|") and ln.endswith("|") for ln in lines)
        assert len({_cells(ln) for ln in lines}) == 1, lines


def test_vf_stats_count_the_checks_a_plan_names():
    from verimap.evals.attempt import vf_stats
    from verimap.planning.plan import parse_plan

    plan = parse_plan(
        {
            "nodes": [
                {
                    "id": "a",
                    "instruction": "Answer.",
                    "inputs": ["USER_TASK"],
                    "outputs": {"answer": "string"},
                    "verification": [
                        {
                            "name": "form",
                            "type": "check",
                            "check": "yes_no",
                            "args": {"output": "answer"},
                        },
                        {"name": "c", "type": "llm", "content": "The answer is Yes or No."},
                    ],
                }
            ]
        }
    )
    s = vf_stats([plan])
    assert (s["check"], s["llm"], s["python"], s["nodes"]) == (1, 1, 0, 1)
