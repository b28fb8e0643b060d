"""Code under test in its own exec'd interpreter, behind a proxy only plain data crosses.

`load_function` (in every VF's scope) and tests jobs use it, so the code under
test cannot hand the trusted side an object whose comparisons lie, nor patch its
AssertionError. `CANDIDATE_PYTHON` (set by `serve.main`) and `CANDIDATE_ROOT`
(set by the host's in-process double) say which interpreter runs it and where.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sys

from . import unix, wire

WIRE_PATH = wire.__file__  # the candidate's interpreter runs it as a script
CANDIDATE_PYTHON: str | None = None  # interpreter for code under test (default: this one)
CANDIDATE_ROOT: str | None = None  # where candidates get their directories (default: the cwd)
MAX_CANDIDATES = 8  # load_function() calls per job


class CandidateError(Exception):
    """The code under test raised an exception (re-raised on the trusted side by name)."""


class CandidateCrashed(BaseException):
    """The code under test's process died or broke the protocol: never swallowed by tests."""


_candidates: list[CandidateProcess] = []  # started in this process, stopped by close_candidates
_REraisable = {
    name: getattr(builtins, name)
    for name in [
        "ValueError",
        "TypeError",
        "IndexError",
        "KeyError",
        "ZeroDivisionError",
        "ArithmeticError",
        "OverflowError",
        "AttributeError",
        "LookupError",
        "RuntimeError",
        "RecursionError",
        "NotImplementedError",
        "StopIteration",
        "UnicodeError",
        "NameError",
    ]
}


def spawn_candidate(workdir: str, stdout=None, stderr=None):
    """A fresh interpreter serving calls into model-written code: (process, write fd, read fd)."""
    import subprocess  # only tests jobs need it; see unix.fresh_dir

    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    uid = unix.DROP_UID if os.geteuid() == 0 else None
    proc = subprocess.Popen(
        [CANDIDATE_PYTHON or sys.executable, "-I", WIRE_PATH, str(to_child_r), str(from_child_w)],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        pass_fds=(to_child_r, from_child_w),
        close_fds=True,
        cwd=workdir,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "OPENBLAS_NUM_THREADS": "1",
            "HOME": workdir,
            "TMPDIR": workdir,
        },
        user=uid,
        group=uid,
        extra_groups=None if uid is None else [],
    )
    os.close(to_child_r)
    os.close(from_child_w)
    return proc, to_child_w, from_child_r


class CandidateProcess:
    """Model-written code in its own exec'd interpreter; only codec data crosses."""

    def __init__(self, code: str, spare: tuple | None = None):
        self.workdir = None
        if spare is not None:  # started before the job arrived, off its critical path
            self._proc, self._w, self._r = spare
        else:
            self.workdir = unix.fresh_dir(CANDIDATE_ROOT or os.getcwd(), "cand-")
            self._proc, self._w, self._r = spawn_candidate(self.workdir)
        _candidates.append(self)  # counted, and stopped by close_candidates(), even if it fails
        reply = self._ask({"op": "load", "code": code})
        if not reply.get("ok"):
            what = f"{reply.get('type', 'Exception')}: {reply.get('error', '?')}"
            raise CandidateError(f"candidate code failed to load: {what}")
        self.names = [n for n in reply.get("names", []) if isinstance(n, str)]

    def close(self) -> None:
        """Stop the interpreter and remove its directory (a job process just exits instead)."""
        for fd in (self._w, self._r):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()
            self._proc.wait()
        if self.workdir is not None:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)

    def _ask(self, msg):
        try:
            wire.write_frame(self._w, msg)
            reply = wire.read_frame(self._r)
        except (OSError, ValueError) as e:
            raise CandidateCrashed(f"code under test broke the proxy protocol: {e}") from None
        if not isinstance(reply, dict):
            code = self._proc.poll() if self._proc is not None else "?"
            raise CandidateCrashed(f"code under test exited during a call (status {code})")
        return reply

    def call(self, name, args, kwargs):
        try:
            payload = {
                "op": "call",
                "name": name,
                "args": wire.encode(list(args)),
                "kwargs": wire.encode(dict(kwargs)),
            }
        except wire.CodecError as e:
            raise CandidateError(f"argument cannot be sent to the code under test: {e}") from None
        reply = self._ask(payload)
        if reply.get("ok") is True:
            try:
                return wire.decode(reply.get("value"))
            except (wire.CodecError, KeyError, TypeError, ValueError) as e:
                raise CandidateCrashed(f"code under test returned malformed data: {e}") from None
        etype = str(reply.get("type", "Exception"))
        message = str(reply.get("error", ""))
        exc = _REraisable.get(etype)
        if exc is not None:
            raise exc(message)
        raise CandidateError(f"{etype}: {message}")


class CandidateFunction:
    """A callable standing in for a function of the code under test."""

    def __init__(self, proc: CandidateProcess, name: str):
        self._proc = proc
        self._name = name

    def __call__(self, *args, **kwargs):
        return self._proc.call(self._name, args, kwargs)

    def __repr__(self):
        return f"<function {self._name} (sandboxed)>"


def process_of(fn: CandidateFunction) -> CandidateProcess:
    """The interpreter behind a proxy (a private attribute: VFs cannot reach it)."""
    return fn._proc


def close_candidates() -> None:
    """Stop every candidate this process started, so a host that runs VFs in-process
    (the test double) starts each VF with a fresh budget and leaves nothing running."""
    while _candidates:
        _candidates.pop().close()


def _unfence(code: str) -> str:
    """Models often wrap the code they return in a markdown fence; the fence is not Python."""
    lines = code.strip().splitlines()
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1]) + "\n"
    return code


def load_function(code: str, name: str) -> CandidateFunction:
    """Load `name` from model-written `code` in a separate process and return a proxy to it.

    Only plain data crosses the boundary, so the code under test cannot hand the
    caller an object whose comparisons lie, nor patch the caller's AssertionError.
    """
    if type(code) is not str or type(name) is not str:
        raise TypeError(
            "load_function(code, name) takes the source code as a str and the function name as a "
            f"str; got code of type {type(code).__name__} and name of type {type(name).__name__}"
        )
    if len(_candidates) >= MAX_CANDIDATES:
        raise RuntimeError(f"at most {MAX_CANDIDATES} load_function() calls per job")
    proc = CandidateProcess(_unfence(code))
    if name not in proc.names:
        raise CandidateError(f"the code under test defines no function named {name!r}")
    return CandidateFunction(proc, name)
