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
does. Entries are one JSON file each under the directory; only POST bodies are recorded. A
recording kept with the code is packed into one gzipped JSON-lines file (`pack`, or
`python3 benchmarks/_replay.py pack DIR FILE.jsonl.gz`), which `replaying` reads as it reads a
directory, but only reads: a request it lacks is sent and counted, not recorded.
"""

from __future__ import annotations

import gzip
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


ARCHIVE = ".jsonl.gz"


@dataclass
class Replay:
    """Replies recorded under the directory `root`, or packed in the file `root` (read only)."""

    root: Path
    replayed: int = 0
    sent: int = 0
    _asked: dict[str, int] = field(default_factory=dict)
    _packed: dict[str, dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if self.root.name.endswith(ARCHIVE):
            self._packed = read_packed(self.root)

    def recorded(self, key: str) -> dict[str, Any] | None:
        """The entry recorded for `key`, if any."""
        if self._packed is not None:
            return self._packed.get(key)
        path = self.path(key)
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def record(self, key: str, entry: dict[str, Any]) -> None:
        """Keep a new entry (in a directory; a packed recording stays as it was)."""
        if self._packed is not None:
            return
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry), encoding="utf-8")
        tmp.replace(path)

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
    if replay._packed is None:
        root.mkdir(parents=True, exist_ok=True)
    transport = _transport()
    http = sys.modules[transport.__module__.split(".")[0]]
    original = transport.handle_async_request

    async def handle(self: Any, request: Any) -> Any:
        if request.method != "POST":
            return await original(self, request)
        await request.aread()
        key = replay.key(request)
        entry = replay.recorded(key)
        if entry is not None:
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
            replay.record(
                key,
                {
                    "status": response.status_code,
                    "headers": headers,
                    "body": body.decode("utf-8"),
                    "recorded": time.time(),
                },
            )
        return http.Response(response.status_code, headers=headers, content=body, request=request)

    transport.handle_async_request = handle
    try:
        yield replay
    finally:
        transport.handle_async_request = original


def pack(root: Path, out: Path) -> int:
    """Write the entries recorded under `root` to `out` (`ARCHIVE`), one line each, sorted by
    key and without their recording time, so the same recording packs to the same bytes; how
    many were packed."""
    if not out.name.endswith(ARCHIVE):
        raise ValueError(f"{out}: a packed recording's name ends with {ARCHIVE}")
    lines = []
    for path in sorted(root.glob("*/*.json")):
        entry = json.loads(path.read_text(encoding="utf-8"))
        entry.pop("recorded", None)
        lines.append(json.dumps({"key": path.stem, **entry}, sort_keys=True, ensure_ascii=False))
    data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as f:
        f.write(data)
    return len(lines)


def read_packed(path: Path) -> dict[str, dict[str, Any]]:
    """The entries of a packed recording by key."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        entries = [json.loads(line) for line in f if line.strip()]
    return {e.pop("key"): e for e in entries}


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "pack":
        sys.exit("usage: python3 benchmarks/_replay.py pack DIR FILE.jsonl.gz")
    n = pack(Path(sys.argv[2]), Path(sys.argv[3]))
    print(f"{sys.argv[3]}: {n} entries")
