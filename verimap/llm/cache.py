"""A disk cache of model replies, so that a re-run at temperature 0 costs nothing.

`CachedModel` wraps any `Model`. A reply is stored under a key made from the request as the
model is given it (messages, tools, tool choice, reply schema, generation settings, role), the
endpoint (its whole URL, query included, never its userinfo; the model's name; how requests
are shaped for it; the organization and project sent; a digest of the API key; for the local
model, a digest of the GGUF file's content) and the cache's format. A reply read back is the
recorded one, with its usage moved to `cached_calls` and `saved_*`: no endpoint was asked.

The key is an HMAC under a secret of the user's own (`user_secret`, in the user's state
directory, mode 0600), and so is the API key's digest within it. A cache is therefore reused
only by the user who wrote it: a cache directory someone else made, shipped in a repository
or copied from another machine, answers nothing, however it was filled. A fixed, public HMAC
key would not do: anyone holding the cache could test guesses of a key (or a URL's password)
against it offline. The directory itself must be the user's and closed to writes by others
(`CacheError` otherwise), and replies are redacted (`verimap.base.redaction`) before they are
stored, so a key an endpoint echoed is not kept on disk.

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
import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from verimap.base.env import getenv, state_dir
from verimap.base.messages import ModelRequest, ModelResponse
from verimap.base.model import ModelError, WrappedModel
from verimap.base.protocols import Model
from verimap.base.redaction import redact
from verimap.base.usage import Usage
from verimap.llm.limits import endpoint_key

log = logging.getLogger(__name__)

CACHE_FORMAT = 2
CacheMode = Literal["off", "on", "sampled"]
CACHE_MODES: tuple[str, ...] = ("off", "on", "sampled")
# Attributes of a model that change what it is sent, besides the request itself.
_SHAPING = ("requested_dialect", "max_tokens_cap", "extra_body")
# Problems said once per process: a cache is consulted thousands of times in an eval.
_SAID: set[str] = set()
SECRET_FILE = "call-cache.key"
_SECRET_BYTES = 32
_secrets: dict[Path, bytes] = {}
# File digests by (resolved path, size, mtime): a GGUF is hashed once per process, not per call.
_digests: dict[tuple[str, int, int], str] = {}
_lock = threading.Lock()


class CacheError(ModelError):
    """The call cache cannot be used as asked (a directory of another user, or open to
    writes by others; no private place for the user's cache key). No call was made."""

    def __init__(self, message: str):
        super().__init__(message, usage=Usage())


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


def _refuse_unless_own(path: Path, what: str, fix: str) -> None:
    """`CacheError` naming `what` and `fix` unless `path` is a directory of this user that no
    one else may write to."""
    st = path.stat()
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"{what} {path} is not a directory; {fix}")
    if st.st_uid != os.getuid():
        raise CacheError(
            f"{what} {path} belongs to another user (uid {st.st_uid}), who could plant "
            f"what it holds; {fix}"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(
            f"{what} {path} may be written by others (mode {stat.S_IMODE(st.st_mode):o}), who "
            f"could plant what it holds; `chmod go-w {path}`, or {fix}"
        )


def check_cache_dir(root: Path) -> None:
    """Make `root` (mode 0700) if it is missing, then refuse it (`CacheError`) unless it is a
    directory of this user that group and others cannot write. A disk that cannot hold it
    costs the cache its writes, never the run."""
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)  # replies hold user data
    except OSError as e:
        _say_once(logging.WARNING, f"cannot make the call cache {root}: {e}")
    with contextlib.suppress(FileNotFoundError):
        _refuse_unless_own(root, "the call cache", "choose another --cache-dir")


def user_secret(path: Path | None = None) -> bytes:
    """The key of the cache's HMACs: random bytes of this user's, made on first use in
    `path` (default: `SECRET_FILE` in `verimap.base.env.state_dir()`), mode 0600, in a directory of
    this user's only. Read once per process."""
    path = path or state_dir() / SECRET_FILE
    with _lock:
        known = _secrets.get(path)
        if known is None:
            known = _secrets[path] = _read_or_make_secret(path)
        return known


def _read_or_make_secret(path: Path) -> bytes:
    fix = "set VERIMAP_STATE_DIR to a private directory"
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _refuse_unless_own(path.parent, "the state directory", fix)
        if not path.exists():
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")  # mode 0600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(secrets.token_bytes(_SECRET_BYTES))
                # A link is made whole or not at all: a process starting at the same time
                # reads the one key that won, never a file half written.
                with contextlib.suppress(FileExistsError):
                    os.link(tmp, path)
            finally:
                os.unlink(tmp)
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            st = os.fstat(f.fileno())
            key = f.read()
    except OSError as e:
        raise CacheError(f"cannot keep the call cache's key in {path}: {e}; {fix}") from None
    if st.st_uid != os.getuid() or st.st_mode & 0o077 or len(key) != _SECRET_BYTES:
        raise CacheError(
            f"the call cache's key {path} is not a private file of this user's "
            f"({_SECRET_BYTES} bytes, mode 0600); delete it to make a new one"
        )
    return key


def keyed_digest(secret: bytes, purpose: str, value: str) -> str:
    """HMAC-SHA256 of `value` under `secret`, separated by `purpose` from every other use."""
    data = f"verimap call cache\0{purpose}\0{value}".encode()
    return hmac.new(secret, data, hashlib.sha256).hexdigest()


def file_digest(path: Path) -> str:
    """SHA-256 of the file's content, computed once per process for each (path, size, mtime)."""
    real = path.resolve()
    st = real.stat()
    memo = (str(real), st.st_size, st.st_mtime_ns)
    with _lock:  # held while hashing: callers at once wait for one digest, not read it twice
        if memo not in _digests:
            with real.open("rb") as f:
                _digests[memo] = hashlib.file_digest(f, "sha256").hexdigest()
        return _digests[memo]


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
        """Store `response` under `key`, redacted: a secret in a reply stays off the disk."""
        entry = {
            "format": CACHE_FORMAT,
            "key": key,
            **redact(about),
            "stored_at": time.time(),
            "response": redact(response.model_dump(mode="json")),
        }
        path = self.path(key)
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
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
    """`model` with its replies kept on disk under `cache_dir` (default: `default_cache_dir()`),
    which must be the user's (`CacheError` otherwise, raised here).

    `sampled`: cache sampled requests too (see the module's docstring for what that means).
    `endpoint`: what identifies the endpoint in the key, when the model's URL does not (the
    local server's port changes with every start; its model does not), and `model_file` the
    weights it serves, known by their content's digest (computed on the first request).
    `secret`: the HMAC key (default: `user_secret()`). Anything else (`base_url`, `provider`,
    `cost_of`, `aclose`, ...) is the inner model's."""

    def __init__(
        self,
        model: Model,
        cache_dir: Path | str | None = None,
        *,
        sampled: bool = False,
        endpoint: str | None = None,
        model_file: Path | str | None = None,
        secret: bytes | None = None,
    ):
        super().__init__(model)
        self.store = CallStore(cache_dir if cache_dir is not None else default_cache_dir())
        check_cache_dir(self.store.root)
        self.sampled = sampled
        self.endpoint = endpoint
        self.model_file = Path(model_file) if model_file is not None else None
        self._secret = secret if secret is not None else user_secret()
        self._where: dict[str, Any] | None = None
        # How often each sampled request was asked in this process (by its key without a count).
        self._asked: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"CachedModel({self.inner!r}, cache_dir={str(self.store.root)!r})"

    def where(self) -> dict[str, Any]:
        """What identifies the endpoint in every key, worked out once (hashing `model_file`
        the first time: call it off the event loop)."""
        if self._where is None:
            self._where = _endpoint_identity(
                self.inner, self.endpoint, self.model_file, self._secret
            )
        return self._where

    def key(self, req: ModelRequest, occurrence: int | None = None) -> str:
        """The entry's name: an HMAC of the request, the endpoint and the format."""
        shaping = {a: v for a in _SHAPING if (v := getattr(self.inner, a, None)) is not None}
        ident = {
            "format": CACHE_FORMAT,
            "endpoint": self.where(),
            "model": self.inner.name,
            "shaping": shaping,
            "request": req.model_dump(mode="json"),
            "occurrence": occurrence,
        }
        # Key order is kept: a schema's property order is part of what the model is sent.
        text = json.dumps(ident, ensure_ascii=False, separators=(",", ":"))
        return keyed_digest(self._secret, "entry", text)

    async def request(self, req: ModelRequest) -> ModelResponse:
        if self._where is None:
            await asyncio.to_thread(self.where)
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
        where = self.where()
        about = {"endpoint": where["shown"], "model": self.inner.name, "role": req.role}
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


def _endpoint_identity(
    model: Model, endpoint: str | None, model_file: Path | None, secret: bytes
) -> dict[str, Any]:
    """The endpoint's part of a key: where (the URL but its userinfo, or `endpoint`), the
    model file's digest, the account (organization and project) and HMACs of the
    credentials (the API key, the URL's userinfo). `shown` is what an entry may record."""
    url = getattr(model, "base_url", None)
    userinfo = ""
    if endpoint is not None:
        where = shown = endpoint
    elif isinstance(url, str) and url:
        parts = urlsplit(url)
        userinfo, _, host = parts.netloc.rpartition("@")
        where = parts._replace(netloc=host).geturl()
        shown = endpoint_key(url)
    else:
        where = shown = type(model).__name__
    credential = getattr(model, "credential_digest", None)
    try:
        weights = file_digest(model_file) if model_file is not None else None
    except OSError as e:
        raise CacheError(
            f"cannot read the model file {model_file} to key the call cache: {e}"
        ) from None
    return {
        "where": where,
        "shown": shown,
        "model_file": weights,
        "account": getattr(model, "account", None),
        "credential": credential(secret) if callable(credential) else None,
        "userinfo": keyed_digest(secret, "userinfo", userinfo) if userinfo else None,
    }
