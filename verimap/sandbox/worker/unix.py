"""Process-level facilities of the worker: private directories, prctl, closing fds.

`DROP_UID` is set once, by `serve.main`, before anything forks: when the process
backend was started as root, jobs and candidates run as that uid.
"""

from __future__ import annotations

import contextlib
import os
import signal

DROP_UID: int | None = None

# Signals that stop a process by default and can be caught: the worker ignores them; the spawner
# restores the defaults, which every job process inherits.
CATCHABLE_STOPS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGALRM,
    signal.SIGQUIT,
)


def fresh_dir(parent: str, prefix: str) -> str:
    """A new private directory, like tempfile.mkdtemp.

    The worker avoids importing tempfile (and subprocess): they bring in `random`
    and `threading`, whose at-fork hooks then run in every job's child and add
    measurable page-copy work to each job.
    """
    while True:
        path = os.path.join(parent, prefix + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def libc():
    """The C library through ctypes (imported only when called), or None."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except Exception:
        return None


_LIBC = None


def prctl(option: int, arg: int) -> None:
    global _LIBC
    if _LIBC is None:
        _LIBC = libc()
    if _LIBC is not None:
        with contextlib.suppress(Exception):
            _LIBC.prctl(option, arg, 0, 0, 0)


def set_dumpable(flag: int) -> None:
    """PR_SET_DUMPABLE=0 hides /proc/<pid>/mem, fd and environ from same-uid processes."""
    prctl(4, flag)


def set_subreaper() -> None:
    """PR_SET_CHILD_SUBREAPER: orphans of a job come to us and get reaped."""
    prctl(36, 1)


def close_all_but(keep: set[int]) -> None:
    """Close every other fd, a range at a time (no /proc listing: fewer page copies)."""
    low = 0
    for fd in sorted(keep):
        if fd > low:  # never an empty range: closerange(0, 0) closes every fd
            os.closerange(low, fd)
        low = fd + 1
    top = os.sysconf("SC_OPEN_MAX")
    os.closerange(low, top if top > low else 1 << 20)
