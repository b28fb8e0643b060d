"""An eval directory is written only once it is known to be the run's own: nothing in a
refused directory changes, and no finished record is dropped or paid for twice."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from verimap.cli import main
from verimap.config import PARTS, WHOLE, RunConfig
from verimap.evals.attempt import Attempt, task_key, trace_rel
from verimap.evals.run_dir import changed_settings, migrated, read_config
from verimap.evals.runner import (
    CONFIG,
    MARK,
    RESULTS,
    ResultsLog,
    RunDirError,
    is_eval_config,
    run_eval,
)
from verimap.evals.tasksets import get_benchmark
from verimap.testing import oracle_models

from .conftest import SAMPLES

FOREIGN = b'{"id": 1, "score": 0.5}\n{"id": 2, "score": 0.25}'


def _bench():
    return get_benchmark("gsm8k", SAMPLES)


async def _first_run(out, sandbox, limit=2):
    bench = _bench()
    models = oracle_models(bench.tasks())
    await run_eval(bench, "react", models, sandbox, out, limit=limit, progress=False)
    return bench, models


def _snapshot(d):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


async def test_a_refused_run_leaves_a_last_record_without_its_newline_as_it_was(tmp_path, sandbox):
    bench, models = await _first_run(tmp_path, sandbox)
    results = tmp_path / RESULTS
    results.write_bytes(results.read_bytes().rstrip(b"\n"))  # the newline never reached disk
    before = results.read_bytes()
    with pytest.raises(RunDirError, match="--resume"):
        await run_eval(bench, "react", models, sandbox, tmp_path, limit=2, progress=False)
    with pytest.raises(RunDirError, match="method"):
        await run_eval(
            bench, "map", models, sandbox, tmp_path, limit=2, resume=True, progress=False
        )
    assert results.read_bytes() == before


async def test_resume_keeps_a_complete_last_record_without_its_newline(tmp_path, sandbox, capsys):
    bench, models = await _first_run(tmp_path, sandbox)
    results = tmp_path / RESULTS
    kept = results.read_bytes().rstrip(b"\n")
    results.write_bytes(kept)
    calls = models["executor"].calls
    again = await run_eval(
        bench, "react", models, sandbox, tmp_path, limit=3, resume=True, progress=False
    )
    assert again.tally.skipped == 2 and again.tally.done == 3
    assert models["executor"].calls - calls == 2  # only the third task ran: a tool call, an answer
    assert results.read_bytes().startswith(kept + b"\n")
    keys = [json.loads(line)["key"] for line in results.read_text().splitlines()]
    assert keys == [task_key(0, t.id) for t in bench.tasks()[:3]]
    assert "torn" not in capsys.readouterr().err


async def test_resume_drops_a_torn_last_line_and_names_it(tmp_path, sandbox, capsys):
    bench, models = await _first_run(tmp_path, sandbox)
    results = tmp_path / RESULTS
    whole = results.read_bytes()
    results.write_bytes(whole[: len(whole) - 40])  # the second record cut mid-write
    again = await run_eval(
        bench, "react", models, sandbox, tmp_path, limit=2, resume=True, progress=False
    )
    assert again.tally.skipped == 1 and again.tally.done == 2
    assert f"{results}:2: a torn last line" in capsys.readouterr().err
    keys = [json.loads(line)["key"] for line in results.read_text().splitlines()]
    assert sorted(keys) == sorted(task_key(0, t.id) for t in bench.tasks()[:2])


@pytest.mark.parametrize("resume", [False, True], ids=["fresh", "resume"])
async def test_another_tools_results_file_is_refused_and_left_untouched(tmp_path, sandbox, resume):
    (tmp_path / RESULTS).write_bytes(FOREIGN)
    before = _snapshot(tmp_path)
    bench = _bench()
    with pytest.raises(RunDirError, match="not a verimap eval directory"):
        await run_eval(
            bench,
            "react",
            oracle_models(bench.tasks()),
            sandbox,
            tmp_path,
            limit=1,
            resume=resume,
            progress=False,
        )
    assert _snapshot(tmp_path) == before and sorted(os.listdir(tmp_path)) == [RESULTS]


async def test_a_config_that_looks_like_verimaps_does_not_make_foreign_lines_records(
    tmp_path, sandbox
):
    """An older verimap config.json (no marker) beside lines that are not verimap records: the
    lines are refused by file:line, not read as records (no KeyError), and nothing changes."""
    bench = _bench()
    old = {"benchmark": "gsm8k", "method": "react", "run_config": {}}
    (tmp_path / CONFIG).write_text(json.dumps(old))
    (tmp_path / RESULTS).write_bytes(FOREIGN)
    before = _snapshot(tmp_path)
    with pytest.raises(RunDirError, match=rf"{RESULTS}:1: not a verimap result record"):
        await run_eval(
            bench,
            "react",
            oracle_models(bench.tasks()),
            sandbox,
            tmp_path,
            limit=1,
            resume=True,
            progress=False,
        )
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "config",
    [{"benchmark": "gsm8k", "method": "react"}, ["gsm8k"], "{not json"],
    ids=["other-fields", "a-list", "not-json"],
)
async def test_a_config_json_verimap_did_not_write_is_refused(tmp_path, sandbox, config):
    bench = _bench()
    text = config if isinstance(config, str) else json.dumps(config)
    (tmp_path / CONFIG).write_text(text)
    with pytest.raises(RunDirError, match="not a verimap eval directory"):
        await run_eval(
            bench, "react", oracle_models(bench.tasks()), sandbox, tmp_path, limit=1, progress=False
        )
    assert sorted(os.listdir(tmp_path)) == [CONFIG] and (tmp_path / CONFIG).read_text() == text


async def test_a_non_empty_folder_that_is_no_eval_directory_is_refused(tmp_path, sandbox):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "data").mkdir()
    bench = _bench()
    with pytest.raises(RunDirError, match=r"is not empty \(data, notes\.txt\)"):
        await run_eval(
            bench, "react", oracle_models(bench.tasks()), sandbox, tmp_path, limit=1, progress=False
        )
    assert sorted(os.listdir(tmp_path)) == ["data", "notes.txt"]


async def test_new_directories_are_marked_and_older_ones_still_resume(tmp_path, sandbox):
    bench, models = await _first_run(tmp_path, sandbox)
    cfg = json.loads((tmp_path / CONFIG).read_text())
    assert cfg[MARK] == 1 and cfg["verimap_version"] and is_eval_config(cfg)
    for k in (MARK, "verimap_version"):  # as verimap wrote it before the marker
        del cfg[k]
    (tmp_path / CONFIG).write_text(json.dumps(cfg))
    again = await run_eval(
        bench, "react", models, sandbox, tmp_path, limit=3, resume=True, progress=False
    )
    assert again.tally.skipped == 2 and again.tally.done == 3
    assert json.loads((tmp_path / CONFIG).read_text())[MARK] == 1
    left = tmp_path / "left"
    left.mkdir()
    (left / ".lock").touch()  # all a run stopped before its first write leaves
    done = await run_eval(bench, "react", models, sandbox, left, limit=1, progress=False)
    assert done.tally.done == 1


async def test_a_resume_with_other_settings_is_refused_before_anything_changes(tmp_path, sandbox):
    """Records run under other settings would be scored in one report as if alike."""
    bench, models = await _first_run(tmp_path, sandbox)
    before = _snapshot(tmp_path)
    with pytest.raises(
        RunDirError, match=r"other settings \(sampling\.temperature: 1\.0 -> 0\.5\)"
    ):
        await run_eval(
            bench,
            "react",
            models,
            sandbox,
            tmp_path,
            limit=3,
            resume=True,
            config={"sampling": {"temperature": 0.5}},
            progress=False,
        )
    assert _snapshot(tmp_path) == before
    again = await run_eval(
        bench,
        "react",
        models,
        sandbox,
        tmp_path,
        limit=3,
        resume=True,
        config={"loop": {"max_parallel": 1}},
        progress=False,
    )
    assert again.tally.skipped == 2 and again.tally.done == 3


def test_the_command_names_the_changed_setting_of_a_resume(tmp_path):
    args = [
        "eval",
        "-b",
        "gsm8k",
        "-m",
        "react",
        "-n",
        "1",
        "-o",
        str(tmp_path),
        "--data-dir",
        str(SAMPLES),
        "--models-factory",
        "verimap.testing:oracle_factory",
        "--sandbox",
        "process",
        "--quiet",
    ]
    assert CliRunner().invoke(main, args).exit_code == 0
    r = CliRunner().invoke(main, [*args, "-n", "2", "--resume", "--temperature", "0.2"])
    assert r.exit_code == 1 and "other settings (sampling.temperature: 1.0 -> 0.2)" in " ".join(
        r.output.split()
    ), r.output
    assert len((tmp_path / RESULTS).read_text().splitlines()) == 1


def test_a_ballot_older_directories_never_wrote_is_the_mixed_one():
    """Before ballots had names the default ballot was the mixed one; a method that never
    verifies may have written any ballot."""
    full = {"verify": {"verification": "full"}}
    assert changed_settings(full, {"verify": {"verification": "full", "ballot": "mixed"}}) == []
    assert changed_settings(full, {"verify": {"verification": "full", "ballot": "strict"}}) == [
        "verify.ballot: 'mixed' -> 'strict'"
    ]
    react = {"verify": {"verification": "none", "ballot": "mixed"}}
    strict = {"verify": {"verification": "none", "ballot": "strict"}}
    assert changed_settings(react, strict) == []
    assert changed_settings(full, strict) == [
        "verify.ballot: 'mixed' -> 'strict'",
        "verify.verification: 'full' -> 'none'",
    ]


def test_the_command_refuses_a_foreign_folder_with_a_message_not_a_traceback(tmp_path):
    (tmp_path / RESULTS).write_bytes(FOREIGN)
    r = CliRunner().invoke(
        main,
        [
            "eval",
            "-b",
            "gsm8k",
            "-m",
            "react",
            "-n",
            "1",
            "-o",
            str(tmp_path),
            "--data-dir",
            str(SAMPLES),
            "--models-factory",
            "verimap.testing:oracle_factory",
            "--sandbox",
            "process",
            "--quiet",
        ],
    )
    assert r.exit_code == 1, r.output
    assert "is not a verimap eval directory" in " ".join(r.output.split())
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert (tmp_path / RESULTS).read_bytes() == FOREIGN and os.listdir(tmp_path) == [RESULTS]


@pytest.mark.parametrize(
    "line, why",
    [
        (b'{"key": "\xff"}', "invalid UTF-8"),
        (b"[1, 2]", "not a verimap result record"),
        (b'{"key": 3}', "not a verimap result record"),
        (b"[" * 100_000 + b"]" * 100_000, "deep"),
    ],
    ids=["bytes", "a-list", "key-not-a-string", "nesting"],
)
def test_a_bad_line_is_named_by_file_and_line(tmp_path, line, why):
    path = tmp_path / RESULTS
    path.write_bytes(b'{"key": "r0/a"}\n' + line + b'\n{"key": "r0/b"}\n')
    with pytest.raises(RunDirError, match=rf"{RESULTS}:2: .*{why}"):
        ResultsLog(path).load()


def _escaping_dispatch(out, outside, how):
    """Solves nothing: returns each task as a cluster worker would, its record naming a trace
    path that leads out of the run directory."""

    async def dispatch(task, run):
        if how == "symlink" and not (out / "linked").exists():
            (out / "linked").symlink_to(outside)  # as a shared directory may hold one
        rel = {
            "absolute": str(outside / "x.jsonl"),
            "dotdot": f"../{outside.name}/x.jsonl",
            "symlink": "linked/x.jsonl",
        }[how]
        rec = {
            "key": task_key(run, task.id),
            "run": run,
            "task_id": task.id,
            "benchmark": "gsm8k",
            "method": "react",
            "status": "success",
            "correct": True,
            "verified": True,
            "trace": rel,
        }
        return Attempt(rec["key"], record=rec, trace='{"type": "run_start"}\n', worker="w")

    return dispatch


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
async def test_a_returned_trace_is_written_inside_the_run_directory(tmp_path, capsys, how):
    out, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    bench = _bench()
    done = await run_eval(
        bench,
        "react",
        None,
        None,
        out,
        limit=1,
        progress=False,
        dispatch=_escaping_dispatch(out, outside, how),
    )
    assert done.tally.done == 1
    assert list(outside.iterdir()) == []
    (rec,) = [json.loads(x) for x in (out / RESULTS).read_text().splitlines()]
    assert rec["trace"] == str(trace_rel(0, bench.tasks()[0].id))
    assert (out / rec["trace"]).read_text() == '{"type": "run_start"}\n'
    assert "outside" in capsys.readouterr().err


async def test_a_cluster_run_refuses_a_foreign_folder_before_any_worker_starts(
    tmp_path, monkeypatch
):
    from verimap.evals import cluster

    def no_cluster(*a, **kw):
        raise AssertionError("the cluster was joined before the directory was checked")

    monkeypatch.setattr(cluster, "_ray", no_cluster)
    (tmp_path / RESULTS).write_bytes(FOREIGN)
    with pytest.raises(RunDirError, match="not a verimap eval directory"):
        await cluster.eval_on_ray(_bench(), "react", tmp_path, limit=1, progress=False)
    assert os.listdir(tmp_path) == [RESULTS] and (tmp_path / RESULTS).read_bytes() == FOREIGN


async def test_a_call_missing_its_sandbox_or_models_changes_nothing(tmp_path, sandbox):
    bench, models = await _first_run(tmp_path, sandbox)
    before = _snapshot(tmp_path)
    with pytest.raises(ValueError, match="no sandbox given"):
        await run_eval(bench, "react", models, None, tmp_path, limit=4, resume=True, progress=False)
    with pytest.raises(ValueError, match="no models given"):
        await run_eval(
            bench, "react", None, sandbox, tmp_path, limit=4, resume=True, progress=False
        )
    assert _snapshot(tmp_path) == before


def test_a_foreign_folder_is_refused_before_a_model_is_started(tmp_path, monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    out = tmp_path / "theirs"
    out.mkdir()
    (out / RESULTS).write_bytes(FOREIGN)
    r = CliRunner().invoke(
        main,
        [
            "eval",
            "-b",
            "gsm8k",
            "-m",
            "react",
            "-n",
            "1",
            "-o",
            str(out),
            "--data-dir",
            str(SAMPLES),
            "--sandbox",
            "process",
            "--quiet",
            "--model-file",
            str(tmp_path / "absent.gguf"),
        ],
    )
    assert r.exit_code == 1, r.output
    said = " ".join(r.output.split())
    assert "not a verimap eval directory" in said and "model file not found" not in said


FLAT_RUN_CONFIG = json.loads((Path(__file__).parent / "flat_run_config.json").read_text())


def test_a_flat_run_config_is_migrated_into_its_parts():
    old = {MARK: 1, "benchmark": "gsm8k", "method": "react", "run_config": FLAT_RUN_CONFIG}
    new = migrated(old)
    assert set(new["run_config"]) == {*PARTS, *WHOLE}
    assert new["run_config"]["loop"]["max_retries"] == 1
    assert new["run_config"]["verify"]["verification"] == "none"
    assert new["run_config"]["budget"] == FLAT_RUN_CONFIG["budget"]
    assert {k: v for k, v in new.items() if k != "run_config"} == {
        k: v for k, v in old.items() if k != "run_config"
    }
    assert RunConfig.model_validate(new["run_config"]).execution.executor_max_steps == 20
    assert migrated(new) == new  # a nested one stays as it is
    assert migrated({"benchmark": "gsm8k"}) == {"benchmark": "gsm8k"}
    assert migrated({"run_config": {"policies": []}}) == {"run_config": {"policies": []}}


async def test_report_compare_and_compact_read_a_flat_directory(tmp_path, sandbox):
    dirs = []
    for method in ("react", "bare"):
        out = tmp_path / method
        await run_eval(
            _bench(), method, oracle_models(_bench().tasks()), sandbox, out, limit=2, progress=False
        )
        config = json.loads((out / CONFIG).read_text())
        config["run_config"] = {**FLAT_RUN_CONFIG, "policies": None}
        (out / CONFIG).write_text(json.dumps(config))
        assert read_config(out / CONFIG)[0]["run_config"]["loop"]["max_retries"] == 1
        dirs.append(str(out))
    for args in (
        ["report", dirs[0]],
        ["compare", *dirs],
        ["compact", *dirs, "--out-file", str(tmp_path / "c.jsonl")],
    ):
        r = CliRunner().invoke(main, ["eval", *args])
        assert r.exit_code == 0 and "Traceback" not in r.output, (args, r.output)
    assert "| react |" in CliRunner().invoke(main, ["eval", "report", dirs[0]]).output
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == 4
