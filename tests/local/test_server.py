"""Server lifecycle on the real llama.cpp runtime: started, reused, stopped, killed, restarted."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from verimap.base.messages import GenerationSettings, ModelRequest, UserMessage
from verimap.base.model import ModelError
from verimap.cli import main
from verimap.local import server
from verimap.local.endpoint import connect

pytestmark = pytest.mark.localmodel

HELLO = ModelRequest(
    messages=[UserMessage(content="Say hi.")],
    settings=GenerationSettings(max_tokens=4, temperature=0),
)


@pytest.fixture(autouse=True)
def isolated_state(monkeypatch, tmp_path):
    monkeypatch.setenv("VERIMAP_STATE_DIR", str(tmp_path / "state"))
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)


def owned_pid(model_file) -> int:
    """The pid of the server this process started (not kept) for the model."""
    mine = [
        i
        for _p, i in server.list_servers()
        if i.model_file == str(model_file.resolve()) and i.owner_pid == os.getpid()
    ]
    assert len(mine) == 1, mine
    return mine[0].pid


def wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        server._reap(pid)
        if not server.pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_started_reused_stopped(local_model_file, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    info, started = server.ensure_server(local_model_file, alias="t", keep=True)
    try:
        assert started and server.healthy(info)
        environ = Path(f"/proc/{info.pid}/environ").read_bytes()
        assert b"sk-must-not-leak" not in environ and b"OPENAI_API_KEY" not in environ
        assert server.state_file(local_model_file).exists()
        again, started_again = server.ensure_server(local_model_file, alias="t", keep=True)
        assert not started_again and again.pid == info.pid and again.port == info.port
    finally:
        assert server.stop_server(info)
    assert wait_dead(info.pid)
    assert not server.state_file(local_model_file).exists()
    assert server.find_server(local_model_file) is None


def test_killed_server_is_detected_and_replaced(local_model_file):
    info, _ = server.ensure_server(local_model_file, alias="t", keep=True)
    os.kill(info.pid, signal.SIGKILL)
    assert wait_dead(info.pid)
    assert server.find_server(local_model_file) is None  # stale state removed, not trusted
    new, started = server.ensure_server(local_model_file, alias="t", keep=True)
    try:
        assert started and new.pid != info.pid and server.healthy(new)
    finally:
        server.stop_server(new)


async def test_connect_restarts_a_killed_server_and_stops_what_it_started(local_model_file):
    async with connect(model_file=local_model_file) as models:
        m = models["executor"]
        assert models["planner"] is m and models["judge"] is m
        first_url = m.base_url
        assert (await m.request(HELLO)).content.strip()
        pid = owned_pid(local_model_file)
        os.kill(pid, signal.SIGKILL)
        assert wait_dead(pid)
        t0 = time.monotonic()
        replies = await asyncio.gather(*(m.request(HELLO) for _ in range(3)))
        assert all(r.content.strip() for r in replies) and time.monotonic() - t0 < 90
        assert all(r.usage.failed_calls >= 1 for r in replies)  # failed attempts are accounted
        new_pid = owned_pid(local_model_file)  # exactly one replacement for concurrent callers
        assert new_pid != pid and m.base_url != first_url
    assert wait_dead(new_pid)
    assert server.list_servers() == []


async def test_killed_server_is_reported_when_it_cannot_restart(local_model_file, monkeypatch):
    async with connect(model_file=local_model_file) as models:
        m = models["executor"]
        m.backoff_base = m.backoff_max = 0.01
        pid = owned_pid(local_model_file)
        os.kill(pid, signal.SIGKILL)
        assert wait_dead(pid)

        def cannot_start(*_a, **_k):
            raise server.ServerError("no runtime")

        monkeypatch.setattr(server, "start_server", cannot_start)
        t0 = time.monotonic()
        with pytest.raises(ModelError, match=r"unreachable and could not be recovered: no runtime"):
            await m.request(HELLO)
        assert time.monotonic() - t0 < 30


def test_keep_server_survives_the_command_and_is_reused(local_model_file):
    async def once() -> int:
        async with connect(model_file=local_model_file, keep_server=True) as models:
            await models["judge"].request(HELLO)
            info = server.read_state(server.state_file(local_model_file))
            assert info is not None
            return info.pid

    pid1 = asyncio.run(once())
    try:
        assert server.pid_alive(pid1)
        assert asyncio.run(once()) == pid1
    finally:
        server.stop_server(server.read_state(server.state_file(local_model_file)))
    assert wait_dead(pid1)


def test_bad_model_file_fails_fast_with_log(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file" * 100)
    t0 = time.monotonic()
    with pytest.raises(server.ServerError, match="exited with code"):
        server.start_server(bad, timeout=60)
    assert time.monotonic() - t0 < 60
    assert server.list_servers() == []


def test_cli_serve_status_stop(local_model_file, monkeypatch):
    monkeypatch.setenv("VERIMAP_MODEL_FILE", str(local_model_file))
    runner = CliRunner()
    r = runner.invoke(main, ["model", "serve"])
    assert r.exit_code == 0, r.output
    url = r.stdout.strip().splitlines()[-1]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    status = json.loads(runner.invoke(main, ["model", "status", "--json"]).stdout)
    assert [s["base_url"] for s in status["servers"]] == [url]
    assert status["servers"][0]["healthy"] and status["servers"][0]["keep"]
    pid = status["servers"][0]["pid"]
    r = runner.invoke(main, ["model", "stop"])
    assert r.exit_code == 0 and "stopped" in r.output
    assert wait_dead(pid)
    assert json.loads(runner.invoke(main, ["model", "status", "--json"]).stdout)["servers"] == []


def test_server_of_a_killed_command_exits_by_itself(local_model_file, tmp_path):
    """A command killed before it can stop its server (SIGKILL, CI timeout) leaves no server behind."""
    import subprocess
    import sys

    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from verimap.local import server\n"
        "info = server.start_server(Path(sys.argv[1]), alias='t', keep=False)\n"
        "print(info.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script, str(local_model_file)], stdout=subprocess.PIPE, text=True
    )
    try:
        pid = int(owner.stdout.readline())
        assert server.pid_alive(pid)
    finally:
        owner.kill()
        owner.wait()
    assert wait_dead(pid, timeout=15)
