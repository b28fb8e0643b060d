"""A cap on the requests in flight at one endpoint, shared by everything in the process.

Without one, an eval opened up to tasks × nodes × roles connections at once, and a hosted
API answered the surplus with 429s that ended in `errors.jsonl`. The cap belongs to the
endpoint, not to a model object: the planner, executor and judge of every task in flight
share the same server's limits, so all `OpenAIModel`s on one endpoint with one limit share one
semaphore. A semaphore serves one event loop, so each loop has its own.
"""

from __future__ import annotations

import asyncio
import weakref
from urllib.parse import urlsplit

# The llama.cpp server verimap starts answers one request at a time: more in flight only wait
# there, on its HTTP timeout's clock. Remote APIs serve many; 16 keeps an eval's fan-out (tasks
# x parallel nodes x roles) below the burst that tier-1 rate limits answer with 429s.
LOCAL_MAX_CONNECTIONS = 1
REMOTE_MAX_CONNECTIONS = 16

_SLOTS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, int], asyncio.Semaphore]
] = weakref.WeakKeyDictionary()


def endpoint_key(base_url: str) -> str:
    """What identifies an endpoint: scheme, host, port and path, never credentials or a query."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"


def default_max_connections(local: bool) -> int:
    return LOCAL_MAX_CONNECTIONS if local else REMOTE_MAX_CONNECTIONS


def slots(key: str, limit: int) -> asyncio.Semaphore:
    """The running loop's semaphore for endpoint `key` at `limit` requests in flight. Models
    given different limits for one endpoint keep apart: each gets what it asked for."""
    if limit < 1:
        raise ValueError(f"max_connections must be at least 1, got {limit}")
    per_loop = _SLOTS.setdefault(asyncio.get_running_loop(), {})
    sem = per_loop.get((key, limit))
    if sem is None:
        sem = per_loop[(key, limit)] = asyncio.Semaphore(limit)
    return sem
