"""The sandbox interface every backend (Docker, process) implements.

Verdicts are named outcomes, never booleans, so a timeout or a broken sandbox
can never be mistaken for a failed (or passed) check.
"""

from __future__ import annotations

import abc
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


class Sandbox(abc.ABC):
    kind: str = "abstract"

    @abc.abstractmethod
    async def run_vf(
        self, code: str, inputs: dict[str, Any], outputs: dict[str, Any], *, timeout: float = 10.0
    ) -> ExecResult:
        """Run one Python VF (policy-checked) with `inputs`/`outputs` in scope."""

    @abc.abstractmethod
    async def run_program(
        self,
        code: str,
        *,
        timeout: float = 10.0,
        files: dict[str, str] | None = None,
        argv: list[str] | None = None,
        stdin: str = "",
    ) -> ExecResult:
        """Run an unrestricted program (model-written code); PASS means exit status 0."""

    @abc.abstractmethod
    async def run_tests(
        self, candidate_code: str, test_code: str, entry_point: str, *, timeout: float = 10.0
    ) -> ExecResult:
        """Run tests against candidate code in separate processes (unforgeable verdict)."""

    async def aclose(self) -> None:  # noqa: B027
        """Release containers or processes."""

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
