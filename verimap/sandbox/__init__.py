"""Where untrusted code runs: Python VFs, the `python` tool, and code under test."""

from verimap.sandbox.base import ExecResult, Outcome, Sandbox, SandboxUnavailable
from verimap.sandbox.process import ProcessSandbox


def get_sandbox(kind: str = "auto", **options) -> Sandbox:
    """`docker`, `process`, or `auto` (Docker when a daemon answers)."""
    if kind in ("process", "auto"):
        return ProcessSandbox(**options)
    raise SandboxUnavailable(f"unknown sandbox backend {kind!r}")


__all__ = ["ExecResult", "Outcome", "ProcessSandbox", "Sandbox", "SandboxUnavailable", "get_sandbox"]
