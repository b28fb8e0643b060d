"""`verimap run` and `verimap eval` end to end on the real local model, as a user runs them:
a fresh process, no API key, the server started and stopped by the command itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verimap.local import server

pytestmark = pytest.mark.localmodel


def offline_env(model_file: Path, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(VERIMAP_MODEL_FILE=str(model_file), VERIMAP_STATE_DIR=str(tmp_path / "state"))
    return env


def verimap(
    *args: str, env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "verimap", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def no_servers_left(tmp_path: Path) -> bool:
    servers = list((tmp_path / "state" / "servers").glob("*.json"))
    return all(not server.pid_alive(info.pid) for p in servers if (info := server.read_state(p)))


def test_verimap_run_finishes_with_a_result_and_a_trace(local_model_file, tmp_path):
    env = offline_env(local_model_file, tmp_path)
    traces = tmp_path / "traces"
    p = verimap(
        "run",
        "What is 17 + 25? Give the number.",
        "--json",
        "--quiet",
        "--trace-dir",
        str(traces),
        "--max-iterations",
        "2",
        "--max-attempts",
        "1",
        "--time-limit",
        "240",
        "--max-nodes",
        "3",  # the planner over HTTP (the local default runs one node, no planner)
        env=env,
        cwd=tmp_path,
        timeout=420,
    )
    assert p.returncode in (0, 1, 3), p.stderr[-3000:]
    result = json.loads(p.stdout)
    assert result["status"] in ("success", "failed", "partial", "budget_exhausted")
    assert result["usage"]["roles"]["planner"]["calls"] >= 1, result
    assert result["plans"] or result["error"], result  # a plan, or a stated reason why none
    trace = Path(result["trace_path"])
    assert trace.is_file() and traces in trace.parents
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert events[0]["type"] == "run_start" and events[0]["run_id"]
    assert "started local model" in p.stderr
    assert no_servers_left(tmp_path)


def test_verimap_eval_humaneval_writes_results(local_model_file, tmp_path):
    env = offline_env(local_model_file, tmp_path)
    out = tmp_path / "out"
    p = verimap(
        "eval",
        "--benchmark",
        "humaneval",
        "--method",
        "verimap",
        "--limit",
        "2",
        "--out",
        str(out),
        "--quiet",
        "--max-iterations",
        "1",
        "--max-attempts",
        "1",
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert len({r["key"] for r in rows}) == 2
    assert "the small-model policy applies: temperature 0" in p.stderr
    assert "one task at a time" in p.stderr
    assert (
        json.loads((out / "config.json").read_text())["run_config"]["sampling"]["temperature"]
        == 0.0
    )
    assert no_servers_left(tmp_path)
