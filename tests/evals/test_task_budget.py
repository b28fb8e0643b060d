"""A task's wall-clock budget in an eval: a slow task ends as a recorded failure, the rest run."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from click.testing import CliRunner

from verimap.base.messages import ModelRequest
from verimap.cli import main
from verimap.config import EVAL_TASK_TIME_LIMIT, RunConfig
from verimap.evals import task_budget
from verimap.evals.attempt import method_solver
from verimap.evals.runner import ERRORS, RESULTS, run_eval
from verimap.evals.task_budget import within
from verimap.evals.tasksets import EvalTask, get_benchmark
from verimap.testing import ScriptedModel, oracle_models
from verimap.wiring import resolve

from .conftest import SAMPLES


def _records(out) -> dict[str, dict[str, Any]]:
    lines = (out / RESULTS).read_text().splitlines()
    return {r["task_id"]: r for r in map(json.loads, lines)}


def slow_on(task: EvalTask, models: dict[str, Any]) -> dict[str, Any]:
    """`models` with a step that takes a minute on every request about `task`."""

    def slowed(inner: Any) -> ScriptedModel:
        async def script(req: ModelRequest) -> Any:
            if any(task.prompt in str(m.content) for m in req.messages):
                await asyncio.sleep(60)
            return await inner.request(req)

        return ScriptedModel(script, name=inner.name)

    return {role: slowed(m) for role, m in models.items()}


async def test_a_task_past_its_time_limit_ends_as_a_failure_and_the_others_are_scored(
    tmp_path, sandbox
):
    bench = get_benchmark("gsm8k", SAMPLES)
    tasks = bench.tasks()[:3]
    models = slow_on(tasks[1], oracle_models(tasks))
    t0 = time.monotonic()
    out = await run_eval(
        bench, "react", models, sandbox, tmp_path, limit=3, progress=False, task_time_limit=1.0
    )
    assert time.monotonic() - t0 < 20
    recs = _records(tmp_path)
    slow = recs[tasks[1].id]
    assert (slow["status"], slow["correct"], slow["verified"]) == ("budget_exhausted", False, False)
    assert "wall-clock budget" in slow["error"]
    assert slow["usage"]  # the run ended itself: what it used is kept
    assert recs[tasks[0].id]["correct"] and recs[tasks[2].id]["correct"]
    assert out.tally.done == 3 and out.tally.errors == 0
    assert not (tmp_path / ERRORS).exists()
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["task_time_limit"] == 1.0
    assert cfg["run_config"].get("timeout_s") is None  # the run settings are the user's


async def test_a_solver_that_ignores_the_limit_is_ended_by_the_backstop(
    tmp_path, sandbox, monkeypatch
):
    monkeypatch.setattr(task_budget, "backstop", lambda limit: limit)
    bench = get_benchmark("gsm8k", SAMPLES)
    tasks = bench.tasks()[:2]
    solve = method_solver(
        bench, "react", oracle_models(tasks), sandbox, resolve(None, method="react").config
    )

    async def hangs_on_the_second(task: EvalTask, run: int, trace: Any) -> Any:
        if task.id == tasks[1].id:
            await asyncio.sleep(60)
        return await solve(task, run, trace)

    t0 = time.monotonic()
    await run_eval(
        bench,
        "react",
        None,
        sandbox,
        tmp_path,
        limit=2,
        progress=False,
        solver=hangs_on_the_second,
        task_time_limit=0.5,
    )
    assert time.monotonic() - t0 < 20
    recs = _records(tmp_path)
    hung = recs[tasks[1].id]
    assert (hung["status"], hung["correct"], hung["gold"]) == (
        "budget_exhausted",
        False,
        tasks[1].gold,
    )
    assert hung["error"] == "the task ran past its time limit of 0.5 s (--time-limit) and was ended"
    assert recs[tasks[0].id]["correct"]


def test_a_run_s_own_shorter_budget_is_kept():
    assert within(RunConfig(), 30).budget.timeout_s == 30
    assert within(RunConfig(budget={"timeout_s": 10}), 30).budget.timeout_s == 10
    longer = within(RunConfig(budget={"timeout_s": 100, "max_llm_calls": 5}), 30).budget
    assert (longer.timeout_s, longer.max_llm_calls) == (30, 5)
    assert within(RunConfig(), None).budget.timeout_s is None


def test_eval_has_a_default_time_limit_and_time_limit_sets_it(tmp_path, monkeypatch):
    args = [
        "eval",
        "-b",
        "gsm8k",
        "-m",
        "react",
        "-n",
        "2",
        "--data-dir",
        str(SAMPLES),
        "--models-factory",
        "verimap.testing:oracle_factory",
        "--sandbox",
        "process",
        "--quiet",
    ]
    r = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "default")])
    assert r.exit_code == 0, r.output
    cfg = json.loads((tmp_path / "default" / "config.json").read_text())
    assert cfg["task_time_limit"] == EVAL_TASK_TIME_LIMIT == 1800

    monkeypatch.setenv("VERIMAP_DOUBLE_LATENCY", "0.5")  # every call: past a 0.3 s limit
    r = CliRunner().invoke(main, [*args, "--time-limit", "0.3", "-o", str(tmp_path / "slow")])
    assert r.exit_code == 0, r.output
    recs = _records(tmp_path / "slow")
    assert len(recs) == 2
    assert {rec["status"] for rec in recs.values()} == {"budget_exhausted"}

    r = CliRunner().invoke(main, [*args, "--time-limit", "0", "-o", str(tmp_path / "none")])
    assert r.exit_code == 0, r.output
    assert "task_time_limit" not in json.loads((tmp_path / "none" / "config.json").read_text())
