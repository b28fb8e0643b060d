import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verimap.base.check_names import DEFAULT_BALLOT
from verimap.config import part_of
from verimap.evals.runner import (
    ERRORS,
    RESULTS,
    ResultsLog,
    RunDirError,
    dir_lock,
    run_eval,
    unscored_errors,
)
from verimap.evals.sampling import paper_sample_size, sample_tasks, select_tasks
from verimap.evals.tasksets import get_benchmark
from verimap.planning.demos import read_pool
from verimap.testing import oracle_models

from .conftest import API_KEY, REPO, SAMPLES, fast_model


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
        and cfg["run_config"]["sampling"]["temperature"] == 1.0
    )
    first = recs[0]
    assert first["usage"]["planner"]["calls"] >= 1 and first["tokens"] > 0
    assert first["vf_stats"]["python"] == 1 and first["plans"]
    assert first["vf_calls"] == {"python": 1, "llm": 1}  # one attempt, both VFs ran


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


async def test_a_directory_written_before_the_config_parts_resumes(tmp_path, sandbox):
    """config.json of an older verimap holds `run_config` flat; a resume reads each knob in its
    part, keeps the values (a setting added since, the ballot, at the value those runs had)
    and writes the config back nested."""
    bench = get_benchmark("gsm8k", SAMPLES)
    models = oracle_models(bench.tasks())
    await run_eval(bench, "react", models, sandbox, tmp_path, limit=3, progress=False)
    config = json.loads((tmp_path / "config.json").read_text())
    flat = json.loads(FLAT_RUN_CONFIG.read_text())
    del flat["ballot"]  # written before ballots had names
    config["run_config"] = flat
    (tmp_path / "config.json").write_text(json.dumps(config))
    again = await run_eval(
        bench, "react", models, sandbox, tmp_path, limit=5, resume=True, progress=False
    )
    assert again.tally.skipped == 3 and again.tally.done == 5
    written = json.loads((tmp_path / "config.json").read_text())["run_config"]
    assert written["verify"]["ballot"] == DEFAULT_BALLOT and "max_retries" not in written
    for name, value in flat.items():
        part = part_of(name)
        assert (written[name] if part is None else written[part][name]) == value, name


async def test_a_flat_directory_run_with_other_settings_is_refused_naming_the_knob(
    tmp_path, sandbox
):
    bench = get_benchmark("gsm8k", SAMPLES)
    models = oracle_models(bench.tasks())
    await run_eval(bench, "react", models, sandbox, tmp_path, limit=2, progress=False)
    config = json.loads((tmp_path / "config.json").read_text())
    config["run_config"] = {**json.loads(FLAT_RUN_CONFIG.read_text()), "executor_max_steps": 9}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunDirError, match=r"execution\.executor_max_steps: 9 -> 20"):
        await run_eval(
            bench, "react", models, sandbox, tmp_path, limit=3, resume=True, progress=False
        )


# The react method's run_config as config.json held it before `RunConfig` was nested.
FLAT_RUN_CONFIG = Path(__file__).parent / "flat_run_config.json"


def test_paper_sample_size_is_500_or_half_a_smaller_set():
    assert [paper_sample_size(n) for n in (1319, 2556, 500, 499, 164, 20, 1)] == [
        500,
        500,
        500,
        249,
        82,
        10,
        1,
    ]


def test_a_sample_is_seeded_nested_and_in_the_benchmarks_order():
    tasks = get_benchmark("gsm8k", SAMPLES).tasks()
    ids = [t.id for t in sample_tasks(tasks, 5, seed=7)]
    assert len(ids) == 5 and ids == [t.id for t in tasks if t.id in ids]
    assert ids == [t.id for t in sample_tasks(list(reversed(tasks)), 5, seed=7)][::-1]
    assert set(ids) <= {t.id for t in sample_tasks(tasks, 8, seed=7)}
    assert ids != [t.id for t in sample_tasks(tasks, 5, seed=8)]
    assert len(sample_tasks(tasks, "paper", seed=0)) == 10
    assert len(sample_tasks(tasks, 100, seed=0)) == 20
    with pytest.raises(ValueError, match="exclude each other"):
        select_tasks(tasks, limit=3, sample=3)
    with pytest.raises(ValueError, match="--seed chooses a --sample"):
        select_tasks(tasks, seed=3)
    assert select_tasks(tasks, limit=3) == tasks[:3]


async def test_a_sample_is_recorded_and_a_resume_must_keep_it(tmp_path, sandbox):
    bench = get_benchmark("gsm8k", SAMPLES)
    models = oracle_models(bench.tasks())
    await run_eval(bench, "react", models, sandbox, tmp_path, sample=4, seed=3, progress=False)
    ids = sorted(r["task_id"] for r in _lines(tmp_path / RESULTS))
    assert ids == sorted(t.id for t in sample_tasks(bench.tasks(), 4, seed=3))
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert (cfg["sample"], cfg["seed"], cfg["sample_of"], cfg["sample_rule"]) == (4, 3, 20, "4")
    calls = models["executor"].calls
    again = await run_eval(
        bench, "react", models, sandbox, tmp_path, sample=4, seed=3, resume=True, progress=False
    )
    assert again.tally.skipped == 4 and models["executor"].calls == calls
    for kw, field in (
        ({"sample": 4, "seed": 4}, "seed"),
        ({"sample": 5, "seed": 3}, "sample"),
        ({"limit": 4}, "sample"),
    ):
        with pytest.raises(RunDirError, match=f"holds a run of {field}"):
            await run_eval(
                bench, "react", models, sandbox, tmp_path, resume=True, progress=False, **kw
            )
    paper = tmp_path / "paper"
    await run_eval(bench, "react", models, sandbox, paper, sample="paper", progress=False)
    cfg = json.loads((paper / "config.json").read_text())
    assert (cfg["sample"], cfg["seed"], cfg["sample_rule"]) == (10, 0, "paper")
    assert len(_lines(paper / RESULTS)) == 10


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
    with pytest.raises(RunDirError, match=r"results\.jsonl:2: not valid JSON"):
        ResultsLog(tmp_path / RESULTS).load()


def test_a_directory_takes_one_run_at_a_time(tmp_path):
    with dir_lock(tmp_path), pytest.raises(RunDirError, match="in use"), dir_lock(tmp_path):
        pass


def _models(url):
    m = fast_model(url)
    return {"planner": m, "executor": m, "judge": m}


@pytest.mark.parametrize("outage", ["http-503", "connection-refused"])
async def test_an_endpoint_outage_is_an_error_not_a_score_and_resume_scores_it_once(
    tmp_path, sandbox, chat_endpoint, dead_url, outage
):
    """The real coordinator and OpenAI client against a real local HTTP endpoint: tasks the
    endpoint fails past its retries land in errors.jsonl, never in the results, and a resume
    against an endpoint that answers scores each of them exactly once."""
    bench = get_benchmark("gsm8k", SAMPLES)
    tasks = bench.tasks()[:3]
    endpoint = chat_endpoint(tasks)
    if outage == "http-503":
        endpoint.down = lambda task_id: task_id != "gsm8k/0"
        first_url, broken = endpoint.url, ["gsm8k/1", "gsm8k/2"]
    else:
        first_url, broken = dead_url, ["gsm8k/0", "gsm8k/1", "gsm8k/2"]
    first = await run_eval(
        bench, "react", _models(first_url), sandbox, tmp_path, limit=3, progress=False
    )
    scored = [r["task_id"] for r in ResultsLog(tmp_path / RESULTS).load().values()]
    assert sorted(scored) == sorted(set(tasks[i].id for i in range(3)) - set(broken))
    assert first.tally.errors == len(broken) and first.tally.done == 3 - len(broken)
    errors = _lines(tmp_path / ERRORS)
    assert sorted(e["task_id"] for e in errors) == broken
    assert all(e["kind"] == "infrastructure" for e in errors)
    want = (
        "answered HTTP 503: the service is overloaded"
        if outage == "http-503"
        else "is unreachable after 3 attempts"
    )
    assert all(e["error"].startswith("model error: ") and want in e["error"] for e in errors)
    assert API_KEY not in (tmp_path / ERRORS).read_text()
    assert set(unscored_errors(tmp_path)) == {f"r0/{t}" for t in broken}
    if outage == "http-503":
        assert len(endpoint.requests) == 2 + 3 * len(broken)  # tool call + answer; 3 tries each

    endpoint.down = lambda task_id: False
    before = len(endpoint.requests)
    second = await run_eval(
        bench,
        "react",
        _models(endpoint.url),
        sandbox,
        tmp_path,
        limit=3,
        resume=True,
        progress=False,
    )
    assert len(endpoint.requests) - before == 2 * len(broken)  # only the errored tasks ran
    assert second.tally.errors == 0 and second.tally.skipped == 3 - len(broken)
    assert second.tally.done == 3 and second.tally.correct == 3
    recs = _lines(tmp_path / RESULTS)
    assert sorted(r["key"] for r in recs) == [f"r0/{t.id}" for t in tasks]  # 0 lost, 0 twice
    assert all(r["correct"] and r["status"] == "success" for r in recs)
    assert unscored_errors(tmp_path) == {}
    third = await run_eval(
        bench,
        "react",
        _models(endpoint.url),
        sandbox,
        tmp_path,
        limit=3,
        resume=True,
        progress=False,
    )
    assert third.tally.skipped == 3 and len(_lines(tmp_path / RESULTS)) == 3


async def test_a_task_that_cannot_be_scored_is_an_error_too(tmp_path, sandbox):
    bench = get_benchmark("gsm8k", SAMPLES)
    good = oracle_models(bench.tasks())
    real_score = bench.score

    async def score(task, answer, sb):
        if task.id == "gsm8k/1":
            raise RuntimeError("sandbox failed while scoring: worker lost")
        return await real_score(task, answer, sb)

    bench.score = score  # type: ignore[method-assign]
    first = await run_eval(bench, "react", good, sandbox, tmp_path, limit=3, progress=False)
    assert first.tally.done == 2 and first.tally.errors == 1
    (err,) = _lines(tmp_path / ERRORS)
    assert err["kind"] == "exception" and "worker lost" in err["error"] and err["traceback"]
    bench.score = real_score  # type: ignore[method-assign]
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
    cmd = [
        sys.executable,
        "-m",
        "verimap",
        "eval",
        "-b",
        "gsm8k",
        "-m",
        "react",
        "-n",
        "20",
        "-c",
        "2",
        "-o",
        str(out),
        "--sandbox",
        "process",
        "--data-dir",
        str(SAMPLES),
        "--quiet",
        "--models-factory",
        "verimap.testing:oracle_factory",
        *extra,
    ]
    return subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_from_a_terminal,
    )


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


def test_a_seeded_multihoprag_draw_leaves_out_the_planners_demonstrations():
    from verimap.evals.runner import _selection
    from verimap.evals.tasksets import MultiHopRAG
    from verimap.planning import demos

    official = MultiHopRAG(REPO / "datasets" / "full")
    held = official.held_out()
    assert held == {f"multihoprag/{i}" for i in demos.held_out("qa")} and held
    tasks, chosen = _selection(official, None, len(official.queries) - len(held), 7)
    assert not {t.id for t in tasks} & held and chosen["held_out"] == len(held)
    first, _ = _selection(official, 5, None, None)
    assert [t.id for t in first] == [f"multihoprag/{i}" for i in range(5)]
    fixture = MultiHopRAG(SAMPLES)
    assert fixture.held_out() == frozenset()


def test_a_draw_leaves_out_the_tasks_of_a_mined_pool_and_a_range_that_takes_one_is_refused(
    tmp_path,
):
    from verimap.evals.runner import _selection, preflight
    from verimap.evals.sampling import SelectionError
    from verimap.evals.tasksets import GSM8K, MultiHopRAG
    from verimap.planning.demos import Demo, DemoFileError, DemoPool

    def pool_file(name, domain, benchmark, indices):
        demos = [Demo(index=i, task=f"task {i}", nodes={"final": {}}) for i in indices]
        path = tmp_path / name
        path.write_text(
            DemoPool(
                domain=domain, pool="mined", benchmark=benchmark, demos=demos
            ).model_dump_json()
        )
        return path

    mined = pool_file("gsm8k.json", "math", "gsm8k", [1, 3])
    extra = read_pool(mined)
    bench = GSM8K(SAMPLES)
    everything = {t.id for t in bench.tasks()}
    tasks, chosen = _selection(bench, None, len(everything) - 2, 0, None, extra, str(mined))
    assert {t.id for t in tasks} == everything - {"gsm8k/1", "gsm8k/3"}
    assert chosen["held_out"] == 2
    with pytest.raises(
        SelectionError,
        match=rf"2 of the tasks chosen \(gsm8k/1, gsm8k/3\) have their plans in the "
        rf"demonstrations file {mined}: the planner would be shown them",
    ):
        _selection(bench, 5, None, None, None, extra, str(mined))
    with pytest.raises(SelectionError, match="1 of the tasks chosen"):
        _selection(bench, None, None, None, ["gsm8k/3", "gsm8k/4"], extra, str(mined))
    assert [t.id for t in _selection(bench, "4:6", None, None, None, extra)[0]] == [
        "gsm8k/4",
        "gsm8k/5",
    ]
    other = read_pool(pool_file("mbpp.json", "math", "mbpp", [1, 3]))  # another benchmark's
    assert _selection(bench, 5, None, None, None, other)[0]
    qa_file = pool_file("qa.json", "qa", "", [1])
    with pytest.raises(DemoFileError, match="holds qa demonstrations; this run plans math"):
        preflight(
            bench,
            "verimap",
            tmp_path / "out",
            limit=5,
            config={"planning": {"demos_file": str(qa_file)}, "policies": ["small-model-planner"]},
        )
    assert not (tmp_path / "out").exists()
    qa = MultiHopRAG(SAMPLES)
    assert qa.held_out(read_pool(pool_file("q.json", "qa", "multihoprag", [0]))) == {
        "multihoprag/0"
    }


def test_a_stratified_sample_takes_equal_numbers_from_each_stratum_and_grows_by_prefix():
    from collections import Counter

    from verimap.evals.tasksets import EvalTask

    tasks = [
        EvalTask(
            id=f"t/{i}",
            benchmark="t",
            prompt="",
            gold="",
            meta={"kind": "rare" if i < 3 else ("a" if i % 2 else "b")},
        )
        for i in range(60)
    ]
    small = sample_tasks(tasks, 6, 11, stratum="kind")
    assert Counter(t.meta["kind"] for t in small) == {"a": 2, "b": 2, "rare": 2}
    large = sample_tasks(tasks, 12, 11, stratum="kind")
    assert Counter(t.meta["kind"] for t in large) == {"a": 5, "b": 4, "rare": 3}
    assert {t.id for t in small} <= {t.id for t in large}
    assert [t.id for t in large] == sorted((t.id for t in large), key=lambda i: int(i[2:]))
