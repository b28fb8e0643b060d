import json
import os
import signal
import subprocess
import sys
import time

import pytest

from verimap.evals.benchmarks import get_benchmark
from verimap.evals.doubles import oracle_models
from verimap.evals.runner import RESULTS, ResultsLog, RunDirError, dir_lock, run_eval

from .conftest import REPO, SAMPLES


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


async def test_run_writes_one_record_per_task_and_config(tmp_path, sandbox):
    bench = get_benchmark("gsm8k", SAMPLES)
    models = oracle_models(bench.tasks(), wrong_every=4)
    out = await run_eval(
        bench,
        "verimap",
        models,
        sandbox,
        tmp_path,
        limit=8,
        runs=2,
        max_concurrency=3,
        progress=False,
    )
    recs = _lines(tmp_path / RESULTS)
    assert len(recs) == 16 and len({r["key"] for r in recs}) == 16
    assert out.tally.correct == 12 and out.tally.accuracy == pytest.approx(0.75)
    assert all((tmp_path / r["trace"]).is_file() for r in recs)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert (
        cfg["benchmark"] == "gsm8k"
        and cfg["method"] == "verimap"
        and cfg["run_config"]["temperature"] == 1.0
    )
    first = recs[0]
    assert first["usage"]["planner"]["calls"] >= 1 and first["tokens"] > 0
    assert first["vf_stats"]["python"] == 1 and first["plans"]


async def test_resume_skips_finished_and_refuses_without_flag(tmp_path, sandbox):
    bench = get_benchmark("gsm8k", SAMPLES)
    models = oracle_models(bench.tasks())
    await run_eval(bench, "react", models, sandbox, tmp_path, limit=3, progress=False)
    calls = models["executor"].calls
    with pytest.raises(RunDirError, match="--resume"):
        await run_eval(bench, "react", models, sandbox, tmp_path, limit=3, progress=False)
    again = await run_eval(
        bench, "react", models, sandbox, tmp_path, limit=5, resume=True, progress=False
    )
    assert again.tally.skipped == 3 and again.tally.done == 5
    assert models["executor"].calls - calls == 2 * 2  # two new tasks, tool call + answer each
    assert len(_lines(tmp_path / RESULTS)) == 5
    with pytest.raises(RunDirError, match="method"):
        await run_eval(
            bench, "map", models, sandbox, tmp_path, limit=5, resume=True, progress=False
        )


def test_torn_last_line_is_cut_and_not_counted(tmp_path):
    log = ResultsLog(tmp_path / RESULTS)
    log.append({"key": "r0/a", "correct": True})
    with open(tmp_path / RESULTS, "a") as f:
        f.write('{"key": "r0/b", "corr')
    assert set(log.load(repair=True)) == {"r0/a"}
    log.append({"key": "r0/c", "correct": False})
    assert [r["key"] for r in _lines(tmp_path / RESULTS)] == ["r0/a", "r0/c"]


def test_corrupt_middle_line_is_an_error(tmp_path):
    (tmp_path / RESULTS).write_text('{"key": "a"}\nnot json\n{"key": "b"}\n')
    with pytest.raises(RunDirError, match="line 2"):
        ResultsLog(tmp_path / RESULTS).load()


def test_a_directory_takes_one_run_at_a_time(tmp_path):
    with dir_lock(tmp_path), pytest.raises(RunDirError, match="in use"), dir_lock(tmp_path):
        pass


async def test_infrastructure_errors_are_retried_on_resume(tmp_path, sandbox):
    bench = get_benchmark("gsm8k", SAMPLES)
    good = oracle_models(bench.tasks())

    async def explode(task, run, trace_path):
        if task.id.endswith("/1"):
            raise ConnectionError("sandbox host went away")
        from verimap.evals.methods import build_coordinator

        coord = build_coordinator("react", good, sandbox, bench.tools(sandbox))
        return await coord.run(task.prompt, trace_path=trace_path)

    first = await run_eval(
        bench, "react", good, sandbox, tmp_path, limit=3, progress=False, solver=explode
    )
    assert first.tally.done == 2 and first.tally.errors == 1
    assert "sandbox host went away" in (tmp_path / "errors.jsonl").read_text()
    second = await run_eval(
        bench, "react", good, sandbox, tmp_path, limit=3, resume=True, progress=False
    )
    assert second.tally.done == 3 and second.tally.errors == 0
    assert sorted(r["task_id"] for r in _lines(tmp_path / RESULTS)) == [
        "gsm8k/0",
        "gsm8k/1",
        "gsm8k/2",
    ]


def _start(out, *extra):
    env = {**os.environ, "VERIMAP_DOUBLE_LATENCY": "0.15", "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "verimap", "eval", "-b", "gsm8k", "-m", "react", "-n", "20", "-c", "2",
           "-o", str(out), "--sandbox", "process", "--data-dir", str(SAMPLES), "--no-progress",
           "--models-factory", "verimap.evals.doubles:factory", *extra]  # fmt: skip
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_as_from_a_terminal,
    )  # fmt: skip


def _as_from_a_terminal() -> None:
    """A shell starts background jobs with SIGINT ignored, and an ignored signal stays ignored
    across exec: under `.ci/run &` the run would never see the test's Ctrl-C and would finish."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_records(path, n, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} records after {timeout}s")


@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name
)
def test_killed_run_resumes_without_loss_or_duplicates(tmp_path, sig):
    out = tmp_path / "run"
    proc = _start(out)
    _wait_for_records(out / RESULTS, 4, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    before = list(ResultsLog(out / RESULTS).load().values())  # a SIGKILL may leave a torn line
    assert 4 <= len(before) < 20
    if sig in (signal.SIGINT, signal.SIGTERM):
        assert proc.returncode == 130 and "--resume" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    resumed = _start(out, "--resume")
    stdout, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    after = _lines(out / RESULTS)
    keys = [r["key"] for r in after]
    assert len(keys) == len(set(keys)) == 20
    assert after[: len(before)] == before  # nothing finished earlier was rewritten
    assert f"{len(before)} from before" in err
    assert "| react | 100.0 ± 0.0 (n=20, runs=1) |" in stdout
