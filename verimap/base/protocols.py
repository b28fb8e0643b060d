"""The seams of verimap on the ground floor: the interfaces the rest is typed against.

A `Model` answers requests; a `Sandbox` runs untrusted code. Each is a Protocol, so a backend
or a test double fits by shape; a backend may still subclass one to inherit its defaults.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Protocol, runtime_checkable

from verimap.base.messages import ModelRequest, ModelResponse
from verimap.base.sandbox import ExecResult


@runtime_checkable
class Model(Protocol):
    """An async chat model. `supports_tools` False makes executors use the ReAct text protocol.

    A model may also have `provider` (who serves its API, for telemetry; the class name
    otherwise) and `base_url` (whose host and port telemetry reports)."""

    # Read-only members: a wrapper (`WrappedModel`) passes the inner model's through.
    @property
    def name(self) -> str: ...

    @property
    def supports_tools(self) -> bool: ...

    async def request(self, req: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class Sandbox(Protocol):
    """Where untrusted code runs: a plan's Python VFs, model-written programs and tests.
    A backend (Docker, process) subclasses it and keeps `aclose` and the context manager."""

    kind: str = "abstract"

    @abstractmethod
    async def run_vf(
        self, code: str, inputs: dict[str, Any], outputs: dict[str, Any], *, timeout: float = 10.0
    ) -> ExecResult:
        """Run one Python VF (policy-checked) with `inputs`/`outputs` in scope."""

    @abstractmethod
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

    @abstractmethod
    async def run_tests(
        self, candidate_code: str, test_code: str, entry_point: str, *, timeout: float = 10.0
    ) -> ExecResult:
        """Run tests against candidate code in separate processes (unforgeable verdict)."""

    async def aclose(self) -> None:
        """Release containers or processes (by default there is nothing to release)."""
        return None

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
