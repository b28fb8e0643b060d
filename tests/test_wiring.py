"""Every entry point resolves a run's settings in `verimap.wiring`: `verimap.build`,
`verimap run`, `verimap eval`, the eval runner and the Inspect solver give the same effective
settings (config, policies, planner options, the policies' model wrappers) for the same inputs,
on an endpoint and on the local model."""

from __future__ import annotations

import asyncio
import json
import warnings
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner

import verimap
from verimap.cli import main
from verimap.cli import run as run_mod
from verimap.core.coordinator import Coordinator
from verimap.core.result import RunResult
from verimap.evals.runner import run_eval
from verimap.evals.tasksets import get_benchmark
from verimap.policies.small_model import ReplyCap
from verimap.testing import InProcessSandboxDouble, ScriptedModel
from verimap.wiring import resolve

DATA = Path(__file__).resolve().parents[1] / "datasets"
TASK = "What is 2 * 3?"
# The same user settings at every entry point (the CLI spells them as flags).
USER = {"loop": {"max_retries": 2}, "sampling": {"temperature": 0.5}}
FLAGS = ["--max-attempts", "2", "--temperature", "0.5"]


def effective(runner: Coordinator) -> dict[str, Any]:
    """What a built runner will do: its config and policies, its planner's options, and the
    reply caps around its executor's model (outermost first)."""
    model, caps = cast(Any, runner.executor).model, []
    while isinstance(model, ReplyCap):
        caps.append(model.limit)
        model = model.inner
    return {
        "config": runner.config.model_dump(mode="json"),
        "policies": runner.policies,
        "planner": runner.planner.options.model_dump(mode="json"),  # type: ignore[attr-defined]
        "reply_caps": caps,
    }


@pytest.fixture
def seen(monkeypatch) -> list[dict[str, Any]]:
    """The effective settings of every coordinator that runs; the run itself does nothing."""
    runs: list[dict[str, Any]] = []

    async def record(self: Coordinator, task: str, **_: Any) -> RunResult:
        runs.append(effective(self))
        return RunResult(run_id="r", task=task, status="failed", error="not run")

    monkeypatch.setattr(Coordinator, "run", record)
    return runs


def scripted(local: bool) -> ScriptedModel:
    model = ScriptedModel(["{}"])
    model.local = local  # type: ignore[attr-defined]  # as `OpenAIModel(local=True)`
    return model


def roles(local: bool) -> dict[str, Any]:
    m = scripted(local)
    return {"planner": m, "executor": m, "judge": m}


def through_build(local: bool, domain: str | None) -> None:
    runner = verimap.build(
        roles(local), InProcessSandboxDouble(), config=USER, method="verimap", domain=domain
    )
    asyncio.run(runner.run(TASK))


def through_cli_run(local: bool, monkeypatch, tmp_path: Path) -> None:
    @asynccontextmanager
    async def connect(**_: Any):
        yield roles(local)

    monkeypatch.setattr(run_mod, "_connect", connect)
    endpoint = [] if local else ["--model", "gpt-4o-mini"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = CliRunner().invoke(
            main,
            [
                "run",
                TASK,
                "-m",
                "verimap",
                *FLAGS,
                *endpoint,
                "--sandbox",
                "process",
                "--trace-dir",
                str(tmp_path),
                "-q",
            ],
        )
    assert r.exit_code == 1, r.output  # the recorded run fails


def through_cli_eval(local: bool, monkeypatch, tmp_path: Path) -> None:
    import verimap.local.endpoint

    @asynccontextmanager
    async def connect(**_: Any):
        yield roles(local)

    monkeypatch.setattr(verimap.local.endpoint, "connect", connect)
    endpoint = [] if local else ["--model", "gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1"]
    r = CliRunner().invoke(
        main,
        [
            "eval",
            "-b",
            "gsm8k",
            "--data-dir",
            str(DATA),
            "-m",
            "verimap",
            "--limit",
            "1",
            *FLAGS,
            *endpoint,
            "--time-limit",
            "0",
            "--sandbox",
            "process",
            "--quiet",
            "-o",
            str(tmp_path / "cli-eval"),
        ],
    )
    assert r.exit_code == 0, r.output


def through_runner(local: bool, tmp_path: Path) -> None:
    bench = get_benchmark("gsm8k", DATA)
    asyncio.run(
        run_eval(
            bench,
            "verimap",
            roles(local),
            InProcessSandboxDouble(),
            tmp_path / "runner",
            limit=1,
            config=USER,
            progress=False,
        )
    )


def through_inspect(local: bool, tmp_path: Path) -> None:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample

    from verimap.integrations.inspect_ai import verimap_solver

    m = scripted(local)
    solver = verimap_solver(
        "verimap",
        planner=m,
        executor=m,
        judge=m,
        sandbox=InProcessSandboxDouble(),
        domain="math",
        config=USER,
    )
    task = Task(dataset=[Sample(input=TASK, target="6")], solver=solver)
    inspect_eval(task, model="mockllm/model", log_dir=str(tmp_path / "inspect"), display="none")


@pytest.mark.parametrize("local", [False, True], ids=["endpoint", "local model"])
def test_every_entry_point_runs_with_the_same_settings(local, seen, monkeypatch, tmp_path):
    # A benchmark task's plan is typed by its domain: math for eval, Inspect's domain="math".
    through_build(local, "math")
    through_runner(local, tmp_path)
    through_cli_eval(local, monkeypatch, tmp_path)
    through_inspect(local, tmp_path)
    # A task from the command line has no domain.
    through_build(local, None)
    through_cli_run(local, monkeypatch, tmp_path)
    assert len(seen) == 6
    on_math, plain = seen[:4], seen[4:]
    diffs = [{k: (v, s[k]) for k, v in on_math[0].items() if s[k] != v} for s in on_math]
    assert all(s == on_math[0] for s in on_math), diffs
    assert all(s == plain[0] for s in plain), plain
    # The two differ only in the planner's domain.
    assert {**on_math[0], "planner": None} == {**plain[0], "planner": None}

    settings = resolve(USER, method="verimap", local=local)
    assert on_math[0]["config"] == settings.config.model_dump(mode="json")
    assert on_math[0]["planner"] == settings.planner_options(domain="math").model_dump(mode="json")
    config = settings.config
    assert config.loop.max_retries == 2 and config.sampling.temperature == 0.5
    if local:
        assert config.policies == ["small-model"] and config.planning.max_nodes == 1
        assert on_math[0]["policies"][0]["name"] == "small-model"
        assert on_math[0]["reply_caps"] == [1024]  # wrapped once, by the policy
        assert on_math[0]["planner"]["one_node_rule"] == "one-node plan (small-model policy)"
    else:
        assert config.policies == [] and config.planning.max_nodes is None
        assert on_math[0]["policies"] == [] and on_math[0]["reply_caps"] == []


def test_resolving_twice_changes_nothing():
    for method in (None, "verimap", "map-v", "react", "bare"):
        for local in (False, True):
            once = resolve(USER, method=method, local=local).config
            assert resolve(once, method=method).config == once, (method, local)


def test_a_config_that_names_its_policies_keeps_them_on_the_local_model():
    assert resolve({"policies": []}, local=True).config.planning.max_nodes is None
    assert resolve({"policies": ["paper"]}, local=True).config.loop.sequential


def test_a_demonstrations_file_reaches_the_staged_planner_or_is_refused(
    seen, monkeypatch, tmp_path
):
    from verimap.planning.demos import DemoFileError, pool
    from verimap.planning.fixed_planners import TemplatePlanner

    path = tmp_path / "demos.json"
    path.write_text(pool("math").model_dump_json())
    user = {"planning": {"demos_file": str(path)}, "policies": ["small-model-planner"]}
    runner = verimap.build(
        roles(False), InProcessSandboxDouble(), config=user, method="verimap", domain="math"
    )
    asyncio.run(runner.run(TASK))
    assert seen[-1]["config"]["planning"]["demos_file"] == str(path)
    assert seen[-1]["planner"]["decoding"] == "staged"
    assert resolve(user, method="verimap").demo_pool("math") == pool("math")
    whole = {"planning": {"demos_file": str(path)}, "policies": []}
    with pytest.raises(DemoFileError, match="only the staged planner shows a pool"):
        resolve(whole, method="verimap").demo_pool("math")
    with pytest.raises(DemoFileError, match="method 'bare' has no planner model"):
        verimap.build(roles(False), InProcessSandboxDouble(), config=user, method="bare")
    with pytest.raises(DemoFileError, match="a planner given to build"):
        verimap.build(roles(False), config=user, planner=TemplatePlanner.single_node())
    with pytest.raises(DemoFileError, match="holds math demonstrations; this run plans qa"):
        verimap.build(roles(False), config=user, method="verimap", domain="qa")
    read = resolve(user, method="verimap").demo_pool("math")
    with pytest.raises(ValueError, match="config names no demonstrations file"):
        verimap.build(roles(False), config={}, method="verimap", domain="math", demos=read)

    cli_run = ["run", TASK, "--model", "gpt-4o-mini", "--sandbox", "process", "-q"]
    missing = ["--demos", str(tmp_path / "missing.json"), "--policy", "small-model-planner"]
    r = CliRunner().invoke(main, [*cli_run, *missing])
    assert r.exit_code == 2 and "missing.json: cannot read it" in r.output
    r = CliRunner().invoke(main, [*cli_run, "--demos", str(path), "--policy", "none"])
    assert r.exit_code == 2 and "only the staged planner" in r.output
    cli_eval = ["eval", "-b", "gsm8k", "--data-dir", str(DATA), "--limit", "1", "--quiet"]
    r = CliRunner().invoke(
        main, [*cli_eval, "--model", "gpt-4o-mini", "--demos", str(path), "-o", str(tmp_path / "e")]
    )
    assert r.exit_code == 1 and "only the staged planner" in r.output
    assert not (tmp_path / "e").exists()


def test_an_eval_reads_its_demonstrations_file_once_and_shows_that_pool_to_every_task(
    monkeypatch, tmp_path
):
    """The pool is read where the eval starts; a file overwritten, then deleted, while the
    tasks run changes neither what the draw left out nor what any task's planner is shown."""
    import verimap.local.endpoint
    import verimap.wiring
    from verimap.planning.demos import Demo, DemoPool, read_pool

    def mined(task: str) -> DemoPool:
        demo = Demo(index=0, task=task, nodes={"final": {}})
        return DemoPool(domain="math", pool="mined", benchmark="gsm8k", demos=[demo])

    original, changed = mined("How many apples are left?"), mined("How far did the train go?")
    path = tmp_path / "demos.json"
    reads: list[str] = []

    def counted(p: Any, domain: str | None = None) -> DemoPool:
        reads.append(str(p))
        return read_pool(p, domain)

    monkeypatch.setattr(verimap.wiring, "read_pool", counted)
    shown: list[Any] = []

    async def record(self: Coordinator, task: str, **_: Any) -> RunResult:
        shown.append(cast(Any, self.planner).staged.extra_demos)
        if len(shown) == 1:
            path.write_text(changed.model_dump_json())
        elif len(shown) == 2:
            path.unlink()
        return RunResult(run_id="r", task=task, status="failed", error="not run")

    monkeypatch.setattr(Coordinator, "run", record)
    user = {"planning": {"demos_file": str(path)}, "policies": ["small-model-planner"]}
    bench = get_benchmark("gsm8k", DATA)

    path.write_text(original.model_dump_json())
    asyncio.run(
        run_eval(
            bench,
            "verimap",
            roles(False),
            InProcessSandboxDouble(),
            tmp_path / "runner",
            sample=3,
            seed=0,
            config=user,
            progress=False,
        )
    )
    assert reads == [str(path)] and shown == [original] * 3
    recorded = json.loads((tmp_path / "runner" / "config.json").read_text())
    assert recorded["held_out"] == 1  # the original's task

    @asynccontextmanager
    async def connect(**_: Any):
        yield roles(False)

    monkeypatch.setattr(verimap.local.endpoint, "connect", connect)
    reads.clear()
    shown.clear()
    path.write_text(original.model_dump_json())
    r = CliRunner().invoke(
        main,
        [
            "eval",
            "-b",
            "gsm8k",
            "--data-dir",
            str(DATA),
            "-m",
            "verimap",
            "--sample",
            "3",
            "--seed",
            "0",
            "--demos",
            str(path),
            "--policy",
            "small-model-planner",
            "--model",
            "gpt-4o-mini",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--time-limit",
            "0",
            "--sandbox",
            "process",
            "--quiet",
            "-o",
            str(tmp_path / "cli-eval"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert reads == [str(path)] and shown == [original] * 3
