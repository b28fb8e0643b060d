"""Fixtures for the LLM layer: a scripted OpenAI-compatible HTTP server on 127.0.0.1.

`ScriptedHTTPServer` is a test double of an endpoint (canned replies), but the
client talks to it over real HTTP, so retries, status codes, headers and
timeouts go through the same code path as with a real server.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def completion(
    content: str = "ok",
    *,
    prompt: int = 10,
    completion_tokens: int = 5,
    cached: int = 0,
    tool_calls=None,
    model: str = "m",
) -> dict:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
        msg["content"] = None
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
    }
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
        "usage": usage,
    }


def error(status: int, message: str) -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": "error"}})


class ScriptedHTTPServer:
    """Serves `replies` in order (the last one repeats) and records each request body and headers,
    and the most requests it held at once (`max_in_flight`)."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                with outer._lock:
                    outer.requests.append(body)
                    outer.headers.append(dict(self.headers))
                    i = len(outer.requests) - 1
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                reply = outer.replies[min(i, len(outer.replies) - 1)]
                try:
                    if reply.delay:
                        time.sleep(reply.delay)
                finally:
                    with outer._lock:
                        outer.in_flight -= 1
                data = json.dumps(reply.body or {}).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def http_server() -> Iterator[ScriptedHTTPServer]:
    s = ScriptedHTTPServer()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path_factory, monkeypatch) -> None:
    """Each test's call-cache key in a state directory of its own, never the user's."""
    monkeypatch.setenv("VERIMAP_STATE_DIR", str(tmp_path_factory.mktemp("state")))
