"""The job layer both backends share: policy check, encoding, limits, result mapping."""

from __future__ import annotations

import math
import posixpath
import re
import time
from typing import Any

from verimap.base.protocols import Sandbox
from verimap.base.sandbox import ExecResult, Outcome
from verimap.sandbox.policy import PolicyViolation, vf_job_code
from verimap.sandbox.pool import WorkerPool
from verimap.sandbox.worker import wire

OUTPUT_LIMIT = 64 * 1024
MAX_PAYLOAD = 16 * 1024 * 1024  # characters per job, well under the wire's frame limit


def _check_files(files: dict[str, str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for rel, text in (files or {}).items():
        if not isinstance(rel, str) or not isinstance(text, str):
            raise TypeError("files must map relative path (str) -> text (str)")
        norm = posixpath.normpath(rel)
        if not rel or rel.startswith("/") or norm.startswith("..") or norm == ".":
            raise ValueError(f"file path must be relative and inside the scratch dir: {rel!r}")
        out[norm] = text
    return out


_FUTURE = re.compile(r"^from[ \t]+__future__[ \t]+import[^\n]*\n?", re.M)
# Rebinds every builtin name in the tests' namespace after the worker has put the candidate's
# functions there, so a candidate cannot stand in for `set`, `abs` or `round` in an assertion.
_OWN_BUILTINS = "from builtins import *\n"


def trusted_tests(test_code: str) -> str:
    """`test_code` as the worker runs it: Python's own builtins bound after any `__future__`
    import, so the only candidate names it calls are those no builtin has (and the entry point,
    which the worker binds after the tests load)."""
    futures = list(_FUTURE.finditer(test_code))
    cut = futures[-1].end() if futures else 0
    head = test_code[:cut] + ("\n" if cut and not test_code[:cut].endswith("\n") else "")
    return head + _OWN_BUILTINS + test_code[cut:]


def vf_job(
    code: str, inputs: dict[str, Any], outputs: dict[str, Any], *, policy: bool, magic: str | None
) -> dict[str, Any] | ExecResult:
    """The job a worker runs for one VF, or the verdict when it cannot be a job (the policy
    rejects it, or its data cannot cross the boundary)."""
    try:
        data = {"inputs": wire.encode(dict(inputs)), "outputs": wire.encode(dict(outputs))}
    except (wire.CodecError, TypeError, ValueError) as e:
        return ExecResult(
            outcome=Outcome.ERROR,
            message=f"VF inputs/outputs must be plain data (JSON types, tuple, set, bytes, complex): {e}",
        )
    job: dict[str, Any] = {"kind": "vf", "source": code, **data}
    if policy:
        try:
            job.update(vf_job_code(code, magic))
        except PolicyViolation as e:
            return ExecResult(outcome=Outcome.POLICY, message=e.message)
    else:
        job["restricted"] = False
    return job


class PooledSandbox(Sandbox):
    """Runs jobs on a WorkerPool; subclasses say how a worker is launched."""

    def __init__(
        self,
        pool: WorkerPool,
        *,
        memory_mb: int = 1024,
        output_limit: int = OUTPUT_LIMIT,
        fsize_mb: int = 64,
        nofile: int = 256,
        policy: bool = True,
    ):
        self.pool = pool
        self.memory_mb = memory_mb
        self.output_limit = output_limit
        self.fsize_mb = fsize_mb
        self.nofile = nofile
        self.policy = policy

    def _limits(self, timeout: float) -> dict[str, int]:
        return {
            "memory_bytes": self.memory_mb * 1024 * 1024,
            "cpu_s": math.ceil(timeout) + 1,
            "fsize_bytes": self.fsize_mb * 1024 * 1024,
            "nofile": self.nofile,
        }

    async def _submit(self, job: dict[str, Any], timeout: float) -> ExecResult:
        if not (isinstance(timeout, int | float) and 0 < timeout <= 3600):
            raise ValueError(f"timeout must be a number of seconds in (0, 3600], got {timeout!r}")
        job = {
            **job,
            "limits": self._limits(timeout),
            "output_limit": self.output_limit,
        }
        start = time.monotonic()
        res = await self.pool.run(job, float(timeout))
        try:
            outcome = Outcome(res.get("outcome", "SANDBOX_ERROR"))
        except ValueError:
            outcome = Outcome.SANDBOX_ERROR
        return ExecResult(
            outcome=outcome,
            message=str(res.get("message", "")),
            traceback=str(res.get("traceback", "")),
            stdout=str(res.get("stdout", "")),
            stderr=str(res.get("stderr", "")),
            truncated=bool(res.get("truncated", False)),
            duration_s=time.monotonic() - start,
        )

    async def run_vf(
        self, code: str, inputs: dict[str, Any], outputs: dict[str, Any], *, timeout: float = 10.0
    ) -> ExecResult:
        job = vf_job(code, inputs, outputs, policy=self.policy, magic=self.pool.worker_magic)
        if isinstance(job, ExecResult):
            return job
        return await self._submit(job, timeout)

    async def run_program(
        self,
        code: str,
        *,
        timeout: float = 10.0,
        files: dict[str, str] | None = None,
        argv: list[str] | None = None,
        stdin: str = "",
    ) -> ExecResult:
        if not isinstance(code, str):
            raise TypeError("code must be a str")
        checked = _check_files(files)
        size = len(code) + len(stdin or "") + sum(len(k) + len(v) for k, v in checked.items())
        if size > MAX_PAYLOAD:
            raise ValueError(
                f"program, files and stdin total {size} characters; the limit is {MAX_PAYLOAD}"
            )
        job = {
            "kind": "program",
            "code": code,
            "files": checked,
            "argv": [str(a) for a in (argv or [])],
            "stdin": stdin or "",
        }
        return await self._submit(job, timeout)

    async def run_tests(
        self, candidate_code: str, test_code: str, entry_point: str, *, timeout: float = 10.0
    ) -> ExecResult:
        if not entry_point.isidentifier():
            raise ValueError(f"entry_point must be a Python identifier, got {entry_point!r}")
        job = {
            "kind": "tests",
            "candidate_code": candidate_code,
            "test_code": trusted_tests(test_code),
            "entry_point": entry_point,
        }
        return await self._submit(job, timeout)

    def warm(self) -> None:
        self.pool.warm()

    async def aclose(self) -> None:
        self.pool.close()
