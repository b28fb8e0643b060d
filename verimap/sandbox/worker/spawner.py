"""The spawner: a process forked from the worker before any job, that forks each job's.

Requests travel over a SOCK_SEQPACKET pair with the job's fds attached; the
spawner never reads a job, so no process it forks holds anything of one.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys

from . import jobs, restricted, unix
from .constants import CHILD_ENV


class SpawnerGone(Exception):
    """The spawner process died or stopped answering (a job may kill it: same uid)."""


def _spawner_main(sock: socket.socket, home: str) -> None:
    """Serve the worker's requests until it hangs up; never returns.

    spawn: reap the previous job process, fork the next one with the fds sent
    along, answer its pid. wait / poll: answer a job process's exit status.
    Requests are NUL-separated fields; there is no unsolicited message. The
    spawner never reads a job, so a process it forks holds nothing of any job.
    """
    unix.close_all_but({0, 1, 2, sock.fileno()})
    # what every job process needs and no job changes is set up here, once
    os.environ.clear()
    os.environ.update(CHILD_ENV, HOME=home, TMPDIR=home)
    for sig in (signal.SIGPIPE, *unix.CATCHABLE_STOPS):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    restricted.prebuild()
    libc = unix.libc()
    if libc is not None:
        libc.malloc_trim(0)  # free heap pages back: fewer page-table entries for fork to copy
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
    try:
        while True:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 8192, 8)
            if not msg:
                break
            op, *args = msg.split(b"\0")
            if op == b"spawn":
                jobdir, scratch, names, reap = args
                if reap:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(int(reap), 0)
                pid = os.fork()
                if pid == 0:
                    named = dict(zip(names.decode().split(","), fds, strict=True))
                    spare = None  # a candidate's interpreter started for this job: (None, w, r)
                    if "spare_w" in named:
                        spare = (None, named.pop("spare_w"), named.pop("spare_r"))
                    job_fd = named.pop("job")
                    jobs.child_main(job_fd, jobdir.decode(), scratch.decode(), named, home, spare)
                for fd in fds:
                    os.close(fd)
                sock.send(b"%d" % pid)
            else:
                try:
                    wpid, st = os.waitpid(int(args[0]), 0 if op == b"wait" else os.WNOHANG)
                    sock.send(b"%d" % st if wpid else b"running")
                except ChildProcessError:
                    sock.send(b"unknown")
    except BaseException:  # the worker is gone, or we cannot serve it: it will start another
        pass
    os._exit(0)


def _own_status(pid: int, wait: bool) -> int | None:
    """Wait status of a child of ours; raises ChildProcessError if it is not ours."""
    wpid, st = os.waitpid(pid, 0 if wait else os.WNOHANG)
    return st if wpid else None


class Spawner:
    """Forks job processes for the worker, so that the worker itself never forks.

    fork() write-protects every page of the process that calls it; the caller then
    takes a page fault on each page it writes, and on a VM a fault costs several
    microseconds. The supervisor writes a few hundred pages per job; the spawner's
    loop writes few. It is forked before any job, and before the supervisor imports
    what only it needs (ast, shutil), so job processes never carry those.
    """

    def __init__(self, home: str) -> None:
        """`home`: the scratch directory job processes usually get (HOME and TMPDIR)."""
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            self.sock.close()
            _spawner_main(theirs, home)
        theirs.close()
        self.last: int | None = None  # the last job process: reaped at the next spawn

    def _ask(self, msg: bytes, fds: list[int] | None = None, timeout: float = 5.0) -> bytes:
        if self.sock.fileno() < 0:
            raise SpawnerGone("the spawner was given up")
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGCONT)  # a job may have stopped it
        try:
            socket.send_fds(self.sock, [msg], fds or [])
            ready = select.select([self.sock], [], [], timeout)[0]
            reply = self.sock.recv(64) if ready else b""
        except OSError:
            reply = b""
        if not reply:
            # dead, or late: a late answer would be taken for the next request's
            self.close()
            raise SpawnerGone("the spawner died or did not answer")
        return reply

    def spawn(self, fds: dict[str, int], jobdir: str, scratch: str) -> int:
        fields = [b"spawn", jobdir.encode(), scratch.encode(), ",".join(fds).encode()]
        fields.append(b"%d" % self.last if self.last else b"")
        self.last = int(self._ask(b"\0".join(fields), list(fds.values())))
        return self.last

    def status(self, pid: int, wait: bool) -> int | None:
        """A job process's wait status; None while it runs (wait=False) or if it was lost.

        If the spawner died, the job process was reparented to the worker (the
        subreaper) and is waited for here.
        """
        try:
            return _own_status(pid, wait)
        except ChildProcessError:
            pass
        try:
            reply = self._ask(b"%s\0%d" % (b"wait" if wait else b"poll", pid), timeout=2.0)
        except SpawnerGone:
            try:
                return _own_status(pid, wait)
            except ChildProcessError:
                return None
        return int(reply) if reply.isdigit() else None

    def alive(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
