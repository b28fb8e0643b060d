"""Start, find, reuse and stop the local llama.cpp server (llama-cpp-python).

Every server verimap starts gets a state file (pid, port, model, owner, token) so that
`--keep-server` can reuse it across commands, `verimap model stop` can stop it,
and a server whose owner died without cleaning up is stopped on the next start
instead of lingering. Waiting is always bounded: a server that exits or never
answers produces an error with the tail of its log, never a hang.

Other local users must not be able to pose as the server: verimap binds its port before the
server starts (and hands it the listening socket), gives each server a random token through a
pipe (never its command line), keeps the token in a state file only its owner can read, and
takes a server for its own only when it proves it holds that token (`healthy`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import importlib.util
import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from pydantic import BaseModel, Field

from verimap.base.env import EnvError, getenv, getenv_int
from verimap.base.errors import VerimapError
from verimap.local._serve import PROOF_PATH, READY_PATH, proof
from verimap.local.catalog import StateDirError, private_dir, state_dir
from verimap.local.child import python_module

HOST = "127.0.0.1"
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.I)
DEFAULT_N_CTX = 8192
INSTALL_HINT = (
    "the llama.cpp runtime is not installed; install it with "
    "`bash scripts/setup_local_model.sh` (builds/caches the wheel) or "
    "`pip install 'verimap[local]'`"
)


class ServerError(VerimapError, RuntimeError):
    pass


class ServerInfo(BaseModel):
    pid: int
    host: str = HOST
    port: int
    model_file: str
    alias: str
    chat_format: str | None = None
    n_ctx: int = DEFAULT_N_CTX
    threads: int = 1
    keep: bool = False
    owner_pid: int | None = None
    started_at: float = 0.0
    startup_s: float = 0.0
    log_path: str = ""
    state_path: str = ""
    # The server's Bearer key; in the state file (mode 0600), never in a repr or `describe`.
    token: str = Field(default="", repr=False)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"


# 2 GiB of prompt states, every byte counted (see _serve.py): a few saved prompts of the default.
PROMPT_CACHE_ARGS = ["--cache", "True", "--cache_type", "ram", "--cache_size", str(2 << 30)]


def runtime_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def default_n_ctx() -> int:
    """`VERIMAP_N_CTX`, else DEFAULT_N_CTX. A bad value is a ServerError, like the server's
    other start-up failures, so callers need not know it came from the environment."""
    try:
        return getenv_int("VERIMAP_N_CTX", DEFAULT_N_CTX)
    except EnvError as e:
        raise ServerError(str(e)) from None


def _key(model_file: Path) -> str:
    return hashlib.sha1(str(model_file.resolve()).encode()).hexdigest()[:12]


def _private_dir(d: Path) -> Path:
    """`d` as `private_dir` makes it, or a ServerError saying why it cannot be."""
    try:
        return private_dir(d)
    except StateDirError as e:
        raise ServerError(str(e)) from None


def _servers_dir() -> Path:
    return _private_dir(state_dir() / "servers")


def _write_state(path: Path, info: ServerInfo) -> None:
    """Write `info` readable by its owner only (it holds the token), replacing what was there."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(info.model_dump_json(indent=2))
    os.replace(tmp, path)


def state_file(model_file: Path) -> Path:
    """The state file of the kept (reusable) server of a model."""
    return _servers_dir() / f"{_key(model_file)}.json"


def _owned_state_file(model_file: Path, port: int) -> Path:
    """Servers owned by one process get their own file, so concurrent commands never clash."""
    return _servers_dir() / f"{_key(model_file)}-owned-{os.getpid()}-{port}.json"


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    """One starter at a time, so two commands with --keep-server share one server."""
    with (_servers_dir() / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still "exists"; treat it as dead.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _is_llama_server(pid: int) -> bool:
    """Guard against signalling a recycled pid that is no longer our server."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return pid_alive(pid)
    return b"llama_cpp.server" in cmd or b"verimap.local._serve" in cmd


def healthy(info: ServerInfo, timeout: float = 2.0) -> bool:
    """Whether `info`'s server answers and is the one verimap started: its API refuses a
    request without its token (401), it proves it holds the token without being sent it, and
    accepts a request with it (200). Whatever else holds the port (a server that answers 200 to
    all, or one that asks for a key to catch it) is not ours and never sees the token. None of
    these requests waits for the model, so a server busy with a reply is still healthy."""
    if not info.token:
        return False
    try:
        # Loopback only: no proxy from the environment may see the requests or the token.
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            if client.get(f"{info.base_url}/models").status_code != 401:
                return False
            if not _proves_token(client, info):
                return False
            auth = {"Authorization": f"Bearer {info.token}"}
            return client.get(f"{info.root_url}{READY_PATH}", headers=auth).status_code == 200
    except httpx.HTTPError:
        return False


def _proves_token(client: httpx.Client, info: ServerInfo) -> bool:
    nonce = secrets.token_urlsafe(16)
    r = client.get(f"{info.root_url}{PROOF_PATH}", params={"nonce": nonce})
    if r.status_code != 200:
        return False
    try:
        body = r.json()
    except ValueError:
        return False
    answer = body.get("proof") if isinstance(body, dict) else None
    return isinstance(answer, str) and hmac.compare_digest(answer, proof(info.token, nonce))


def _listen(host: str = HOST) -> socket.socket:
    """A socket bound to a free port of `host` and listening, before any server process
    exists: the port is verimap's from the start, so nothing can take it while the model
    loads (connections wait in the backlog until the server accepts)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _token_pipe(token: str) -> int:
    """The read end of a pipe that holds `token` and is closed for writing: how the server gets
    its token without a command line or variable that other processes could read."""
    r, w = os.pipe()
    try:
        os.write(w, token.encode())
    finally:
        os.close(w)
    return r


def read_state(path: Path) -> ServerInfo | None:
    try:
        return ServerInfo.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None


def list_servers() -> list[tuple[Path, ServerInfo]]:
    out = []
    for p in sorted(_servers_dir().glob("*.json")):
        info = read_state(p)
        if info is not None:
            out.append((p, info))
    return out


def kept_server_at(base_url: str) -> ServerInfo | None:
    """The kept server verimap started at `base_url` (the URL `verimap model serve` prints), if
    it still answers as ours; None for any other URL."""
    url = base_url.rstrip("/")
    for _path, info in list_servers():
        if info.keep and info.base_url == url and healthy(info):
            return info
    return None


def _log_tail(info: ServerInfo, n: int = 20) -> str:
    try:
        lines = Path(info.log_path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


def _cleanup_orphans() -> None:
    """Stop non-kept servers whose owner process is gone; drop files of dead servers."""
    for path, info in list_servers():
        if not pid_alive(info.pid):
            path.unlink(missing_ok=True)
        elif not info.keep and info.owner_pid and not pid_alive(info.owner_pid):
            stop_server(info)


def find_server(model_file: Path) -> ServerInfo | None:
    """A kept server for this model that is alive and answering, else None (stale files removed)."""
    path = state_file(model_file)
    info = read_state(path)
    if info is None:
        return None
    if not info.keep:
        return None
    if pid_alive(info.pid) and healthy(info):
        return info
    if pid_alive(info.pid) and _is_llama_server(info.pid):
        # Alive but not answering: do not trust it; stop and let the caller start a new one.
        stop_server(info)
    path.unlink(missing_ok=True)
    return None


def start_server(
    model_file: Path,
    *,
    alias: str | None = None,
    keep: bool = False,
    n_ctx: int | None = None,
    threads: int | None = None,
    chat_format: str | None = None,
    timeout: float = 180.0,
    extra_args: list[str] | None = None,
) -> ServerInfo:
    """Start a server on a port bound here first and return once it answers as ours (`healthy`).

    Raises ServerError (with the log tail) if the process exits or does not
    answer within `timeout`; the process is killed in that case.
    """
    if not runtime_available():
        raise ServerError(INSTALL_HINT)
    model_file = Path(model_file)
    _cleanup_orphans()
    if not model_file.is_file():
        raise ServerError(
            f"model file not found: {model_file} (run `verimap model pull` or pass --model-file)"
        )
    logs = _private_dir(state_dir() / "logs")
    with contextlib.closing(_listen()) as sock:
        info = ServerInfo(
            pid=0,
            port=sock.getsockname()[1],
            model_file=str(model_file.resolve()),
            alias=alias or model_file.stem,
            chat_format=chat_format,
            n_ctx=n_ctx or default_n_ctx(),
            threads=threads or default_threads(),
            keep=keep,
            owner_pid=None if keep else os.getpid(),
            started_at=time.time(),
            token=secrets.token_urlsafe(32),
        )
        spath = state_file(model_file) if keep else _owned_state_file(model_file, info.port)
        info.state_path = str(spath)
        info.log_path = str(logs / spath.with_suffix(".log").name)
        proc = _spawn(info, sock, extra_args)
    info.pid = proc.pid
    _write_state(spath, info)
    _wait_until_ready(proc, info, timeout)
    _write_state(spath, info)
    return info


def _server_args(info: ServerInfo, extra_args: list[str] | None) -> list[str]:
    """llama_cpp.server's arguments: nothing secret, as any local user can read them."""
    args = [
        "--model",
        info.model_file,
        "--model_alias",
        info.alias,
        "--host",
        info.host,
        "--port",
        str(info.port),
        "--n_threads",
        str(info.threads),
        "--n_ctx",
        str(info.n_ctx),
        "--logits_all",
        "False",
    ]
    if info.chat_format:
        args += ["--chat_format", info.chat_format]
    # The prompt-prefix RAM cache: a planner prompt re-sent after an executor call costs its
    # new tokens only, a fraction of its full prompt's time.
    # Later args win, e.g. VERIMAP_LLAMA_ARGS="--cache False".
    args += PROMPT_CACHE_ARGS
    args += extra_args if extra_args is not None else shlex.split(getenv("VERIMAP_LLAMA_ARGS", ""))
    return args


def serve_command(
    info: ServerInfo, listen_fd: int, token_fd: int, extra_args: list[str] | None
) -> tuple[list[str], dict[str, str], Path]:
    """The server wrapper's command line, environment and working directory: no secret in
    either of the first two, verimap importable, and nothing imported from the user's current
    directory (a `socket.py` or `llama_cpp/` in a cloned repository would run as the user)."""
    args = [
        *([] if info.keep else ["--owner", str(os.getpid())]),
        "--listen-fd",
        str(listen_fd),
        "--token-fd",
        str(token_fd),
        "--",
        *_server_args(info, extra_args),
    ]
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [pkg_root, env.get("PYTHONPATH")]))
    return python_module("verimap.local._serve", args, env, _servers_dir())


def _spawn(info: ServerInfo, sock: socket.socket, extra_args: list[str] | None) -> subprocess.Popen:
    """Start the server wrapper on the listening `sock`, its token on a pipe."""
    token_fd = _token_pipe(info.token)
    try:
        cmd, env, cwd = serve_command(info, sock.fileno(), token_fd, extra_args)
        with open(info.log_path, "wb") as log:
            return subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=cwd,
                pass_fds=(sock.fileno(), token_fd),
            )
    finally:
        os.close(token_fd)


def _wait_until_ready(proc: subprocess.Popen, info: ServerInfo, timeout: float) -> None:
    """Return once the server answers as ours; stop it and raise ServerError if it exits or
    does not within `timeout`."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            Path(info.state_path).unlink(missing_ok=True)
            raise ServerError(
                f"the model server exited with code {proc.returncode}:\n{_log_tail(info)}"
            )
        if healthy(info, timeout=1.0):
            info.startup_s = round(time.monotonic() - t0, 2)
            return
        time.sleep(0.2)
    stop_server(info)
    raise ServerError(
        f"the model server did not answer on {info.base_url} within {timeout:.0f}s:\n"
        f"{_log_tail(info)}"
    )


def ensure_server(
    model_file: Path, *, alias: str | None = None, keep: bool = False, **kwargs
) -> tuple[ServerInfo, bool]:
    """Reuse a kept server for this model or start one; returns (info, started_here)."""
    with _lock():
        _cleanup_orphans()
        found = find_server(model_file)
        if found is not None:
            return found, False
        return start_server(model_file, alias=alias, keep=keep, **kwargs), True


def stop_server(info: ServerInfo, timeout: float = 10.0) -> bool:
    """Stop the server (TERM, then KILL); returns True if a process was stopped."""
    stopped = False
    if pid_alive(info.pid) and _is_llama_server(info.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(info.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and pid_alive(info.pid):
            _reap(info.pid)
            time.sleep(0.1)
        if pid_alive(info.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(info.pid, signal.SIGKILL)
            time.sleep(0.1)
        _reap(info.pid)
        stopped = True
    path = Path(info.state_path) if info.state_path else state_file(Path(info.model_file))
    current = read_state(path)
    if current is None or current.pid == info.pid:
        path.unlink(missing_ok=True)
    if not info.keep and info.log_path:
        Path(info.log_path).unlink(missing_ok=True)
    return stopped


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def describe(info: ServerInfo) -> dict:
    """What `verimap model status` shows of a server: everything but its token."""
    d = json.loads(info.model_dump_json(exclude={"token"}))
    d["base_url"] = info.base_url
    d["alive"] = pid_alive(info.pid)
    return d
