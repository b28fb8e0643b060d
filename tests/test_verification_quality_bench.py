"""Logic of benchmarks/verification_quality.py without a model server: the seeded draw, the
interleaved order, the tables rebuilt from run directories of hand-made records (every figure
as `verimap.evals.stats` computes it), and a resume that skips the (task, method) pairs an
interrupted run finished."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from verimap.base.check_names import BALLOTS, DEFAULT_BALLOT
from verimap.base.messages import ModelRequest, ModelResponse
from verimap.base.usage import Usage
from verimap.evals.run_dir import CONFIG, RESULTS, ResultsLog, RunDirError
from verimap.evals.stats import (
    mcnemar_exact,
    paired_bootstrap_ci,
    proportion,
)
from verimap.evals.tasksets import get_benchmark
from verimap.testing import InProcessSandboxDouble

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "datasets"


def _load():
    # A benchmark imports its shared module (`_common`) from beside it, as a script run does.
    if str(REPO / "benchmarks") not in sys.path:
        sys.path.insert(0, str(REPO / "benchmarks"))
    path = REPO / "benchmarks" / "verification_quality.py"
    spec = importlib.util.spec_from_file_location("verification_quality", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


vq = _load()


def _window(n: int, first: int = 0):
    bench = get_benchmark("gsm8k", SAMPLES)
    return vq.Window(bench, bench.tasks()[first : first + n])


# ---- the draw -----------------------------------------------------------------------------------


def test_the_draw_is_seeded_leaves_out_the_dev_windows_and_repeats_no_item(monkeypatch):
    gsm = vq.draw("gsm8k", 1319, 30, seed=12345)
    assert gsm == vq.draw("gsm8k", 1319, 30, seed=12345)  # deterministic
    assert gsm != vq.draw("gsm8k", 1319, 30, seed=12346)
    assert len(set(gsm)) == 30 and all(200 <= i < 1319 for i in gsm)
    with monkeypatch.context() as m:  # HumanEval's unseen items may all be drawn by now
        m.setattr(vq, "SEEN_DRAWS", ())
        he = vq.draw("humaneval", 164, 30, seed=12345)
    assert len(set(he)) == 30 and not set(he) & (set(range(20)) | set(range(110, 140)))
    assert all(0 <= i < 164 for i in he)
    # Everything outside the dev windows and the seen draws can be drawn, and not one item more.
    seen = vq.excluded("humaneval", 164)
    rest = [i for i in range(164) if i not in seen]
    assert len(rest) == 164 - 50 - sum(counts.get("humaneval", 0) for _, counts in vq.SEEN_DRAWS)
    assert sorted(vq.draw("humaneval", 164, len(rest), seed=7)) == rest
    with pytest.raises(ValueError, match=f"cannot draw {len(rest) + 1}"):
        vq.draw("humaneval", 164, len(rest) + 1, seed=7)


def test_a_seen_draw_is_never_drawn_again(monkeypatch):
    first = vq.draw("gsm8k", 1319, 30, seed=41)
    monkeypatch.setattr(vq, "SEEN_DRAWS", (*vq.SEEN_DRAWS, (41, {"gsm8k": 30})))
    assert not set(vq.draw("gsm8k", 1319, 500, seed=5)) & set(first)
    assert len(vq.excluded("gsm8k", 1319)) == 200 + sum(c.get("gsm8k", 0) for _, c in vq.SEEN_DRAWS)
    assert vq.excluded("humaneval", 164, seed=41) == vq.excluded("humaneval", 164)
    assert vq.draw("gsm8k", 1319, 30, seed=41) == first  # its own run can still be continued
    assert vq.seen_before(41) == list(vq.SEEN_DRAWS[:-1]) and vq.seen_before(5) == list(
        vq.SEEN_DRAWS
    )


def test_only_the_tasks_a_seen_draw_ran_are_seen(monkeypatch):
    monkeypatch.setattr(vq, "SEEN_DRAWS", ((41, {"humaneval": 7}),))
    drawn = vq.draw("humaneval", 164, 30, seed=41)
    rest = set(vq.draw("humaneval", 164, 164 - 50 - 7, seed=5))
    assert not rest & set(drawn[:7]) and set(drawn[7:]) <= rest
    assert vq.excluded("gsm8k", 1319) == set(range(200))  # it ran no GSM8K task
    assert vq.seen_text(vq.seen_before(5)) == "41: HumanEval 7"


def test_code_tasks_are_drawn_from_mbpp_and_humaneval_is_development_data(monkeypatch):
    window = vq.draw_window("mbpp", 30, seed=12345)
    assert (
        window.name == "mbpp" and len(set(window.ids)) == 30 and window.pool == 257 - 10 - 30 - 30
    )
    first = [t.id for t in window.bench.tasks()[:10]]  # the smoke-check window
    assert not set(window.ids) & set(first)
    monkeypatch.setattr(vq, "SEEN_DRAWS", (*vq.SEEN_DRAWS, (12345, {"mbpp": 30})))
    assert len(vq.excluded("mbpp", 257)) == 10 + 30 + 30 + 30  # the window, two draws, this one
    with pytest.raises(
        ValueError, match="cannot draw 158 of the 157 items not yet seen: 157 of its 257 are left"
    ):
        vq.draw("mbpp", 257, 158, seed=1)
    # Every HumanEval item is seen: a new seed cannot draw one, and is told where to go.
    with pytest.raises(ValueError, match=r"0 of its 164 are left .*--mbpp N"):
        vq.draw("humaneval", 164, 1, seed=1)
    args = vq.parse_args(["--seed", "5"])
    assert (args.gsm8k, args.mbpp, args.humaneval) == (30, 30, 0)


def test_multihoprag_is_drawn_by_question_type_without_held_out_dev_or_seen_queries():
    window = vq.draw_window("multihoprag", 40, seed=12345)
    tasks = window.bench.tasks()
    types = sorted({t.meta["question_type"] for t in tasks})
    assert len(types) == 4 and len(set(window.ids)) == 40
    # Any prefix of the run order holds about as many of each type.
    for k in (4, 8, 40):
        counts = [sum(t.meta["question_type"] == q for t in window.tasks[:k]) for q in types]
        assert counts == [k // 4] * 4
    index = {t.id: i for i, t in enumerate(tasks)}
    drawn = {index[i] for i in window.ids}
    assert not drawn & (set(range(5)) | set(vq.SEEN_IDS["multihoprag"]))
    assert not set(window.ids) & window.bench.held_out()
    assert window.pool == 2556 - 5 - 8 - 30 - 1 - 8 - len(window.bench.held_out())
    assert window.ids[:20] == vq.draw_window("multihoprag", 20, seed=12345).ids
    # A seen draw is left out as it was drawn (by type), and its own seed still draws it.
    seen = vq.draw_window("multihoprag", 30, seed=854403)
    assert seen.ids[:3] == ["multihoprag/935", "multihoprag/1446", "multihoprag/1126"]
    assert not set(seen.ids) & set(window.ids)
    with pytest.raises(ValueError, match="cannot draw 5000"):
        vq.draw_window("multihoprag", 5000, seed=1)


def test_rag_runs_only_on_questions_over_a_corpus_and_program_only_on_math():
    gsm = _window(1)
    mbpp = vq.Window(get_benchmark("mbpp"), get_benchmark("mbpp").tasks()[:1])
    qa = vq.Window(get_benchmark("multihoprag"), get_benchmark("multihoprag").tasks()[:1])
    pairs = vq.interleave([gsm, mbpp, qa], ["bare", "program", "rag", "verimap"])
    ran = {(p.bench.name, p.method) for p in pairs}
    assert ran == {
        ("gsm8k", "bare"),
        ("gsm8k", "program"),
        ("gsm8k", "verimap"),
        ("mbpp", "bare"),
        ("mbpp", "verimap"),
        ("multihoprag", "bare"),
        ("multihoprag", "rag"),
        ("multihoprag", "verimap"),
    }


def test_humaneval_tables_are_marked_development_data(tmp_path):
    bench = get_benchmark("humaneval", SAMPLES)
    window = vq.Window(bench, bench.tasks()[:1])
    _write(
        tmp_path,
        "humaneval",
        "bare",
        [_record(window.ids[0], "bare", 1, 0, 1.0, 1, bench="humaneval")],
    )
    cells = vq.read_cells(tmp_path, vq.interleave([window], ["bare"]), [window], {})
    md = vq.render("## h", {"humaneval": window.ids}, cells, 3)
    assert "**HumanEval** (development data: every item was seen" in md


def test_a_larger_draw_with_the_same_seed_extends_the_smaller_one():
    assert vq.draw("gsm8k", 1319, 40, seed=99)[:30] == vq.draw("gsm8k", 1319, 30, seed=99)


def test_the_draw_needs_the_full_data_set_not_the_committed_sample():
    with pytest.raises(vq.DataError, match="full set"):
        vq.draw_window("gsm8k", 3, seed=1, data_dir=str(SAMPLES))


def test_the_seed_is_required_and_the_error_says_how_to_pick_one(capsys):
    with pytest.raises(SystemExit):
        vq.parse_args([])
    assert "secrets.randbelow" in capsys.readouterr().err
    args = vq.parse_args(["--seed", "5"])
    assert args.runs_dir == "runs/verification-quality-5" and args.samples is None  # matched
    assert args.out == "runs/verification-quality-5/report.md"  # never the curated eval page
    assert vq.parse_args(["--seed", "5", "--runs-dir", "d"]).out == "d/report.md"
    assert vq.parse_args(["--seed", "5", "--out", ""]).out == ""
    assert args.methods.split(",") == ["bare", "sc", "program", "rag", "react", "verimap"]
    with pytest.raises(SystemExit):
        vq.parse_args(["--seed", "5", "--methods", "bare,nonsense"])


# ---- the order ----------------------------------------------------------------------------------


def test_every_method_runs_on_a_task_before_the_next_and_the_first_method_rotates():
    gsm, he = _window(3), _window(2, first=10)
    he.bench = get_benchmark("humaneval", SAMPLES)
    he.tasks = he.bench.tasks()[:2]
    pairs = vq.interleave([gsm, he], ["a", "b", "c"])
    got = [(p.task.id, p.method) for p in pairs]
    assert got == [
        ("gsm8k/0", "a"),
        ("gsm8k/0", "b"),
        ("gsm8k/0", "c"),
        ("HumanEval/0", "a"),
        ("HumanEval/0", "b"),
        ("HumanEval/0", "c"),
        ("gsm8k/1", "b"),
        ("gsm8k/1", "c"),
        ("gsm8k/1", "a"),
        ("HumanEval/1", "b"),
        ("HumanEval/1", "c"),
        ("HumanEval/1", "a"),
        ("gsm8k/2", "c"),
        ("gsm8k/2", "a"),
        ("gsm8k/2", "b"),
    ]
    assert all(p.run == 0 for p in pairs)


def test_a_part_started_later_keeps_each_tasks_place_in_the_rotation():
    gsm = _window(3)
    whole = vq.interleave([gsm], ["a", "b", "c"])
    part = vq.interleave([gsm], ["a", "b", "c"], start=1)
    key = [(p.task.id, p.method) for p in part]
    assert key == [(p.task.id, p.method) for p in whole][3:]
    assert {p.task.id for p in part} == {"gsm8k/1", "gsm8k/2"}


def test_pens_runs_react_and_verimap_three_times_each_alternating_who_goes_first():
    got = [(p.key, p.method) for p in vq.pens_pairs()]
    assert got == [
        ("r0/pens", "react"),
        ("r0/pens", "verimap"),
        ("r1/pens", "verimap"),
        ("r1/pens", "react"),
        ("r2/pens", "react"),
        ("r2/pens", "verimap"),
    ]


# ---- tables from run directories ----------------------------------------------------------------

VERIMAP_RIGHT = [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
VERIMAP_VERIFIED = [1, 1, 1, 1, 1, 0, 0, 1, 0, 0]
REACT_RIGHT = [1, 1, 1, 0, 0, 1, 0, 0, 1, 0]
SC_RIGHT = [1, 1, 1, 1, 0, 1, 0, 0, 0, 1]


def _record(task_id, method, right, verified, wall, calls, run=0, bench="gsm8k"):
    return {
        "key": f"r{run}/{task_id}",
        "run": run,
        "task_id": task_id,
        "benchmark": bench,
        "method": method,
        "status": "success",
        "correct": bool(right),
        "verified": bool(verified),
        "wall_time_s": wall,
        "trace": None,
        "usage": {
            "executor": {"calls": calls, "prompt_tokens": 100, "completion_tokens": 10 * calls}
        },
    }


def _write(runs_dir: Path, bench: str, method: str, records: list[dict], **config) -> None:
    """`method`'s run directory as the runner leaves it: config.json names the method it ran as."""
    out = vq.cell_dir(runs_dir, bench, method)
    out.mkdir(parents=True)
    config = {"run_config": {"verify": {"ballot": DEFAULT_BALLOT}}} | config
    config |= {"verimap_eval": 1, "benchmark": bench, "method": vq.run_as(method)[0]}
    (out / CONFIG).write_text(json.dumps(config))
    log = ResultsLog(out / RESULTS)
    for rec in records:
        log.append(rec)


@pytest.fixture
def filled(tmp_path):
    """Three methods on ten GSM8K tasks, as hand-made results.jsonl records."""
    window = _window(10)
    ids = window.ids
    rows = {
        "verimap": [
            _record(t, "verimap", r, v, 10.0, 5)
            for t, r, v in zip(ids, VERIMAP_RIGHT, VERIMAP_VERIFIED, strict=True)
        ],
        # react's records say verified (as older runs wrote them): it has no checks to vouch.
        "react": [_record(t, "react", r, 1, 5.0, 2) for t, r in zip(ids, REACT_RIGHT, strict=True)],
        "sc": [_record(t, "sc", r, 0, 8.0, 4) for t, r in zip(ids, SC_RIGHT, strict=True)],
    }
    for method, records in rows.items():
        _write(tmp_path, "gsm8k", method, records)
    pairs = vq.interleave([window], ["sc", "react", "verimap"])
    cells = vq.read_cells(tmp_path, pairs, [window], {})
    return vq.render("## header", {"gsm8k": window.ids}, cells, 3)


def _line(md: str, start: str) -> str:
    return next(x for x in md.splitlines() if x.startswith(start))


def _share(k: int, n: int) -> str:
    p = proportion(k, n)
    return f"{k}/{n} = {100 * k / n:.0f}% ({100 * p.low:.0f}%–{100 * p.high:.0f}%)"


def test_summary_rows_give_accuracy_precision_coverage_and_table_4_errors(filled):
    row = _line(filled, "| verimap |")
    # 7 of 10 right; 6 verified, 5 of them right: precision 5/6, coverage 6/10; one verified
    # answer is wrong (FP) and two right answers are unverified (FN).
    assert _share(7, 10) in row and _share(5, 6) in row and _share(6, 10) in row
    assert "5/6 = 83% (44%–97%)" in row  # Wilson, by hand: (p + z²/2n ± z√(…)) / (1 + z²/n)
    assert "| 6 |" in row and "| 1 (10%) / 2 (20%) |" in row
    assert row.endswith("| 5.0 | 50 | 10.0 s | 2.00× |")  # 10 s per task, react's 5 s
    react = _line(filled, "| react |")
    assert _share(5, 10) in react and "| – | – | – | – |" in react  # no checks: none verified
    assert react.endswith("| 2.0 | 20 | 5.0 s | 1.00× |")
    assert _share(6, 10) in _line(filled, "| sc |")


def test_paired_comparisons_give_wins_losses_mcnemar_and_the_bootstrap_interval(filled):
    pairs = list(zip(map(bool, VERIMAP_RIGHT), map(bool, REACT_RIGHT), strict=True))
    low, high = paired_bootstrap_ci(pairs, seed=0)
    row = _line(filled, f"| verimap | react | 10 | {_share(7, 10)} |")
    # verimap right where react is wrong on 3 tasks, wrong where react is right on 1.
    assert f"| 3 | 1 | {mcnemar_exact(3, 1):.3g} |" in row and mcnemar_exact(3, 1) == 0.625
    assert row.endswith(f"| +20.0 ({100 * low:+.1f} to {100 * high:+.1f}) |")
    sc = _line(
        filled, f"| verimap | sc | 10 | {_share(7, 10)} |"
    )  # wins on tasks 5 and 6, loses on 9
    assert f"| 2 | 1 | {mcnemar_exact(2, 1):.3g} |" in sc


def test_risk_coverage_points_and_the_per_task_table(filled):
    assert "| 0% | 0 | 0 | – |" in filled
    assert "| 60% | 6 | 1 | 17% |" in filled  # the verified answers only
    assert "| 100% | 10 | 3 | 30% |" in filled
    # V marks an answer verified by a method with checks; react's own flag is not believed.
    assert "| gsm8k/0 | ✓ 8 s, 4 | ✓ 5 s, 2 | ✓ V 10 s, 5 |" in filled
    assert "| gsm8k/7 | ✗ 8 s, 4 | ✗ 5 s, 2 | ✗ V 10 s, 5 |" in filled


def test_pens_table_gives_every_run_and_the_ratio_of_median_times(tmp_path):
    react = [
        _record("pens", "react", 1, 1, w, 2, run=r, bench="pens")
        for r, w in enumerate([30, 40, 50])
    ]
    ours = [
        _record("pens", "verimap", r != 1, 1, w, 6, run=r, bench="pens")
        for r, w in enumerate([60, 100, 70])
    ]
    _write(tmp_path, "pens", "react", react)
    _write(tmp_path, "pens", "verimap", ours)
    md = vq.render("## h", {}, vq.read_cells(tmp_path, vq.pens_pairs(), [], {}), 3)
    assert "| react | ✓ 30 s, 2 | ✓ 40 s, 2 | ✓ 50 s, 2 | 3/3 | 40.0 s |" in md
    assert "| verimap | ✓ V 60 s, 6 | ✗ V 100 s, 6 | ✓ V 70 s, 6 | 2/3 | 70.0 s |" in md
    assert "verimap's median time over react's: 1.75×" in md


def _write_timed(runs_dir: Path, bench: str, method: str, records: list[dict], model_s: float):
    """`_write` with a trace per record whose one model call took `model_s` seconds."""
    records = [{**r, "trace": f"traces/{r['task_id']}-{r['run']}.jsonl"} for r in records]
    _write(runs_dir, bench, method, records)
    for r in records:
        trace = vq.cell_dir(runs_dir, bench, method) / r["trace"]
        trace.parent.mkdir(parents=True, exist_ok=True)
        trace.write_text(json.dumps({"type": "model_call", "data": {"duration_s": model_s}}) + "\n")


# verimap: 50 tokens in 5 s a task (10 tokens/s); react: 20 tokens a task, at 30 or 10 tokens/s.
@pytest.mark.parametrize(
    ("react_model_s", "shown"), [(2 / 3, "not comparable: 10 vs 30 tokens/s"), (2.0, "2.00×")]
)
def test_times_are_divided_only_when_both_were_taken_at_one_speed(
    tmp_path, monkeypatch, react_model_s, shown
):
    monkeypatch.setattr(sys.modules["_common"], "RATE_MIN_TOKENS", 5)
    window = _window(2)
    ours = [_record(t, "verimap", 1, 1, 10.0, 5) for t in window.ids]
    _write_timed(tmp_path, "gsm8k", "verimap", ours, 5.0)
    theirs = [_record(t, "react", 1, 0, 5.0, 2) for t in window.ids]
    _write_timed(tmp_path, "gsm8k", "react", theirs, react_model_s)
    cells = vq.read_cells(tmp_path, vq.interleave([window], ["react", "verimap"]), [window], {})
    md = vq.render("## h", {"gsm8k": window.ids}, cells, 3)
    assert _line(md, "| verimap |").endswith(f"| 10.0 s | {shown} |")
    assert _line(md, "| react |").endswith("| 5.0 s | 1.00× |")


def test_a_cell_of_short_answers_has_no_speed_so_its_time_is_divided(tmp_path):
    """Ten tokens a call read off a long prompt measure the prompt, not the host."""
    window = _window(2)
    ours = [_record(t, "verimap", 1, 1, 10.0, 5) for t in window.ids]
    _write_timed(tmp_path, "gsm8k", "verimap", ours, 5.0)
    theirs = [_record(t, "react", 1, 0, 5.0, 2) for t in window.ids]
    _write_timed(tmp_path, "gsm8k", "react", theirs, 2 / 3)
    cells = vq.read_cells(tmp_path, vq.interleave([window], ["react", "verimap"]), [window], {})
    assert all(c.generation_rate is None for c in cells)
    md = vq.render("## h", {"gsm8k": window.ids}, cells, 3)
    assert _line(md, "| verimap |").endswith("| 10.0 s | 2.00× |")


def test_the_pens_ratio_is_withheld_when_the_two_ran_at_different_speeds(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules["_common"], "RATE_MIN_TOKENS", 5)
    react = [_record("pens", "react", 1, 0, 10.0, 2, run=r, bench="pens") for r in range(3)]
    ours = [_record("pens", "verimap", 1, 1, 30.0, 5, run=r, bench="pens") for r in range(3)]
    _write_timed(tmp_path, "pens", "react", react, 2 / 3)
    _write_timed(tmp_path, "pens", "verimap", ours, 5.0)
    md = vq.render("## h", {}, vq.read_cells(tmp_path, vq.pens_pairs(), [], {}), 3)
    assert "verimap's median time over react's: not comparable: 10 vs 30 tokens/s" in md


def test_directories_are_refused_without_resume_or_with_another_seed_model_or_k(tmp_path):
    pairs = vq.interleave([_window(1)], ["sc"])
    vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4}, resume=False)  # nothing there yet
    out = vq.cell_dir(tmp_path, "gsm8k", "sc")
    out.mkdir()
    config = {
        "verimap_eval": 1,
        "benchmark": "gsm8k",
        "method": "sc",
        "seed": 3,
        "model": "m",
        "samples": 4,
    }
    (out / CONFIG).write_text(json.dumps(config))
    ResultsLog(out / RESULTS).append(_record("gsm8k/0", "sc", 1, 0, 1.0, 4))
    with pytest.raises(RunDirError, match="--resume"):
        vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4}, resume=False)
    vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4}, resume=True)
    with pytest.raises(RunDirError, match="seed"):
        vq.check_dirs(pairs, tmp_path, 4, "m", {"sc": 4}, resume=True)
    with pytest.raises(RunDirError, match="model 'm', not 'other'"):
        vq.check_dirs(pairs, tmp_path, 3, "other", {"sc": 4}, resume=True)
    with pytest.raises(RunDirError, match="samples 4, not 6"):
        vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 6}, resume=True)


def test_verimap_s_directory_is_refused_under_another_ballot(tmp_path):
    pairs = vq.interleave([_window(1)], ["verimap"])
    for ballot in BALLOTS:  # nothing there yet: any ballot may start it
        vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4}, resume=False, ballot=ballot)
        vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4}, resume=True, ballot=ballot)
    out = vq.cell_dir(tmp_path, "gsm8k", "verimap")
    out.mkdir()
    config = {
        "verimap_eval": 1,
        "benchmark": "gsm8k",
        "method": "verimap",
        "seed": 3,
        "model": "m",
        "run_config": {"verify": {"ballot": "strict"}},
    }
    (out / CONFIG).write_text(json.dumps(config))
    vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4}, resume=True)  # the default: strict
    with pytest.raises(RunDirError, match="ballot 'strict', not 'mixed'"):
        vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4}, resume=True, ballot="mixed")
    # Written before ballots had names: the mixed one's.
    del config["run_config"]["verify"]["ballot"]
    (out / CONFIG).write_text(json.dumps(config))
    vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4}, resume=True, ballot="mixed")
    with pytest.raises(RunDirError, match="ballot 'mixed', not 'strict'"):
        vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4}, resume=True)


def test_sc_is_given_at_least_verimaps_calls_unless_k_is_set(tmp_path):
    """Same compute: unset, k is verimap's mean calls per task on this draw rounded up (6.7 ->
    7), and the benchmark's default only before verimap has run."""
    window = _window(3)
    assert vq.matched_samples(tmp_path, [window])[0] == vq.DEFAULT_SAMPLES
    calls = [6, 7, 7]
    _write(
        tmp_path,
        "gsm8k",
        "verimap",
        [_record(t.id, "verimap", 1, 1, 10.0, c) for t, c in zip(window.tasks, calls, strict=True)]
        + [_record("gsm8k/99", "verimap", 1, 1, 10.0, 40)],
    )
    k, why = vq.matched_samples(tmp_path, [window])
    assert k == 7 and "verimap's mean calls" in why  # 6.67, the undrawn task left out
    _write(tmp_path, "gsm8k", "sc", [], samples=4)  # started before verimap ran: resumed as is
    assert vq.matched_samples(tmp_path, [window]) == (4, "as this draw's sc directory was started")


# ---- a run, interrupted and resumed -------------------------------------------------------------


class Oracle:
    """Answers every GSM8K question with its gold number; at call `stop_at` it stops the run
    (as Ctrl-C or SIGTERM does) and never answers."""

    name = "oracle"
    supports_tools = False

    def __init__(self, golds: dict[str, str], stop_at: int = 0):
        self.golds, self.stop_at = golds, stop_at
        self.asked: list[str] = []
        self.run: asyncio.Task | None = None

    async def request(self, req: ModelRequest) -> ModelResponse:
        text = req.messages[0].content
        self.asked.append(next(q for q in self.golds if q in text))
        if len(self.asked) == self.stop_at and self.run is not None:
            self.run.cancel()
            await asyncio.sleep(30)
        gold = self.golds[self.asked[-1]]
        return ModelResponse(
            content=f"Step by step.\nThe answer is {gold}.",
            usage=Usage(calls=1, prompt_tokens=50, completion_tokens=10),
        )


async def _run(pairs, tmp_path, model, notes, samples=None):
    extra = vq.cell_configs(7, "oracle", [])
    extra["gsm8k"] = {"seed": 7, "model": "oracle"}
    runner = vq.eval_runner(
        {"executor": model},
        InProcessSandboxDouble(),
        tmp_path,
        {"sampling": {"temperature": 0.0}},
        samples or {"sc": 2},
        extra,
        notes,
    )
    model.run = asyncio.current_task()
    await vq.run_pairs(pairs, runner)


async def test_a_resumed_run_skips_the_pairs_an_interrupted_one_finished(tmp_path):
    window = _window(3)
    golds = {t.prompt.split("\n\nSolve")[0]: t.gold for t in window.tasks}
    question = {t.id: t.prompt.split("\n\nSolve")[0] for t in window.tasks}
    pairs = vq.interleave([window], ["bare", "sc"])  # sc draws k = 2 samples
    notes: dict = {}
    # Calls: task 0 bare (1), sc (2, 3); task 1 sc (4, 5: stopped there), bare, ...
    first = Oracle(golds, stop_at=5)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(_run(pairs, tmp_path, first, notes))
    assert not notes
    todo = vq.unfinished(pairs, tmp_path)
    assert [(p.task.id, p.method) for p in todo] == [
        ("gsm8k/1", "sc"),
        ("gsm8k/1", "bare"),
        ("gsm8k/2", "bare"),
        ("gsm8k/2", "sc"),
    ]

    second = Oracle(golds)
    await asyncio.create_task(_run(todo, tmp_path, second, notes))
    t1, t2 = question["gsm8k/1"], question["gsm8k/2"]
    assert second.asked == [t1, t1, t1, t2, t2, t2]  # nothing of task 0 runs again
    assert vq.unfinished(pairs, tmp_path) == []
    for method in ("bare", "sc"):
        out = vq.cell_dir(tmp_path, "gsm8k", method)
        lines = (out / RESULTS).read_text().splitlines()
        assert sorted(json.loads(x)["key"] for x in lines) == [
            "r0/gsm8k/0",
            "r0/gsm8k/1",
            "r0/gsm8k/2",
        ]
        config = json.loads((out / CONFIG).read_text())
        assert (config["seed"], config["model"], config["method"]) == (7, "oracle", method)
    assert json.loads((vq.cell_dir(tmp_path, "gsm8k", "sc") / CONFIG).read_text())["samples"] == 2
    cells = vq.read_cells(tmp_path, pairs, [window], notes)
    assert all(r.correct for c in cells for r in c.rows)
    assert [r.calls for c in cells for r in c.rows] == [1, 1, 1, 2, 2, 2]


def test_a_finished_run_reports_from_its_directories_without_starting_a_server(tmp_path):
    window = vq.draw_window("gsm8k", 2, seed=5)
    runs = tmp_path / "runs"
    for method in ("bare", "verimap"):
        records = [_record(t, method, 1, 1, 3.0, 1) for t in window.ids]
        _write(runs, "gsm8k", method, records, seed=5, model="qwen2.5-coder-1.5b")
    out = tmp_path / "vq.md"
    argv = [
        "--seed",
        "5",
        "--gsm8k",
        "2",
        "--humaneval",
        "0",
        "--mbpp",
        "0",
        "--methods",
        "bare,verimap",
        "--runs-dir",
        str(runs),
        "--out",
        str(out),
        "--resume",
    ]
    assert vq.main(argv) == 0
    md = out.read_text()
    assert "seed: **5**" in md and ", ".join(window.ids) in md
    assert "verimap's measured mean calls per task: gsm8k 1.0" in md
    assert f"| {window.ids[0]} | ✓ 3 s, 1 | ✓ V 3 s, 1 |" in md
    assert vq.main(argv[:-1]) == 2  # the same directories without --resume are refused


def test_report_only_rebuilds_the_tables_of_an_unfinished_run_and_runs_nothing(tmp_path):
    window = vq.draw_window("gsm8k", 2, seed=5)
    runs = tmp_path / "runs"
    _write(
        runs,
        "gsm8k",
        "verimap",
        [_record(window.ids[0], "verimap", 1, 1, 3.0, 1)],
        seed=5,
        model="qwen2.5-coder-1.5b",
    )
    out = tmp_path / "vq.md"
    argv = [
        "--seed",
        "5",
        "--gsm8k",
        "2",
        "--humaneval",
        "0",
        "--mbpp",
        "0",
        "--methods",
        "verimap",
        "--runs-dir",
        str(runs),
        "--out",
        str(out),
        "--report-only",
    ]
    assert vq.main(argv) == 0  # no server: nothing left is run
    md = out.read_text()
    assert "(report only: 1 pairs not run; continue with --resume)" in md
    assert f"| {window.ids[0]} | ✓ V 3 s, 1 |" in md and f"| {window.ids[1]} | – |" in md
    empty = [str(tmp_path / "none") if a == str(runs) else a for a in argv]
    assert vq.main(empty) == 2  # nothing recorded there: an error, not an empty report


def test_an_interrupted_run_still_writes_its_tables(tmp_path):
    async def stopped() -> None:
        raise asyncio.CancelledError

    out = tmp_path / "t.md"
    code = vq.run_then_report(stopped(), lambda cut: f"cut short: {cut}\n", str(out), "--resume")
    assert code == 130 and out.read_text() == "cut short: True\n"


def test_the_planned_variant_runs_as_verimap_under_the_planner_policy():
    strict = {"verify": {"ballot": "strict"}}
    method, config = vq.run_as(vq.PLANNED, {"policies": ["small-model"], **strict})
    assert method == "verimap"
    assert config == {"policies": ["small-model-planner"], **strict}
    assert vq.run_as("react", {"policies": ["small-model"]}) == (
        "react",
        {"policies": ["small-model"]},
    )
    assert vq.parse_args(["--seed", "1", "--methods", f"react,{vq.PLANNED}"]).methods == (
        f"react,{vq.PLANNED}"
    )


def test_each_verimap_variant_is_compared_with_every_other_method(tmp_path):
    window = _window(4)
    ids = window.ids
    _write(tmp_path, "gsm8k", "verimap", [_record(t, "verimap", 1, 1, 9.0, 3) for t in ids])
    planned = [_record(t, "verimap", i % 2, 0, 9.0, 3) for i, t in enumerate(ids)]
    _write(tmp_path, "gsm8k", vq.PLANNED, planned)
    _write(tmp_path, "gsm8k", "react", [_record(t, "react", 0, 0, 5.0, 2) for t in ids])
    pairs = vq.interleave([window], ["react", "verimap", vq.PLANNED])
    cells = vq.read_cells(tmp_path, pairs, [window], {})
    md = vq.render("## header", {"gsm8k": ids}, cells, 3)
    assert _line(md, "| verimap | react | 4 |").count("| 4 | 0 |") == 1
    assert "| 2 | 0 |" in _line(md, f"| {vq.PLANNED} | react | 4 |")
    assert "| 0 | 2 |" in _line(md, f"| {vq.PLANNED} | verimap | 4 |")


# ---- sc matched to each verimap method ----------------------------------------------------------


def _calls(tmp_path, method: str, window, calls: list[int]) -> None:
    """`method`'s directory with one right, verified record per task of `window` at `calls`,
    and one of a task outside the draw at 99 calls."""
    records = [
        _record(t.id, vq.run_as(method)[0], 1, 1, 10.0, c)
        for t, c in zip(window.tasks, calls, strict=True)
    ]
    _write(tmp_path, "gsm8k", method, [*records, _record("gsm8k/99", "verimap", 1, 1, 1.0, 99)])


def test_each_sc_cell_is_matched_to_its_own_verimap_method(tmp_path):
    assert vq.MATCHED == {"sc": "verimap", "sc-planned": "verimap-planned"}
    window = _window(3)
    assert vq.matched_samples(tmp_path, [window], "sc-planned") == (
        vq.DEFAULT_SAMPLES,
        f"the default: verimap-planned has not run on this draw in {tmp_path}",
    )
    _calls(tmp_path, "verimap", window, [3, 3, 4])
    _calls(tmp_path, vq.PLANNED, window, [29, 30, 30])
    assert vq.matched_samples(tmp_path, [window], "sc") == (
        4,
        "verimap's mean calls on this draw, rounded up",
    )
    assert vq.matched_samples(tmp_path, [window], "sc-planned") == (
        30,
        "verimap-planned's mean calls on this draw, rounded up",
    )
    both = ["sc", "verimap", "verimap-planned", "sc-planned"]
    assert {m: k for m, (k, _) in vq.sample_counts(tmp_path, [window], both, None).items()} == {
        "sc": 4,
        "sc-planned": 30,
    }
    # --samples sets every sc cell's k; a cell is named only when it or its method runs.
    assert vq.sample_counts(tmp_path, [window], both, 5) == {
        "sc": (5, "set with --samples"),
        "sc-planned": (5, "set with --samples"),
    }
    assert list(vq.sample_counts(tmp_path, [window], ["bare", "verimap"], None)) == ["sc"]


def test_a_started_sc_cell_keeps_its_k_and_is_refused_another(tmp_path):
    window = _window(2)
    _calls(tmp_path, vq.PLANNED, window, [30, 30])
    _write(tmp_path, "gsm8k", "sc-planned", [], seed=3, model="m", samples=12)
    assert vq.matched_samples(tmp_path, [window], "sc-planned") == (
        12,
        "as this draw's sc-planned directory was started",
    )
    assert vq.matched_samples(tmp_path, [window], "sc")[0] == vq.DEFAULT_SAMPLES
    pairs = vq.interleave([window], ["sc", "sc-planned"])
    vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4, "sc-planned": 12}, resume=True)
    with pytest.raises(RunDirError, match="samples 12, not 30"):
        vq.check_dirs(pairs, tmp_path, 3, "m", {"sc": 4, "sc-planned": 30}, resume=True)


def test_the_report_names_each_sc_cell_s_k_and_what_it_is_matched_to(tmp_path):
    window = vq.draw_window("gsm8k", 2, seed=5)
    runs = tmp_path / "runs"
    pinned = {"seed": 5, "model": "qwen2.5-coder-1.5b"}
    for method, calls in (("verimap", 3), (vq.PLANNED, 30)):
        records = [_record(t, "verimap", 1, 1, 3.0, calls) for t in window.ids]
        _write(runs, "gsm8k", method, records, **pinned)
    right = [_record(t, "sc", i, 0, 3.0, 12) for i, t in enumerate(window.ids)]
    _write(runs, "gsm8k", "sc-planned", right, samples=12, **pinned)
    out = tmp_path / "vq.md"
    argv = ["--seed", "5", "--gsm8k", "2", "--mbpp", "0", "--runs-dir", str(runs)]
    argv += ["--methods", "sc,verimap,verimap-planned,sc-planned", "--out", str(out)]
    assert vq.main([*argv, "--report-only"]) == 0
    md = out.read_text()
    assert (
        "- sc: k = **3** samples per task (verimap's mean calls on this draw, rounded up), "
        "matched to verimap; verimap's measured mean calls per task: gsm8k 3.0\n"
    ) in md
    assert (
        "- sc-planned: k = **12** samples per task (as this draw's sc-planned directory was "
        "started), matched to verimap-planned; verimap-planned's measured mean calls per task: "
        "gsm8k 30.0\n"
    ) in md
    # Compared with each verimap method; sc-planned ran as sc, so it verifies nothing.
    assert "| 1 | 0 |" in _line(md, f"| {vq.PLANNED} | sc-planned | 2 |")
    assert "| 1 | 0 |" in _line(md, "| verimap | sc-planned | 2 |")
    assert "| – | – | – | – |" in _line(md, "| sc-planned | 2 |")
    assert vq.main([*argv, "--report-only", "--samples", "3"]) == 2  # sc-planned holds k = 12


def test_sc_planned_is_a_method_that_runs_as_sc_wherever_sc_runs(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # the help on one line: no break at a hyphen
    assert vq.run_as("sc-planned", {"policies": ["small-model"]}) == (
        "sc",
        {"policies": ["small-model"]},
    )
    assert vq.parse_args(["--seed", "1", "--methods", "sc,sc-planned"]).methods == "sc,sc-planned"
    with pytest.raises(SystemExit):
        vq.parse_args(["--help"])
    shown = capsys.readouterr().out
    assert "rag, verimap-planned, sc-planned (" in shown
    assert "sc-planned: sc with k matched to verimap-planned's calls" in shown
    gsm = _window(3)
    mbpp = vq.Window(get_benchmark("mbpp"), get_benchmark("mbpp").tasks()[:1])
    qa = vq.Window(get_benchmark("multihoprag"), get_benchmark("multihoprag").tasks()[:1])
    pairs = vq.interleave([gsm, mbpp, qa], ["sc", "verimap-planned", "sc-planned"])
    for w in (gsm, mbpp, qa):
        for t in w.tasks:
            ran = [p.method for p in pairs if p.task is t]
            assert sorted(ran) == ["sc", "sc-planned", "verimap-planned"]
    assert [p.method for p in pairs if p.task is gsm.tasks[1]] == [
        "verimap-planned",
        "sc-planned",
        "sc",
    ]


async def test_each_sc_cell_samples_its_own_k_and_records_it(tmp_path):
    window = _window(1)
    golds = {t.prompt.split("\n\nSolve")[0]: t.gold for t in window.tasks}
    pairs = vq.interleave([window], ["sc", "sc-planned"])
    model, notes = Oracle(golds), {}
    await asyncio.create_task(_run(pairs, tmp_path, model, notes, {"sc": 2, "sc-planned": 3}))
    assert not notes and len(model.asked) == 5
    planned = json.loads((vq.cell_dir(tmp_path, "gsm8k", "sc-planned") / CONFIG).read_text())
    assert (planned["method"], planned["samples"], planned["variant"]) == ("sc", 3, "sc-planned")
    cells = vq.read_cells(tmp_path, pairs, [window], notes)
    assert [(c.method, [r.calls for r in c.rows]) for c in cells] == [
        ("sc", [2]),
        ("sc-planned", [3]),
    ]
