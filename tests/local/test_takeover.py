"""Another local process must not pass for verimap's model server (issue: port race, no token).

Everything here is loopback and bounded. The logic tests stand in for llama.cpp with small HTTP
servers (an impostor that answers 200 to anything, one that asks for a key to catch it, and one
that behaves as verimap's server does); the `localmodel` test checks the real server.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from verimap.base.messages import GenerationSettings, ModelRequest
from verimap.base.usage import Usage
from verimap.local import server
from verimap.local._serve import PROOF_PATH, READY_PATH, _read_token, _split_args, proof
from verimap.local.endpoint import connect

TOKEN = "t" * 43
SECRET = "sk-must-never-reach-the-local-server"

# (status, JSON body) for a request: its path with query, and its headers.
Answer = Callable[[str, dict[str, str]], tuple[int, dict]]


class LoopbackServer:
    """An HTTP server on 127.0.0.1 that answers with `answer` and records every request."""

    def __init__(self, answer: Answer):
        self.seen: list[tuple[str, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def _reply(self) -> None:
                n = int(self.headers.get("content-length", 0) or 0)
                self.rfile.read(n)
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.seen.append((self.path, headers))
                status, body = answer(self.path, headers)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _reply

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def leaked(self, *secrets: str) -> bool:
        return any(s in f"{path} {headers}" for path, headers in self.seen for s in secrets)


def answers_200(path: str, headers: dict[str, str]) -> tuple[int, dict]:
    return 200, {"object": "list", "data": [{"id": "m", "object": "model"}]}


def asks_for_a_key(path: str, headers: dict[str, str]) -> tuple[int, dict]:
    """An impostor that mimics the 401 to be sent a key."""
    if not headers.get("authorization"):
        return 401, {"detail": "Invalid API key"}
    return answers_200(path, headers)


def like_ours(path: str, headers: dict[str, str]) -> tuple[int, dict]:
    """What verimap's server does: the proof without the token, everything else with it."""
    url = urlsplit(path)
    if url.path == PROOF_PATH:
        return 200, {"proof": proof(TOKEN, parse_qs(url.query)["nonce"][0])}
    if headers.get("authorization") != f"Bearer {TOKEN}":
        return 401, {"detail": "Invalid API key"}
    if url.path.endswith("/chat/completions"):
        return 200, {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "hi"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }
    return answers_200(path, headers)


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("VERIMAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def loopback() -> Iterator[Callable[[Answer], LoopbackServer]]:
    started: list[LoopbackServer] = []

    def start(answer: Answer) -> LoopbackServer:
        started.append(LoopbackServer(answer))
        return started[-1]

    yield start
    for s in started:
        s.close()


def info_for(port: int, model_file: Path, **kw) -> server.ServerInfo:
    return server.ServerInfo(
        pid=os.getpid(),
        port=port,
        model_file=str(model_file),
        alias="m",
        keep=True,
        token=TOKEN,
        **kw,
    )


def test_an_impostor_that_answers_200_is_not_taken_for_our_server(loopback, tmp_path):
    impostor = loopback(answers_200)
    model_file = tmp_path / "m.gguf"
    info = info_for(impostor.port, model_file)
    assert not server.healthy(info)
    # A kept server's state file naming the impostor's port (our server died, it took the port).
    path = server.state_file(model_file)
    path.write_text(info.model_dump_json())
    assert server.find_server(model_file) is None
    assert not path.exists()
    assert impostor.seen and not impostor.leaked(TOKEN, SECRET)


def test_an_impostor_that_asks_for_a_key_is_never_sent_the_token(loopback, tmp_path):
    impostor = loopback(asks_for_a_key)
    assert not server.healthy(info_for(impostor.port, tmp_path / "m.gguf"))
    assert impostor.seen and not impostor.leaked(TOKEN, SECRET)


def test_a_server_that_proves_the_token_is_ours(loopback, tmp_path):
    ours = loopback(like_ours)
    assert server.healthy(info_for(ours.port, tmp_path / "m.gguf"))
    # The token is sent only after the proof, and the check also saw the refusal without it.
    paths = [(urlsplit(p).path, "authorization" in h) for p, h in ours.seen]
    assert paths == [("/v1/models", False), (PROOF_PATH, False), (READY_PATH, True)]
    assert not server.healthy(
        info_for(ours.port, tmp_path / "m.gguf").model_copy(update={"token": "x" * 43})
    )


class _Started:
    """A `subprocess.Popen` stand-in: what the server process would have been handed."""

    pid = 0
    returncode = 1

    def poll(self) -> int:
        return self.returncode


def test_the_port_is_bound_and_the_token_piped_before_the_server_starts(monkeypatch, tmp_path):
    model_file = tmp_path / "m.gguf"
    model_file.write_bytes(b"GGUF")
    seen: dict = {}

    def popen(cmd, **kw):
        port = int(cmd[cmd.index("--port") + 1])
        with socket.socket() as rival:  # another process trying to take the port
            with pytest.raises(OSError) as ei:
                rival.bind(("127.0.0.1", port))
            seen["bind_errno"] = ei.value.errno
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            seen["listening"] = True  # the kernel queues it until the server accepts
        listen_fd = int(cmd[cmd.index("--listen-fd") + 1])
        token_fd = int(cmd[cmd.index("--token-fd") + 1])
        assert set(kw["pass_fds"]) == {listen_fd, token_fd}
        seen["token"] = os.read(token_fd, 1024).decode()
        seen["cmd"], seen["env"] = " ".join(cmd), kw["env"]
        return _Started()

    monkeypatch.setattr(server, "runtime_available", lambda: True)
    monkeypatch.setattr(server.subprocess, "Popen", popen)
    with pytest.raises(server.ServerError, match="exited with code 1"):
        server.start_server(model_file, timeout=5)
    assert seen["bind_errno"] == errno.EADDRINUSE and seen["listening"]
    assert len(seen["token"]) >= 32
    assert seen["token"] not in seen["cmd"] and SECRET not in seen["cmd"]
    assert not any(seen["token"] in v or SECRET in v for v in seen["env"].values())
    assert server.list_servers() == []


def test_the_state_file_with_the_token_is_the_owners_alone(monkeypatch, tmp_path):
    model_file = tmp_path / "m.gguf"
    model_file.write_bytes(b"GGUF")
    (tmp_path / "state" / "servers").mkdir(parents=True, mode=0o777)
    os.chmod(tmp_path / "state" / "servers", 0o777)  # made open by someone, before verimap
    running = _Started()
    running.returncode = None  # type: ignore[assignment]
    monkeypatch.setattr(server, "runtime_available", lambda: True)
    monkeypatch.setattr(server.subprocess, "Popen", lambda cmd, **kw: running)
    monkeypatch.setattr(server, "healthy", lambda info, timeout=2.0: True)
    info = server.start_server(model_file, keep=True, timeout=5)
    path = server.state_file(model_file)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert server.read_state(path).token == info.token and len(info.token) >= 32
    assert info.token not in repr(info) and "token" not in server.describe(info)
    path.unlink()


async def test_the_local_client_sends_the_server_token_and_never_openai_api_key(
    monkeypatch, loopback, tmp_path
):
    """`connect` on the local model: every request carries the server's token, not the key."""
    ours = loopback(like_ours)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-private")
    model_file = tmp_path / "m.gguf"
    model_file.write_bytes(b"GGUF")
    info = info_for(ours.port, model_file).model_copy(update={"keep": False})
    monkeypatch.setattr(server, "ensure_server", lambda *a, **k: (info, True))
    monkeypatch.setattr(server, "stop_server", lambda *a, **k: True)
    ask = ModelRequest(
        messages=[{"role": "user", "content": "hi"}], settings=GenerationSettings(max_tokens=4)
    )
    async with connect(model_file=model_file) as models:
        assert (await models["executor"].request(ask)).content == "hi"
    sent = [h for p, h in ours.seen if p.endswith("/chat/completions")]
    assert sent and all(h["authorization"] == f"Bearer {TOKEN}" for h in sent)
    assert not ours.leaked(SECRET, "org-private")


async def test_a_kept_server_given_as_the_base_url_gets_its_token(monkeypatch, loopback, tmp_path):
    """`OPENAI_BASE_URL=$(verimap model serve)`: verimap's own server, so its token, no key."""
    ours = loopback(like_ours)
    model_file = tmp_path / "m.gguf"
    server.state_file(model_file).write_text(info_for(ours.port, model_file).model_dump_json())
    ask = ModelRequest(messages=[{"role": "user", "content": "hi"}])
    url = f"http://localhost:{ours.port}/v1"
    async with connect(model="gpt-4o-mini", base_url=url) as models:
        assert (await models["planner"].request(ask)).content == "hi"
        planner = models["planner"]
        assert planner.price_known and planner.cost_of(Usage(prompt_tokens=9)) == 0.0
    assert not ours.leaked(SECRET)


def test_the_server_wrapper_takes_its_fds_and_token_from_a_pipe():
    ours, rest = _split_args(
        ["--owner", "12", "--listen-fd", "5", "--token-fd", "6", "--", "--port", "1"]
    )
    assert ours == {"--owner": 12, "--listen-fd": 5, "--token-fd": 6} and rest == ["--port", "1"]
    with pytest.raises(SystemExit):
        _split_args(["--api_key", "x", "--"])
    r, w = os.pipe()
    os.write(w, TOKEN.encode())
    os.close(w)
    assert _read_token(r) == TOKEN
    with pytest.raises(OSError):
        os.fstat(r)  # closed once read


def test_the_wrapper_makes_llama_cpp_ask_for_the_token(monkeypatch):
    """On llama-cpp-python's own `authenticate` and settings, without loading a model."""
    app_module = pytest.importorskip("llama_cpp.server.app", reason="the llama.cpp runtime")
    from fastapi import Depends, FastAPI
    from fastapi.testclient import TestClient
    from llama_cpp.server.settings import ServerSettings

    def create_app(**_kw):
        app_module.set_server_settings(ServerSettings())
        app = FastAPI()
        app.add_api_route(
            "/v1/models", lambda: {"data": []}, dependencies=[Depends(app_module.authenticate)]
        )
        return app

    monkeypatch.setattr(app_module, "create_app", create_app)
    from verimap.local._serve import _require_token

    _require_token(TOKEN)
    client = TestClient(app_module.create_app())
    assert client.get("/v1/models").status_code == 401
    assert client.get("/v1/models", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/v1/models", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get(PROOF_PATH, params={"nonce": "n1"}).json() == {"proof": proof(TOKEN, "n1")}
    assert client.get(READY_PATH).status_code == 401
    assert client.get(READY_PATH, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def _long_reply(info: server.ServerInfo) -> None:
    body = {"messages": [{"role": "user", "content": "Count from 1 to 200."}], "max_tokens": 150}
    headers = {"Authorization": f"Bearer {info.token}"}
    # Only keeping the server busy matters here, not the reply (or a timeout on a loaded machine).
    with httpx.Client(timeout=120, trust_env=False) as client, contextlib.suppress(httpx.HTTPError):
        client.post(f"{info.base_url}/chat/completions", json=body, headers=headers)


@pytest.mark.localmodel
def test_the_real_server_wants_its_token_which_no_other_process_can_read(local_server):
    info = local_server
    models = f"{info.base_url}/models"
    with httpx.Client(timeout=30, trust_env=False) as client:
        assert client.get(models).status_code == 401
        assert client.get(models, headers={"Authorization": f"Bearer {SECRET}"}).status_code == 401
        ok = client.get(models, headers={"Authorization": f"Bearer {info.token}"})
        assert ok.status_code == 200
    assert server.healthy(info)
    # Busy with a reply is not dead: the check never waits for the model.
    busy = threading.Thread(target=_long_reply, args=(info,))
    busy.start()
    try:
        time.sleep(1.0)
        assert server.healthy(info, timeout=2.0)
    finally:
        busy.join(timeout=120)
    for what in ("cmdline", "environ"):
        assert info.token.encode() not in Path(f"/proc/{info.pid}/{what}").read_bytes()
    state = Path(info.state_path)
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.parent.stat().st_mode) == 0o700
    # The server holds the port it was handed; nothing else can bind it.
    with socket.socket() as rival, pytest.raises(OSError):
        rival.bind((info.host, info.port))
