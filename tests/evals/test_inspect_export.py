"""`verimap eval export --format inspect`: a real eval run, exported, read back by Inspect AI."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from verimap.base.messages import ModelRequest
from verimap.base.model import ModelError
from verimap.cli import main
from verimap.evals.runner import ERRORS, RESULTS
from verimap.evals.tasksets import get_benchmark
from verimap.testing import ScriptedModel, need, oracle_models

from .conftest import SAMPLES

TASKS = get_benchmark("gsm8k", SAMPLES).tasks()[:4]
# The executor's endpoint is down for this task in every run: it errors and is never scored.
DOWN = TASKS[1]
# The oracle answers every third task wrongly: TASKS[2].
WRONG = TASKS[2]
RIGHT = [TASKS[0], TASKS[3]]


def _squash(text: str) -> str:
    return re.sub(r"\W+", "", text)


def factory(benchmark: str, data_dir: str | None = None) -> dict[str, Any]:
    """Oracle doubles (`--models-factory`) whose executor fails for good on DOWN's task."""
    models = oracle_models(get_benchmark(benchmark, data_dir).tasks(), wrong_every=3)
    executor = models["executor"]
    marker = _squash(DOWN.prompt.split("\n")[0])[:80]

    async def script(req: ModelRequest) -> Any:
        if marker in _squash(" ".join(m.content for m in req.messages)):
            return ModelError("the model endpoint is down (test double)")
        return await executor.request(req)

    models["executor"] = ScriptedModel(script, name=executor.name)
    return models


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, ["eval", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four GSM8K tasks, two runs each, with verimap's method and the oracle doubles."""
    out = tmp_path_factory.mktemp("eval") / "gsm8k-verimap"
    r = invoke(
        "-b",
        "gsm8k",
        "-m",
        "verimap",
        "-n",
        "4",
        "--epochs",
        "2",
        "-o",
        str(out),
        "--data-dir",
        str(SAMPLES),
        "--models-factory",
        f"{__name__}:factory",
        "--sandbox",
        "process",
        "--quiet",
    )
    assert r.exit_code == 1, r.output  # errored tasks make the eval exit 1
    assert "6/8 tasks finished (0 from before), 2 errored, not scored" in r.output
    errored = [json.loads(line) for line in (out / ERRORS).read_text().splitlines()]
    assert {(e["task_id"], e["run"]) for e in errored} == {(DOWN.id, 0), (DOWN.id, 1)}
    return out


@pytest.fixture
def exported(run_dir: Path, tmp_path: Path) -> Path:
    need(
        importlib.util.find_spec("inspect_ai") is not None,
        "inspect_ai is not installed (pip install 'verimap[inspect]')",
    )
    logs = tmp_path / "logs"
    r = invoke("export", "--format", "inspect", str(run_dir), "-o", str(logs))
    assert r.exit_code == 0, r.output
    files = list(logs.glob("*.eval"))
    assert len(files) == 1
    assert f"{files[0]}: gsm8k/verimap, 6 scored (accuracy 66.7%), 2 errored" in r.output
    return files[0]


def test_the_log_holds_every_task_and_run_with_its_score(exported: Path, run_dir: Path) -> None:
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(exported))
    assert log.status == "success"
    assert (log.eval.task, log.eval.solver, log.eval.model) == (
        "gsm8k",
        "verimap",
        "oracle-executor",
    )
    assert log.eval.config.epochs == 2
    assert log.eval.dataset.sample_ids == [t.id for t in TASKS]
    samples = {(s.id, s.epoch): s for s in log.samples or []}
    assert set(samples) == {(t.id, e) for t in TASKS for e in (1, 2)}

    records = {
        (r["task_id"], r["run"] + 1): r
        for r in map(json.loads, (run_dir / RESULTS).read_text().splitlines())
    }
    assert len(records) == 6
    for (task_id, epoch), rec in records.items():
        s = samples[(task_id, epoch)]
        task = next(t for t in TASKS if t.id == task_id)
        assert s.error is None
        assert s.input == task.prompt and s.target == task.gold == rec["gold"]
        assert s.output.completion == rec["predicted"] != ""
        assert s.scores is not None
        assert s.scores["correct"].value == ("C" if task in RIGHT else "I")
        assert s.metadata["verified"] is rec["verified"] is True  # the VFs passed the wrong one too
        for key in ("status", "iterations", "fallbacks", "tokens", "wall_time_s"):
            assert s.metadata[key] == rec[key]
        assert s.total_time == rec["wall_time_s"]
        assert s.role_usage["executor"].total_tokens > 0
        types = [e.metadata["verimap_event"] for e in s.events if e.metadata]
        assert types[0] == "run_start" and types[-1] == "finish"
        assert {"plan", "node_start", "vf_verdict", "attempt_result"} <= set(types)
        assert len(s.events) == len((run_dir / rec["trace"]).read_text().splitlines())


def test_tasks_that_errored_are_errored_samples_not_wrong_answers(exported: Path) -> None:
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(exported))
    errored = [s for s in log.samples or [] if s.error is not None]
    assert sorted((s.id, s.epoch) for s in errored) == [(DOWN.id, 1), (DOWN.id, 2)]
    for s in errored:
        assert not s.scores
        assert s.error is not None and "the model endpoint is down" in s.error.message
        assert s.input == DOWN.prompt and s.target == ""  # no run scored it: no gold on record
        assert s.metadata["status"] == "errored, not scored"
        assert any(e.metadata and e.metadata["verimap_event"] == "run_start" for e in s.events)


def test_results_count_the_scored_tasks_only(exported: Path) -> None:
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(exported))
    assert log.results is not None
    assert (log.results.total_samples, log.results.completed_samples) == (8, 6)
    [score] = log.results.scores
    assert (score.name, score.scored_samples) == ("correct", 3)
    assert score.metrics["accuracy"].value == pytest.approx(2 / 3)
    assert score.metrics["stderr"].value == pytest.approx(1 / 3)  # sqrt(var(1, 0, 1) / 3)
    assert log.results.metadata is not None
    assert log.results.metadata["accuracy_by_run"] == pytest.approx([200 / 3, 200 / 3])
    assert log.results.metadata["errored_not_scored"] == 2
    assert log.reductions is not None
    reduced = {s.sample_id: s.value for s in log.reductions[0].samples}
    assert reduced == {TASKS[0].id: 1.0, WRONG.id: 0.0, TASKS[3].id: 1.0}


def test_inspect_lists_the_log_and_a_second_export_replaces_it(
    exported: Path, run_dir: Path
) -> None:
    from inspect_ai.log import list_eval_logs

    [info] = list_eval_logs(str(exported.parent))
    assert info.task == "gsm8k" and Path(info.name.removeprefix("file://")) == exported
    r = invoke("export", "--format", "inspect", str(run_dir.parent), "-o", str(exported.parent))
    assert r.exit_code == 0, r.output
    assert list(exported.parent.glob("*.eval")) == [exported]


def test_a_path_that_is_no_run_directory_is_refused(tmp_path: Path) -> None:
    need(importlib.util.find_spec("inspect_ai") is not None, "inspect_ai is not installed")
    r = invoke("export", "--format", "inspect", str(tmp_path))
    assert r.exit_code == 2 and "not an eval run directory" in r.output
    r = invoke("export", str(tmp_path))
    assert r.exit_code == 2 and "--format" in r.output


def test_without_inspect_ai_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # makes it unimportable
    r = CliRunner().invoke(main, ["eval", "export", "--format", "inspect", str(tmp_path)])
    assert r.exit_code == 1
    assert "pip install 'verimap[inspect]'" in r.output


def test_importing_verimap_does_not_need_inspect_ai() -> None:
    code = (
        "import sys; sys.modules['inspect_ai'] = None\n"
        "import verimap, verimap.cli.eval, verimap.evals.runner, verimap.evals.report\n"
        "from verimap.cli import main\n"
        "main.get_command(None, 'eval').get_command(None, 'export')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
