"""Where untrusted code runs: Python VFs, the `python` tool, and code under test.

`get_sandbox()` returns a shared, lazily started sandbox per process and option
set, so calling it for every run is cheap; the pools are closed at exit.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from verimap.base.protocols import Sandbox
from verimap.base.sandbox import ExecResult, Outcome, SandboxUnavailable

log = logging.getLogger(__name__)

_SHARED: dict[tuple, Sandbox] = {}
_LOCK = threading.Lock()

KINDS = ("auto", "docker", "process")


def _make(kind: str, options: dict[str, Any]) -> Sandbox:
    if kind == "docker":
        from verimap.sandbox.docker import DockerSandbox

        return DockerSandbox(**options)
    if kind == "process":
        from verimap.sandbox.process import ProcessSandbox

        return ProcessSandbox(**options)
    if kind == "auto":
        from verimap.sandbox.daemon import check_daemon

        try:
            check_daemon()
        except SandboxUnavailable as e:
            log.warning("no Docker daemon (%s); falling back to the process sandbox", e)
            return _make("process", options)
        return _make("docker", options)
    raise SandboxUnavailable(f"unknown sandbox backend {kind!r}; choose one of {', '.join(KINDS)}")


def get_sandbox(kind: str = "auto", *, shared: bool = True, **options: Any) -> Sandbox:
    """`docker`, `process`, or `auto` (Docker when a daemon answers, else process).

    Raises SandboxUnavailable with a specific reason (daemon down, image missing
    and the command that builds it) instead of hanging. With `shared=True` the
    same warm pool is returned for the same kind and options.
    """
    if not shared:
        return _make(kind, options)
    key = (kind, tuple(sorted(options.items())))
    with _LOCK:
        sandbox = _SHARED.get(key)
        if sandbox is None:
            sandbox = _SHARED[key] = _make(kind, options)
        return sandbox


def __getattr__(name: str) -> Any:
    if name == "ProcessSandbox":
        from verimap.sandbox.process import ProcessSandbox

        return ProcessSandbox
    if name == "DockerSandbox":
        from verimap.sandbox.docker import DockerSandbox

        return DockerSandbox
    raise AttributeError(name)


__all__ = [
    "KINDS",
    "DockerSandbox",
    "ExecResult",
    "Outcome",
    "ProcessSandbox",
    "Sandbox",
    "SandboxUnavailable",
    "get_sandbox",
]
