"""Record a benchmark's calls to its model server, and replay them to a later run of other code.

Why: "behaviour unchanged" across a refactor is a claim about what the code *sends*. Two live
runs differ by sampling noise (retries at T > 0, the server's own nondeterminism), so equal
scores would prove little and unequal ones less. Keyed on the HTTP request itself (method, path
and the JSON body, never the host, port or headers: a local server's port changes with every
start), a replay serves the second run the first run's reply for every byte-identical request.
A request the first run never sent goes to the server and is counted as *sent*: with zero sent,
the second code made exactly the first code's requests, given the same replies. It sits below
verimap's own model classes, so it holds across refactors of those classes (verimap's
`--cache` keys on its own request objects, which a refactor may reshape).

The k-th identical request of a process gets the k-th recorded reply, as `--cache sampled`
does. Entries are one JSON file each under the directory; only POST bodies are recorded.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

_DROP_HEADERS = {"content-encoding", "content-length", "transfer-encoding"}


@dataclass
class Replay:
    root: Path
    replayed: int = 0
    sent: int = 0
    _asked: dict[str, int] = field(default_factory=dict)

    def key(self, request: Any) -> str:
        body: Any
        try:
            body = json.loads(request.content or b"null")
        except ValueError:
            body = request.content.decode("utf-8", "replace")
        ident = json.dumps(
            [request.method, request.url.path, body], sort_keys=True, ensure_ascii=False
        )
        base = hashlib.sha256(ident.encode()).hexdigest()
        n = self._asked.get(base, 0)
        self._asked[base] = n + 1
        return f"{base}-{n}"

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def summary(self) -> str:
        return (
            f"replay {self.root}: {self.replayed + self.sent} request(s), "
            f"{self.replayed} replayed, {self.sent} sent to the server"
        )


def _transport() -> Any:
    """The transport class the openai SDK's client uses (httpx's, or a fork of it), read off a
    client rather than assumed."""
    client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="replay")
    return type(client._client._transport)


@contextmanager
def replaying(root: Path) -> Iterator[Replay]:
    """The SDK's async transport patched while the block runs; yields the counters."""
    replay = Replay(root)
    root.mkdir(parents=True, exist_ok=True)
    transport = _transport()
    http = sys.modules[transport.__module__.split(".")[0]]
    original = transport.handle_async_request

    async def handle(self: Any, request: Any) -> Any:
        if request.method != "POST":
            return await original(self, request)
        await request.aread()
        key = replay.key(request)
        path = replay.path(key)
        if path.exists():
            entry = json.loads(path.read_text(encoding="utf-8"))
            replay.replayed += 1
            return http.Response(
                entry["status"],
                headers=entry["headers"],
                content=entry["body"].encode("utf-8"),
                request=request,
            )
        response = await original(self, request)
        body = await response.aread()
        replay.sent += 1
        headers = {k: v for k, v in response.headers.items() if k.lower() not in _DROP_HEADERS}
        if response.status_code < 500:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            entry = {"status": response.status_code, "headers": headers,
                     "body": body.decode("utf-8"), "recorded": time.time()}  # fmt: skip
            tmp.write_text(json.dumps(entry), encoding="utf-8")
            tmp.replace(path)
        return http.Response(response.status_code, headers=headers, content=body, request=request)

    transport.handle_async_request = handle
    try:
        yield replay
    finally:
        transport.handle_async_request = original
