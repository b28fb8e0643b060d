"""Start, find, reuse and stop the local llama.cpp server (llama-cpp-python).

Every server verimap starts gets a state file (pid, port, model, owner) so that
`--keep-server` can reuse it across commands, `verimap model stop` can stop it,
and a server whose owner died without cleaning up is stopped on the next start
instead of lingering. Waiting is always bounded: a server that exits or never
answers produces an error with the tail of its log, never a hang.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from pydantic import BaseModel

from verimap.env import EnvError, getenv, getenv_int
from verimap.errors import VerimapError
from verimap.local.catalog import state_dir

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

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"


# 2 GiB of prompt states, every byte counted (see _serve.py): about five saved prompts of the 1.5B.
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


def _servers_dir() -> Path:
    d = state_dir() / "servers"
    d.mkdir(parents=True, exist_ok=True)
    return d


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
    try:
        r = httpx.get(f"{info.base_url}/models", timeout=timeout)
        return r.status_code == 200
    except httpx.HTTPError:
        return False


def free_port(host: str = HOST) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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
    """Start a server on a free port and return once `/v1/models` answers.

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
    logs = state_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    last_error = ""
    for _attempt in range(2):  # a second try covers losing the free-port race
        port = free_port()
        info = ServerInfo(
            pid=0,
            port=port,
            model_file=str(model_file.resolve()),
            alias=alias or model_file.stem,
            chat_format=chat_format,
            n_ctx=n_ctx or default_n_ctx(),
            threads=threads or default_threads(),
            keep=keep,
            owner_pid=None if keep else os.getpid(),
            started_at=time.time(),
        )
        spath = state_file(model_file) if keep else _owned_state_file(model_file, port)
        info.state_path = str(spath)
        info.log_path = str(logs / spath.with_suffix(".log").name)
        cmd = [
            sys.executable, "-m", "verimap.local._serve",
            *([] if keep else ["--owner", str(os.getpid())]), "--",
            "--model", info.model_file,
            "--model_alias", info.alias,
            "--host", info.host,
            "--port", str(port),
            "--n_threads", str(info.threads),
            "--n_ctx", str(info.n_ctx),
            "--logits_all", "False",
        ]  # fmt: skip
        if chat_format:
            cmd += ["--chat_format", chat_format]
        # The prompt-prefix RAM cache: a planner prompt re-sent after an executor call costs its
        # new tokens only (measured on the 1.5B: 1,017-token prompt 11.2 s -> 0.9-1.7 s).
        # Later args win, e.g. VERIMAP_LLAMA_ARGS="--cache False".
        cmd += PROMPT_CACHE_ARGS
        cmd += (
            extra_args if extra_args is not None else shlex.split(getenv("VERIMAP_LLAMA_ARGS", ""))
        )
        # No secrets in the server's environment; verimap importable for the wrapper.
        env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
        pkg_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pkg_root, env.get("PYTHONPATH")]))
        with open(info.log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        info.pid = proc.pid
        spath.write_text(info.model_dump_json(indent=2))
        t0 = time.monotonic()
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                last_error = (
                    f"the model server exited with code {proc.returncode}:\n{_log_tail(info)}"
                )
                break
            if healthy(info, timeout=1.0):
                info.startup_s = round(time.monotonic() - t0, 2)
                spath.write_text(info.model_dump_json(indent=2))
                return info
            time.sleep(0.2)
        else:
            stop_server(info)
            raise ServerError(
                f"the model server did not answer on {info.base_url} within {timeout:.0f}s:\n"
                f"{_log_tail(info)}"
            )
        spath.unlink(missing_ok=True)
        if "address already in use" not in last_error.lower():
            break
    raise ServerError(last_error)


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
    d = json.loads(info.model_dump_json())
    d["base_url"] = info.base_url
    d["alive"] = pid_alive(info.pid)
    return d
