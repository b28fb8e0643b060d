"""A disk cache of model replies, so that a re-run at temperature 0 costs nothing.

`CachedModel` wraps any `Model`. A reply is stored under a hash of the request as the model
is given it (messages, tools, tool choice, reply schema, generation settings, role) and of
the endpoint (its URL's scheme, host, port and path, never a key or a query; the model's
name; how requests are shaped for it), with the cache's format version. A reply read back is
the recorded one, with its usage moved to `cached_calls` and `saved_*`: no endpoint was asked.

What is cached. A request is *sampled* when its temperature is above 0, or not given (every
OpenAI-compatible server then samples at its own default, 0.7-1.0). Sampled requests are not
cached unless `sampled=True`: their replies are meant to differ, and a self-consistency vote
over one cached sample would be a vote of one. With `sampled=True` the k-th identical sampled
request of a process gets the k-th recorded reply, so a re-run replays the same samples in the
same order and repeats within a run stay distinct. Failed calls are never stored.

Storage: one JSON file per entry, `ab/abcdef....json` under the cache directory, written to a
temporary file beside it and renamed into place. A rename is atomic on POSIX, so a reader sees
a whole entry or none, and processes writing at once (`-c`, Ray workers on a shared disk)
need no lock: the last rename wins, and both wrote a valid entry. SQLite would need its locks,
which its own documentation warns are unreliable on network file systems, and one corrupt
page would take every entry with it; a file per entry is damaged alone. An entry that cannot
be read is a miss, reported once, and is overwritten by the fresh reply. Entries are kept
until deleted: `rm -r` the directory (or part of it) to prune.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from verimap.env import getenv
from verimap.llm.base import Model, ModelRequest, ModelResponse, WrappedModel
from verimap.llm.limits import endpoint_key
from verimap.usage import Usage

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
CacheMode = Literal["off", "on", "sampled"]
CACHE_MODES: tuple[str, ...] = ("off", "on", "sampled")
# Attributes of a model that change what it is sent, besides the request itself.
_SHAPING = ("requested_dialect", "max_tokens_cap", "extra_body")
# Problems said once per process: a cache is consulted thousands of times in an eval.
_SAID: set[str] = set()


def default_cache_dir() -> Path:
    """`$VERIMAP_CACHE_DIR`, else `$XDG_CACHE_HOME/verimap/calls` (`~/.cache/verimap/calls`)."""
    own = getenv("VERIMAP_CACHE_DIR")
    if own:
        return Path(own).expanduser()
    base = getenv("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "verimap" / "calls"


def is_sampled(req: ModelRequest) -> bool:
    """Whether the reply is drawn at random: a temperature above 0, or none given."""
    t = req.settings.temperature
    return t is None or t > 0


def _say_once(level: int, message: str) -> None:
    if message not in _SAID:
        _SAID.add(message)
        log.log(level, message)


class CallStore:
    """The files of one cache directory (see the module's docstring)."""

    def __init__(self, root: Path | str):
        self.root = Path(root).expanduser()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> ModelResponse | None:
        path = self.path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            if entry.get("format") != CACHE_FORMAT or entry.get("key") != key:
                raise ValueError("written for another key or format")
            return ModelResponse.model_validate(entry["response"])
        except FileNotFoundError:
            return None
        except Exception as e:  # any damage: a truncated file, a foreign one, bad fields
            _say_once(
                logging.WARNING,
                f"cache entry {path} is unreadable ({type(e).__name__}); asking the model "
                "instead, and rewriting it",
            )
            return None

    def put(self, key: str, response: ModelResponse, about: dict[str, Any]) -> None:
        entry = {
            "format": CACHE_FORMAT,
            "key": key,
            **about,
            "stored_at": time.time(),
            "response": response.model_dump(mode="json"),
        }
        path = self.path(key)
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)  # replies hold user data
            path.parent.mkdir(exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(entry, f, ensure_ascii=False)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:  # a full or read-only disk costs the cache, never the run
            _say_once(logging.WARNING, f"cannot write to the call cache {self.root}: {e}")


class CachedModel(WrappedModel):
    """`model` with its replies kept on disk under `cache_dir` (default: `default_cache_dir()`).

    `sampled`: cache sampled requests too (see the module's docstring for what that means).
    `endpoint`: what identifies the endpoint in the key, when the model's URL does not (the
    local server's port changes with every start; its model does not). Anything else
    (`base_url`, `provider`, `cost_of`, `aclose`, ...) is the inner model's."""

    def __init__(
        self,
        model: Model,
        cache_dir: Path | str | None = None,
        *,
        sampled: bool = False,
        endpoint: str | None = None,
    ):
        super().__init__(model)
        self.store = CallStore(cache_dir if cache_dir is not None else default_cache_dir())
        self.sampled = sampled
        self.endpoint = endpoint or _endpoint_of(model)
        # How often each sampled request was asked in this process (by its key without a count).
        self._asked: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"CachedModel({self.inner!r}, cache_dir={str(self.store.root)!r})"

    def key(self, req: ModelRequest, occurrence: int | None = None) -> str:
        """The entry's name: a hash of the request, the endpoint and the format."""
        shaping = {a: v for a in _SHAPING if (v := getattr(self.inner, a, None)) is not None}
        ident = {
            "format": CACHE_FORMAT,
            "endpoint": self.endpoint,
            "model": self.inner.name,
            "shaping": shaping,
            "request": req.model_dump(mode="json"),
            "occurrence": occurrence,
        }
        # Key order is kept: a schema's property order is part of what the model is sent.
        text = json.dumps(ident, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    async def request(self, req: ModelRequest) -> ModelResponse:
        occurrence = None
        if is_sampled(req):
            if not self.sampled:
                _say_once(
                    logging.INFO,
                    "call cache: requests sampled above temperature 0 (or with none set) are "
                    "not cached; `--cache sampled` caches them too",
                )
                return await self.inner.request(req)
            base = self.key(req)
            occurrence = self._asked.get(base, 0)
            self._asked[base] = occurrence + 1
        key = self.key(req, occurrence)
        hit = await asyncio.to_thread(self.store.get, key)
        if hit is not None:
            return hit.model_copy(update={"usage": _saved(hit.usage)})
        resp = await self.inner.request(req)
        about = {"endpoint": self.endpoint, "model": self.inner.name, "role": req.role}
        await asyncio.to_thread(self.store.put, key, resp, about)
        return resp


def _saved(recorded: Usage) -> Usage:
    """A hit's usage: no call, and what the recorded reply had cost, saved."""
    return Usage(
        cached_calls=1,
        saved_prompt_tokens=recorded.prompt_tokens,
        saved_completion_tokens=recorded.completion_tokens,
        saved_cost=recorded.cost,
    )


def _endpoint_of(model: Model) -> str:
    url = getattr(model, "base_url", None)
    return endpoint_key(url) if isinstance(url, str) and url else type(model).__name__
