"""Evals on a real local Ray cluster: a head and a second node, both on 127.0.0.1, started
once for the session. The results match the same eval without Ray, and neither a worker
killed mid-task nor a killed driver loses a task or writes one twice."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verimap.evals.cluster import eval_on_ray, ray_address
from verimap.evals.cluster_worker import check_per_node, forwarded_env, node_endpoint
from verimap.evals.runner import ERRORS, RESULTS, ResultsLog, run_eval
from verimap.evals.tasksets import get_benchmark
from verimap.testing import need, oracle_factory

from .conftest import REPO, SAMPLES

pytestmark = pytest.mark.ray

VOLATILE = ("wall_time_s", "finished_at")


@pytest.fixture(scope="session")
def ray_cluster():
    need(importlib.util.find_spec("ray") is not None, "Ray is missing: pip install -e '.[cluster]'")
    # Ray's single-machine mode (as on macOS): every node and client on 127.0.0.1, never the
    # machine's network address. Read when Ray is imported, and inherited by the drivers below.
    before = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    from ray.cluster_utils import Cluster

    node = {"num_cpus": 1, "object_store_memory": 80 * 2**20, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        if before is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = before


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _stable(records: list[dict]) -> list[dict]:
    return sorted(
        ({k: v for k, v in r.items() if k not in VOLATILE} for r in records), key=lambda r: r["key"]
    )


def _events(out: Path, rec: dict) -> list[tuple]:
    return [
        (e["type"], e["node_id"], e["iteration"], e["attempt"]) for e in _lines(out / rec["trace"])
    ]


def _eval_workers() -> dict[int, str]:
    """The processes of this cluster's eval workers (Ray titles an actor's process after it)."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and cmd.startswith("ray::EvalWorker"):
            found[int(proc.name)] = cmd.strip()
    return found


def test_ray_address_and_the_endpoint_a_node_uses():
    assert [ray_address(v) for v in (None, False, "", True, "true", "auto", " 10.1.2.3:6379 ")] == [
        None,
        None,
        None,
        "auto",
        "auto",
        "auto",
        "10.1.2.3:6379",
    ]
    driver = {"model": "gpt-4o-mini", "base_url": "http://gpu0:8000/v1", "keep_server": True}
    assert node_endpoint(driver, None, "10.0.0.7") == driver
    assert node_endpoint(driver, "http://{node_ip}:8000/v1", "10.0.0.7") == {
        "model": "gpt-4o-mini",
        "base_url": "http://10.0.0.7:8000/v1",
    }
    assert node_endpoint(driver, "local", "10.0.0.7") == {
        "model": "gpt-4o-mini",
        "keep_server": True,
    }
    # Only the variables the user names go to a cluster (--ray-env): no key, no VERIMAP_*.
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "u", "VERIMAP_DIALECT": "qwen", "HOME": "/h"}
    assert forwarded_env(env, ()) == {}
    assert forwarded_env(env, ["OPENAI_API_KEY", "NOT_SET"]) == {"OPENAI_API_KEY": "k"}
    for bad in ("gpu-{rank}:8000", "http://{node_ip:8000/v1", "gpu0:8000"):
        with pytest.raises(ValueError, match="ray-endpoint-per-node"):
            check_per_node(bad)


@pytest.mark.docker
async def test_a_ray_eval_writes_what_the_same_eval_without_ray_writes(
    ray_cluster, docker_sandbox, tmp_path
):
    bench = get_benchmark("humaneval", SAMPLES)
    models = functools.partial(oracle_factory, wrong_every=3)
    kw = dict(limit=6, progress=False)
    local = await run_eval(
        bench,
        "verimap",
        models("humaneval", SAMPLES),
        docker_sandbox,
        tmp_path / "local",
        max_concurrency=4,
        **kw,
    )
    on_ray = await eval_on_ray(
        bench,
        "verimap",
        tmp_path / "ray",
        models_factory=models,
        data_dir=str(SAMPLES),
        sandbox_kind="docker",
        max_concurrency=2,
        **kw,
    )
    assert local.tally.done == on_ray.tally.done == 6
    assert on_ray.tally.correct == local.tally.correct == 4  # tasks 3 and 6 answered wrongly
    a, b = _lines(tmp_path / "local" / RESULTS), _lines(tmp_path / "ray" / RESULTS)
    assert _stable(a) == _stable(b)
    assert all(_events(tmp_path / "local", r) == _events(tmp_path / "ray", r) for r in a)
    assert not (tmp_path / "ray" / ERRORS).exists()
    cfg = json.loads((tmp_path / "ray" / "config.json").read_text())
    assert cfg["sandbox"] == "docker" and cfg["models"]["planner"] == "oracle-planner"
    assert len(set(cfg["cluster"]["workers"])) == 2  # one per node
    assert len(on_ray.workers) == 2 and sum(on_ray.workers.values()) == 6  # both nodes solved


async def _busy_worker(deadline: float) -> int:
    """A worker in the middle of a task; one may be between tasks at any single look."""
    while True:
        busy = [pid for pid, title in _eval_workers().items() if "attempt" in title]
        if busy:
            return busy[0]
        assert time.monotonic() < deadline, "no eval worker was ever mid-task"
        await asyncio.sleep(0.01)


async def test_a_worker_killed_mid_task_costs_no_task(ray_cluster, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="verimap.evals.cluster")
    bench = get_benchmark("gsm8k", SAMPLES)
    run = asyncio.create_task(
        eval_on_ray(
            bench,
            "react",
            tmp_path,
            models_factory=functools.partial(oracle_factory, latency_s=0.4),
            data_dir=str(SAMPLES),
            sandbox_kind="process",
            max_concurrency=2,
            limit=12,
            runs=2,
            progress=False,
        )
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / RESULTS).exists() or len(_lines(tmp_path / RESULTS)) < 2:
        assert time.monotonic() < deadline and not run.done(), "no results from the cluster"
        await asyncio.sleep(0.05)
    victim = await _busy_worker(deadline)
    os.kill(victim, signal.SIGKILL)
    outcome = await asyncio.wait_for(run, 180)
    recs = _lines(tmp_path / RESULTS)
    assert sorted(r["key"] for r in recs) == sorted(
        f"r{r}/gsm8k/{i}" for r in (0, 1) for i in range(12)
    )
    assert outcome.tally.errors == 0 and outcome.tally.correct == 24
    assert not (tmp_path / ERRORS).exists()
    said = [r.getMessage() for r in caplog.records]
    assert any("goes to another worker" in m for m in said), "the killed worker had no task"
    assert any("answers again" in m for m in said), "Ray did not restart the worker"


async def test_a_node_lost_mid_run_costs_no_task(ray_cluster, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="verimap.evals.cluster")
    extra = ray_cluster.add_node(
        num_cpus=1, object_store_memory=80 * 2**20, node_ip_address="127.0.0.1"
    )
    bench = get_benchmark("gsm8k", SAMPLES)
    run = asyncio.create_task(
        eval_on_ray(
            bench,
            "react",
            tmp_path,
            models_factory=functools.partial(oracle_factory, latency_s=0.4),
            data_dir=str(SAMPLES),
            sandbox_kind="process",
            max_concurrency=2,
            limit=20,
            progress=False,
        )
    )
    deadline = time.monotonic() + 120
    # Two rounds of the three nodes' slots: under load the first three results can all come
    # from the two other nodes, and the lost node must have finished a task before it goes.
    while not (tmp_path / RESULTS).exists() or len(_lines(tmp_path / RESULTS)) < 6:
        assert time.monotonic() < deadline and not run.done(), "no results from the cluster"
        await asyncio.sleep(0.05)
    ray_cluster.remove_node(extra, allow_graceful=False)
    outcome = await asyncio.wait_for(run, 180)
    assert sorted(r["key"] for r in _lines(tmp_path / RESULTS)) == sorted(
        f"r0/gsm8k/{i}" for i in range(20)
    )
    assert outcome.tally.errors == 0 and outcome.tally.correct == 20
    assert len(outcome.workers) == 3  # the lost node had finished tasks before
    said = [r.getMessage() for r in caplog.records]
    assert any("goes to another worker" in m for m in said), "the lost node had no task"
    ray_cluster.wait_for_nodes()  # the next test's driver sees two live nodes


async def test_each_node_asks_its_own_endpoint(ray_cluster, chat_endpoint, dead_url, tmp_path):
    """The driver's endpoint is down; each node's (the template, filled with the node's
    address) answers: every task is solved through the real client on the nodes."""
    bench = get_benchmark("gsm8k", SAMPLES)
    endpoint = chat_endpoint(bench.tasks()[:4])
    endpoint.down = lambda task_id: False
    port = endpoint.url.rsplit(":", 1)[1].split("/")[0]
    outcome = await eval_on_ray(
        bench,
        "react",
        tmp_path,
        endpoint={"model": "m", "base_url": dead_url},
        endpoint_per_node=f"http://{{node_ip}}:{port}/v1",
        sandbox_kind="process",
        max_concurrency=2,
        limit=4,
        progress=False,
    )
    assert outcome.tally.errors == 0 and outcome.tally.correct == 4
    assert len(endpoint.requests) == 4 * 2  # a tool call and an answer per task
    assert len(outcome.workers) == 2


def _driver(out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "VERIMAP_DOUBLE_LATENCY": "0.15", "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "verimap", "eval", "--quiet", *extra]
    return subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_a_killed_driver_resumes_without_loss_or_duplicates(ray_cluster, tmp_path, sig):
    out = tmp_path / "run"
    config = tmp_path / "eval.yaml"
    config.write_text(
        f"benchmark: gsm8k\nmethod: react\nlimit: 20\nmax_tasks: 2\nout: {out}\n"
        f"data_dir: {SAMPLES}\nsandbox: process\n"
    )
    # Code to import and a cluster to join are never taken from a file.
    factory_flag = (
        "--models-factory",
        "verimap.testing:oracle_factory",
        "--ray",
        ray_cluster.address,
    )
    first = _driver(out, "--config", str(config), *factory_flag)
    deadline = time.monotonic() + 120
    while not (out / RESULTS).exists() or len((out / RESULTS).read_text().splitlines()) < 4:
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.05)
    first.send_signal(sig)
    _, err = first.communicate(timeout=60)
    before = list(ResultsLog(out / RESULTS).load().values())  # a SIGKILL may leave a torn line
    assert 4 <= len(before) < 20
    if sig == signal.SIGINT:
        assert first.returncode == 130 and "--resume" in err
    else:
        assert first.returncode == -signal.SIGKILL
    resumed = _driver(out, "--config", str(config), "--resume", *factory_flag)
    stdout, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err
    after = _lines(out / RESULTS)
    assert len(after) == len({r["key"] for r in after}) == 20  # 0 lost, 0 twice
    assert after[: len(before)] == before
    assert f"{len(before)} from before" in err
    assert "| react | 100.0 ± 0.0 (n=20, runs=1) |" in stdout
    assert (
        json.loads((out / "config.json").read_text())["cluster"]["address"] == ray_cluster.address
    )
    deadline = time.monotonic() + 60
    while _eval_workers() and time.monotonic() < deadline:  # Ray ends a gone driver's workers
        time.sleep(0.5)
    assert not _eval_workers()


async def test_a_trace_a_worker_returns_is_written_inside_the_run_directory(
    ray_cluster, tmp_path, monkeypatch, capsys
):
    """The driver writes each returned trace where its record says, confined to the run
    directory: a worker that names a path outside it (here `..`) has its trace written to the
    task's own place instead, and nothing lands outside."""
    from verimap.evals import cluster

    solve = cluster.WorkerPool.__call__

    async def escaping(self, task, run):
        att = await solve(self, task, run)
        (att.record or att.error)["trace"] = "../escaped/trace.jsonl"
        return att

    monkeypatch.setattr(cluster.WorkerPool, "__call__", escaping)
    out = tmp_path / "run"
    outcome = await eval_on_ray(
        get_benchmark("gsm8k", SAMPLES),
        "react",
        out,
        models_factory=oracle_factory,
        data_dir=str(SAMPLES),
        sandbox_kind="process",
        max_concurrency=1,
        limit=2,
        progress=False,
    )
    assert outcome.tally.done == 2 and not (tmp_path / "escaped").exists()
    recs = _lines(out / RESULTS)
    assert all(r["trace"].startswith("traces/run0/") for r in recs)
    assert all(_events(out, r) and _events(out, r)[0][0] == "run_start" for r in recs)
    assert capsys.readouterr().err.count("outside") == 2
