"""The worker's side of the host protocol: a token line, a hello, then one frame per job.

Invocation (see verimap.sandbox.launch, which loads this package without verimap):
    ... serve [--container] [--scratch DIR] [--socket PATH] [--drop-uid UID]
          [--candidate-python PATH]

The host's first line on stdin is a one-time token, and the worker writes nothing
before it has read it: a host that attaches to a running container therefore
never misses the hello, and a worker nobody attaches to gives up. The hello
carries the token back. With `--socket` the worker then connects to that
(bind-mounted) Unix socket and serves jobs there, instead of on stdin/stdout
through the docker daemon; the token proves to the host that the peer on its
socket is this worker.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import time

from . import candidate, unix, wire
from .constants import MAGIC, PROTOCOL
from .supervisor import Supervisor

TOKEN_WAIT_S = 120.0  # longer than the host's start timeout
TOKEN_MAX = 256


def read_token(fd: int, wait_s: float = TOKEN_WAIT_S) -> str | None:
    """The first line on `fd`, or None if it does not come in time (or is not a token).

    Read a byte at a time, so that nothing after the line (the first job, on stdio)
    is consumed.
    """
    deadline = time.monotonic() + wait_s
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or len(line) > TOKEN_MAX:
            return None
        if not select.select([fd], [], [], remaining)[0]:
            return None
        chunk = os.read(fd, 1)
        if not chunk:
            return None
        line += chunk
    return line.decode("ascii", "replace").strip()


def serve(container: bool, scratch_root: str, socket_path: str | None = None) -> None:
    unix.set_dumpable(0)
    unix.set_subreaper()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for sig in unix.CATCHABLE_STOPS:
        signal.signal(sig, signal.SIG_IGN)  # a job cannot stop its worker with a catchable signal
    token = read_token(0)
    if token is None:
        return
    hello = {
        "ready": True,
        "protocol": PROTOCOL,
        "python": sys.version.split()[0],
        "magic": MAGIC,
        "token": token,
    }
    if socket_path:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(socket_path)
        in_fd = out_fd = sock.detach()
    else:
        in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    for fd in (in_fd, out_fd):
        os.set_inheritable(fd, False)
    supervisor = Supervisor(container, scratch_root)
    try:
        supervisor.prefork()
        wire.write_frame(out_fd, hello)
        _serve_loop(supervisor, in_fd, out_fd)
    finally:
        supervisor.shutdown(remove_root=not container)


def _serve_loop(supervisor: Supervisor, in_fd: int, out_fd: int) -> None:
    while True:
        try:
            job = wire.read_frame(in_fd)
        except ValueError as e:
            wire.write_frame(out_fd, {"outcome": "SANDBOX_ERROR", "message": str(e)})
            return
        if job is None:
            return
        if job.get("kind") == "ping":
            res = {"outcome": "PASS"}
        else:
            try:
                res = supervisor.run(job)
            except Exception as e:
                res = {"outcome": "SANDBOX_ERROR", "message": f"worker: {type(e).__name__}: {e}"}
        res["id"] = job.get("id")
        res["token"] = job.get("token")
        wire.write_frame(out_fd, res)
        if job.get("kind") != "ping":
            supervisor.cleanup()


def _option(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def main(argv: list[str]) -> None:
    drop_uid = _option(argv, "--drop-uid")
    if drop_uid is not None:
        unix.DROP_UID = int(drop_uid)
    candidate.CANDIDATE_PYTHON = _option(argv, "--candidate-python")
    serve("--container" in argv, _option(argv, "--scratch") or "/tmp", _option(argv, "--socket"))
