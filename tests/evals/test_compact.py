"""Compact results files: written from run directories, read back as records that give the
report and the comparison the directories' numbers, and accepted by `verimap eval report`,
`verimap eval compare` and made by `verimap eval compact`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from verimap.cli import main
from verimap.evals import compact
from verimap.evals.report import load_records, report_dirs
from verimap.evals.run_dir import RunDirError
from verimap.evals.runner import CONFIG, RESULTS, ResultsLog
from verimap.evals.scoring import OFFICIAL_MARK
from verimap.evals.stats import compare_records, verification_metrics


def rec(
    method: str,
    i: int,
    correct: bool,
    verified: bool,
    *,
    bench: str = "gsm8k",
    run: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "key": f"r{run}/{bench}/{i}",
        "run": run,
        "task_id": f"{bench}/{i}",
        "benchmark": bench,
        "method": method,
        "status": "success" if verified else "failed",
        "correct": correct,
        "verified": verified,
        "tokens": 100 + i,
        "wall_time_s": 2.5 + i,
        "usage": {"planner": {"calls": 1}, "executor": {"calls": 2 + i % 3}},
        "predicted": "x" * 200,
        "gold": str(i),
        "plans": [{"nodes": [{"id": "a"}, {"id": "b"}], "edges": []}],
        **extra,
    }


def write_dir(d: Path, method: str, records: list[dict[str, Any]], **config: Any) -> Path:
    d.mkdir(parents=True)
    (d / CONFIG).write_text(
        json.dumps(
            {
                "verimap_eval": 1,
                "benchmark": records[0]["benchmark"],
                "method": method,
                "run_config": {},
                **config,
            }
        )
    )
    log = ResultsLog(d / RESULTS)
    for r in records:
        log.append(r)
    return d


@pytest.fixture
def draw(tmp_path: Path) -> Path:
    """A benchmark script's runs directory: verimap and react on 12 GSM8K tasks, react's
    records saying verified as a method without checks may."""
    runs = tmp_path / "runs"
    write_dir(
        runs / "gsm8k-verimap",
        "verimap",
        [rec("verimap", i, i % 3 != 0, i % 2 == 0) for i in range(12)],
    )
    write_dir(runs / "gsm8k-react", "react", [rec("react", i, i % 4 != 0, True) for i in range(12)])
    return runs


def to_file(runs: Path, out: Path, **kw: Any) -> Path:
    compact.write_lines(compact.lines_from_dirs([runs], **kw), out, append=out.exists())
    return out


def test_a_compact_file_gives_the_statistics_of_its_run_directories(draw, tmp_path):
    f = to_file(draw, tmp_path / "d.jsonl")
    for m in ("verimap", "react"):
        assert verification_metrics(load_records([f"{f}#{m}"])) == verification_metrics(
            load_records([draw / f"gsm8k-{m}"])
        )
    from_dirs = compare_records(
        load_records([draw / "gsm8k-verimap"]), load_records([draw / "gsm8k-react"]), resamples=200
    )
    from_file = compare_records(
        load_records([f"{f}#verimap"]), load_records([f"{f}#react"]), resamples=200
    )
    assert from_file == from_dirs


def test_a_line_keeps_effort_and_cuts_answers(draw, tmp_path):
    f = to_file(draw, tmp_path / "d.jsonl")
    lines = compact.read_lines(f)
    line = next(x for x in lines if x["method"] == "verimap" and x["task"] == "gsm8k/4")
    assert line["calls"] == 4 and line["planner_calls"] == 1 and line["tokens"] == 104
    assert line["seconds"] == 6.5 and line["plans"] == 1 and line["nodes_first_plan"] == 2
    assert len(line["predicted"]) == compact.CUT and line["gold"] == "4"
    # a method without checks is never verified, whatever its records say
    assert not any(x["verified"] for x in lines if x["method"] == "react")
    assert "run" not in line  # run 0 is left out


def test_question_type_official_and_confidence_survive(tmp_path):
    runs = tmp_path / "runs"
    write_dir(
        runs / "multihoprag-rag",
        "rag",
        [
            rec(
                "rag",
                1,
                False,
                False,
                bench="multihoprag",
                run=1,
                score_detail=f"{OFFICIAL_MARK}True",
                meta={"question_type": "null_query", "confidence": 0.75},
            ),
        ],
    )
    (back,) = load_records([to_file(runs, tmp_path / "m.jsonl")])
    assert back["key"] == "r1/multihoprag/1" and back["official"] is True
    assert back["meta"] == {"question_type": "null_query", "confidence": 0.75}
    text = report_dirs([tmp_path / "m.jsonl"])
    assert "## MultiHopRAG accuracy (%) by question type" in text
    assert "| rag | official | 100.0 (1/1) | 100.0 (1/1) | 4.0 | 101 | 3.5 |" in text


def test_a_variant_is_another_method_with_the_same_checks(draw, tmp_path):
    f = to_file(draw, tmp_path / "d.jsonl")
    to_file(draw / "gsm8k-react", f, variant="--ballot mixed")
    methods = {r["method"] for r in compact.read_lines(f)}
    assert methods == {"verimap", "react", "react --ballot mixed"}
    assert not verification_metrics(load_records([f"{f}#react --ballot mixed"])).has_checks


def test_a_directory_that_records_a_variant_names_its_lines_by_it(draw, tmp_path):
    """A benchmark's variant cells (run as verimap and as sc, their config.json recording the
    variant) keep their own names beside the plain methods; --variant still names them."""
    runs = tmp_path / "cells"
    write_dir(
        runs / "gsm8k-verimap-planned",
        "verimap",
        [rec("verimap", i, i % 2 == 0, i % 2 == 0) for i in range(4)],
        variant="verimap-planned",
    )
    write_dir(runs / "gsm8k-sc", "sc", [rec("sc", i, True, True) for i in range(4)])
    write_dir(
        runs / "gsm8k-sc-planned",
        "sc",
        [rec("sc", i, i != 1, True) for i in range(4)],
        variant="sc-planned",
    )
    out = tmp_path / "cells.jsonl"
    r = cli("compact", str(draw), str(runs), "--out-file", str(out))
    assert r.exit_code == 0, r.output
    lines = compact.read_lines(out)
    assert {x["method"] for x in lines} == {
        "verimap",
        "react",
        "verimap-planned",
        "sc",
        "sc-planned",
    }
    planned = verification_metrics(load_records([f"{out}#verimap-planned"]))
    assert planned.has_checks and planned.coverage.k == 2
    sampled = verification_metrics(load_records([f"{out}#sc-planned"]))
    assert not sampled.has_checks and sampled.accuracy.k == 3  # sc's: nothing checked it
    assert not any(x["verified"] for x in lines if x["method"].startswith("sc"))
    named = tmp_path / "named.jsonl"
    r = cli("compact", str(runs / "gsm8k-sc-planned"), "--variant", "k8", "--out-file", str(named))
    assert r.exit_code == 0, r.output
    assert {x["method"] for x in compact.read_lines(named)} == {"sc k8"}


def test_a_preset_is_found_under_a_variants_name():
    from verimap.evals.stats import preset_of

    assert preset_of("map-v-1it") == "map-v-1it" and preset_of("map-v-planned") == "map-v"
    assert preset_of("verimap --ballot mixed") == "verimap"
    assert preset_of("sc-planned") == "sc" and preset_of("planned") is None


def test_the_same_task_twice_is_refused(draw, tmp_path):
    f = to_file(draw, tmp_path / "d.jsonl")
    with pytest.raises(compact.CompactError, match="twice; name one of them otherwise"):
        to_file(draw / "gsm8k-react", f)


def test_an_unknown_method_names_the_ones_there(draw, tmp_path):
    f = to_file(draw, tmp_path / "d.jsonl")
    with pytest.raises(RunDirError, match=r"no lines of method 'sc' \(it holds: react, verimap\)"):
        load_records([f"{f}#sc"])


def test_a_bad_line_is_skipped_and_named(draw, tmp_path):
    f = to_file(draw, tmp_path / "d.jsonl")
    with f.open("a") as out:
        out.write('{"task": "gsm8k/99"}\n')
    problems: list[str] = []
    assert len(load_records([f], problems)) == 24
    assert len(problems) == 1 and ":25:" in problems[0]


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["eval", *args], catch_exceptions=False)


def test_the_cli_writes_reports_and_compares_a_compact_file(draw, tmp_path):
    out = tmp_path / "draw.jsonl"
    r = cli("compact", str(draw), "--out-file", str(out))
    assert r.exit_code == 0 and f"{out}: 24 task(s) written" in r.output
    r = cli("report", str(out))
    assert r.exit_code == 0
    assert "| verimap | GSM8K | 12 | 66.7 [39.1, 86.2] | 6 |" in r.output
    assert "## Calls, tokens and seconds per task" in r.output
    r = cli("compare", f"{out}#verimap", f"{out}#react")
    assert r.exit_code == 0
    assert "wins (A right, B wrong): 2; losses (A wrong, B right): 3" in r.output
    same = cli("compare", str(draw / "gsm8k-verimap"), str(draw / "gsm8k-react"))
    assert same.output.split("## GSM8K", 1)[1] == r.output.split("## GSM8K", 1)[1]


def test_the_cli_refuses_to_overwrite_other_files_and_missing_paths(draw, tmp_path):
    other = tmp_path / "notes.jsonl"
    other.write_text("not json\n")
    r = cli("compact", str(draw), "--out-file", str(other))
    assert r.exit_code == 1 and "holds something else than compact results" in r.output
    assert other.read_text() == "not json\n"
    r = cli("compare", f"{tmp_path / 'nowhere.jsonl'}#verimap", str(draw / "gsm8k-react"))
    assert r.exit_code == 2 and "no such run directory or compact results file" in r.output
    r = cli("compact", str(tmp_path), "--out-file", str(tmp_path / "x.jsonl"))
    assert r.exit_code == 1 and "not an eval run directory" in r.output


def test_the_trace_gives_fallbacks_and_model_seconds(tmp_path):
    runs = tmp_path / "runs"
    r = rec(
        "verimap",
        1,
        True,
        True,
        trace="traces/t1.jsonl",
        fallbacks=0,
        usage={"executor": {"calls": 2, "completion_tokens": 40}},
    )
    d = write_dir(runs / "gsm8k-verimap", "verimap", [r])
    (d / "traces").mkdir()
    events = [
        {"type": "model_call", "data": {"duration_s": 1.25}},
        {"type": "model_call", "data": {"duration_s": 0.75}},
        {"type": "plan_fallback", "data": {}},
    ]
    (d / "traces" / "t1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (line,) = compact.lines_from_dirs([runs])
    assert line["model_seconds"] == 2.0 and line["fallbacks"] == 1
    assert line["completion_tokens"] == 40
    (back,) = compact.read_records(to_file(runs, tmp_path / "t.jsonl"))
    assert back["model_seconds"] == 2.0 and back["completion_tokens"] == 40


def test_a_file_of_other_lines_is_no_compact_file(draw, tmp_path):
    with pytest.raises(RunDirError, match="not a compact results file"):
        load_records([draw / "gsm8k-verimap" / RESULTS])
