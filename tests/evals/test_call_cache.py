"""`--cache` end to end: an eval at temperature 0 run twice against a loopback endpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from verimap.cli import main
from verimap.evals.runner import RESULTS
from verimap.evals.tasksets import get_benchmark

from .conftest import API_KEY, SAMPLES

# What differs between two runs of the same tasks however they were answered.
TIMING = ("wall_time_s", "finished_at")
USAGE = ("usage", "tokens", "cost")


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path, monkeypatch) -> None:
    """The call cache's key in the test's own state directory, never the user's."""
    monkeypatch.setenv("VERIMAP_STATE_DIR", str(tmp_path / "state"))


def records(out: Path) -> dict[str, dict[str, Any]]:
    lines = (out / RESULTS).read_text().splitlines()
    return {r["key"]: r for r in map(json.loads, lines)}


def _total(rec: dict[str, Any], field: str) -> float:
    return sum(u.get(field, 0) for u in rec["usage"].values())


def test_a_rerun_of_ten_tasks_at_t0_makes_no_call_and_gives_the_same_results(
    tmp_path, monkeypatch, chat_endpoint
):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    endpoint = chat_endpoint(get_benchmark("gsm8k", SAMPLES).tasks()[:10])
    endpoint.down = lambda task_id: False
    args = [
        "eval",
        "-b",
        "gsm8k",
        "-m",
        "react",
        "-n",
        "10",
        "--data-dir",
        str(SAMPLES),
        "--sandbox",
        "process",
        "--quiet",
        "--model",
        "m",
        "--base-url",
        endpoint.url,
        "--temperature",
        "0",
        "--cache",
        "on",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    first = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "first")])
    assert first.exit_code == 0, first.output
    calls = len(endpoint.requests)
    assert calls >= 20  # a tool call and an answer per task
    assert "## Call cache" not in first.stdout

    again = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "again")])
    assert again.exit_code == 0, again.output
    assert len(endpoint.requests) == calls  # not one HTTP request
    before, after = records(tmp_path / "first"), records(tmp_path / "again")
    assert sorted(before) == sorted(after) and len(after) == 10
    for key, rec in after.items():
        old = before[key]
        same = [k for k in rec if k not in TIMING + USAGE]
        assert {k: rec[k] for k in same} == {k: old[k] for k in same}, key
        assert (_total(rec, "calls"), rec["tokens"], rec["cost"]) == (0, 0, 0.0)
        assert _total(rec, "cached_calls") == _total(old, "calls")
        saved = _total(rec, "saved_prompt_tokens") + _total(rec, "saved_completion_tokens")
        assert saved == old["tokens"] > 0
    assert sum(r["correct"] for r in after.values()) == 10
    assert (
        "## Call cache" in again.stdout
        and "| react | gsm8k | 10 | 0.0 | 2.0 | 120 |" in again.stdout
    )
    trace = (tmp_path / "again" / next(iter(after.values()))["trace"]).read_text()
    assert '"cache_hit": true' in trace or '"cache_hit":true' in trace


def test_sampled_calls_are_not_cached_unless_asked(tmp_path, monkeypatch, chat_endpoint):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    endpoint = chat_endpoint(get_benchmark("gsm8k", SAMPLES).tasks()[:2])
    endpoint.down = lambda task_id: False
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
        "--sandbox",
        "process",
        "--quiet",
        "--model",
        "m",
        "--base-url",
        endpoint.url,
        "--temperature",
        "0.7",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]

    def run(name: str, *extra: str) -> int:
        before = len(endpoint.requests)
        r = CliRunner().invoke(main, [*args, *extra, "-o", str(tmp_path / name)])
        assert r.exit_code == 0, r.output
        return len(endpoint.requests) - before

    assert run("a", "--cache") == run("b", "--cache", "on") == 4  # `--cache` alone is on
    assert run("c", "--cache", "sampled") == 4
    assert run("d", "--cache", "sampled") == 0


def test_verimap_run_prints_what_the_cache_answered(tmp_path, monkeypatch, chat_endpoint):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    task = get_benchmark("gsm8k", SAMPLES).tasks()[0]
    endpoint = chat_endpoint([task])
    endpoint.down = lambda task_id: False
    args = [
        "run",
        "--method",
        "react",
        "--model",
        "m",
        "--base-url",
        endpoint.url,
        "--temperature",
        "0",
        "--sandbox",
        "process",
        "-q",
        "--trace-dir",
        str(tmp_path / "t"),
        "--cache",
        "on",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--max-connections",
        "2",
        task.prompt,
    ]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    assert "call cache:" not in first.stdout
    calls = len(endpoint.requests)
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert len(endpoint.requests) == calls
    assert "usage: 0 calls (0 failed)" in again.stdout
    assert f"call cache: {calls} replies from the cache (not calls), saving" in again.stdout


def test_a_cache_directory_others_may_write_is_refused_before_any_call(
    tmp_path, monkeypatch, chat_endpoint
):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    endpoint = chat_endpoint(get_benchmark("gsm8k", SAMPLES).tasks()[:1])
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
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
            "--data-dir",
            str(SAMPLES),
            "--sandbox",
            "process",
            "--quiet",
            "--model",
            "m",
            "--base-url",
            endpoint.url,
            "--cache",
            "on",
            "--cache-dir",
            str(shared),
            "-o",
            str(tmp_path / "out"),
        ],
    )
    assert r.exit_code == 1
    assert f"the call cache {shared} may be written by others (mode 777)" in r.output
    assert "Traceback" not in r.output and not endpoint.requests
