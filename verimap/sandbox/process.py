"""Process backend: a fresh Python subprocess per job, with rlimits and a temp dir.

It isolates far less than the Docker backend; it exists for machines without a
Docker daemon. (Interim version: the sandbox issue hardens it.)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
import warnings
from typing import Any

from verimap.sandbox.base import ExecResult, Outcome, Sandbox

_RUNNER = r'''
import json, os, sys, traceback, resource
job = json.loads(sys.stdin.read())
res_fd = int(os.environ.pop("VERIMAP_RESULT_FD"))
out = os.fdopen(res_fd, "w")
def report(rec):
    out.write(json.dumps(rec)); out.flush()
mem = job.get("memory_bytes")
if mem:
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
ns = {"__name__": "__verimap_vf__"}
if job["kind"] == "vf":
    ns["inputs"] = job["inputs"]; ns["outputs"] = job["outputs"]
try:
    exec(compile(job["code"], "<vf>" if job["kind"] == "vf" else "<program>", "exec"), ns)
    if job["kind"] == "vf" and callable(ns.get("verify")):
        if ns["verify"](job["inputs"], job["outputs"]) is False:
            raise AssertionError("verify() returned False")
    report({"outcome": "PASS"})
except AssertionError as e:
    report({"outcome": "FAIL", "message": str(e) or "assertion failed", "traceback": traceback.format_exc()})
except MemoryError as e:
    report({"outcome": "OOM", "message": "memory limit exceeded", "traceback": traceback.format_exc()})
except BaseException as e:
    report({"outcome": "ERROR", "message": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
'''

OUTPUT_LIMIT = 64 * 1024


class ProcessSandbox(Sandbox):
    kind = "process"

    def __init__(self, *, memory_mb: int = 1024, warn: bool = True):
        self.memory_bytes = memory_mb * 1024 * 1024
        if warn:
            warnings.warn(
                "process sandbox backend: code runs as a host subprocess and is isolated far "
                "less than in the Docker backend",
                RuntimeWarning,
                stacklevel=2,
            )

    async def _run(self, job: dict[str, Any], timeout: float, files: dict[str, str] | None = None) -> ExecResult:
        job = {**job, "memory_bytes": self.memory_bytes}
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="verimap-job-") as scratch:
            for name, text in (files or {}).items():
                path = os.path.join(scratch, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            r, w = os.pipe()
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "VERIMAP_RESULT_FD": str(w)}
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-c", _RUNNER,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=scratch, env=env, pass_fds=(w,),
                start_new_session=True,
            )
            os.close(w)
            try:
                stdout, stderr = await asyncio.wait_for(proc.communicate(json.dumps(job).encode()), timeout)
            except TimeoutError:
                proc.kill()
                await proc.wait()
                os.close(r)
                return ExecResult(outcome=Outcome.TIMEOUT, message=f"timed out after {timeout}s",
                                  duration_s=time.monotonic() - start)
            with os.fdopen(r) as rf:
                raw = rf.read()
        dur = time.monotonic() - start
        so = stdout.decode("utf-8", "replace")
        se = stderr.decode("utf-8", "replace")
        try:
            rec = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            rec = None
        if rec is None:
            return ExecResult(outcome=Outcome.ERROR, message=f"process exited ({proc.returncode}) without a result",
                              stdout=so[:OUTPUT_LIMIT], stderr=se[:OUTPUT_LIMIT], duration_s=dur)
        return ExecResult(outcome=Outcome(rec["outcome"]), message=rec.get("message", ""),
                          traceback=rec.get("traceback", ""), stdout=so[:OUTPUT_LIMIT],
                          stderr=se[:OUTPUT_LIMIT], duration_s=dur)

    async def run_vf(self, code, inputs, outputs, *, timeout=10.0):
        return await self._run({"kind": "vf", "code": code, "inputs": inputs, "outputs": outputs}, timeout)

    async def run_program(self, code, *, timeout=10.0, files=None, argv=None, stdin=""):
        return await self._run({"kind": "program", "code": code}, timeout, files)

    async def run_tests(self, candidate_code, test_code, entry_point, *, timeout=10.0):
        code = f"{candidate_code}\n\n{test_code}\n\ncheck({entry_point})\n"
        return await self._run({"kind": "program", "code": code}, timeout)
