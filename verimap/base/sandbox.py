"""The sandbox interface every backend (Docker, process) implements.

Verdicts are named outcomes, never booleans, so a timeout or a broken sandbox
can never be mistaken for a failed (or passed) check.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from verimap.base.errors import VerimapError


class Outcome(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"  # an assertion failed (or verify() returned False)
    ERROR = "ERROR"  # any other exception, or an early exit
    TIMEOUT = "TIMEOUT"
    OOM = "OOM"
    OUTPUT_LIMIT = "OUTPUT_LIMIT"
    POLICY = "POLICY"  # rejected before running (RestrictedPython)
    SANDBOX_ERROR = "SANDBOX_ERROR"  # the sandbox itself failed; the job is not lost


class ExecResult(BaseModel):
    outcome: Outcome
    message: str = ""
    traceback: str = ""
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    truncated: bool = False
    # Plain data a job chose to return (e.g. per-test results); never trusted for the verdict.
    details: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS


class SandboxUnavailable(VerimapError, RuntimeError):
    """The backend cannot run at all (no daemon, no image): a setup problem, not a verdict."""
