"""How a finished job becomes its answer: the supervisor's observations, then the record.

`status` is the job process's wait status, or None when the supervisor answered on
the record alone (it came and its pipe closed) or the status was lost.
"""

from __future__ import annotations

import json
import os
import signal

TRUNCATION_MARK = "\n[... output truncated by the verimap sandbox ...]\n"


def classify(
    kind: str,
    status: int | None,
    bufs: dict[str, bytearray],
    caps: dict[str, int],
    overflow: bool,
    timed_out: bool,
    timeout: float,
) -> dict:
    """The answer to the host. What the supervisor saw itself (timeout, output overflow,
    signals, exit status) decides first; the job's record fills in the rest, and its PASS
    also needs exit status 0."""

    def text(name):
        raw = bytes(bufs[name][: caps[name]])
        s = raw.decode("utf-8", "replace")
        return s + TRUNCATION_MARK if len(bufs[name]) > caps[name] else s

    rec: dict = {"stdout": text("stdout"), "stderr": text("stderr"), "truncated": overflow}
    parsed = None
    raw = bytes(bufs["result"])
    if raw:
        try:
            parsed = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            parsed = None
    if not isinstance(parsed, dict):
        parsed = None
    if status is None:  # answered on the record alone, or the exit status was lost
        sig = None
        code = (parsed or {}).get("exit_status") if kind == "program" else 0
    else:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    if timed_out:
        rec.update(outcome="TIMEOUT", message=f"timed out after {timeout:g}s (wall clock)")
    elif overflow:
        rec.update(outcome="OUTPUT_LIMIT", message="output exceeded the sandbox limit; job stopped")
    elif sig == signal.SIGXCPU:
        rec.update(outcome="TIMEOUT", message="CPU time limit exceeded")
    elif sig == signal.SIGKILL or code == 137:
        rec.update(outcome="OOM", message="killed (SIGKILL/exit 137): memory limit exceeded")
    elif sig is not None:
        rec.update(outcome="ERROR", message=f"killed by signal {signal.Signals(sig).name}")
    elif kind == "program" and code == 0:
        rec.update(outcome="PASS", message="exit status 0")
    elif kind == "program":
        outcome = str((parsed or {}).get("outcome", "ERROR"))
        rec.update(
            outcome=outcome if outcome in {"FAIL", "ERROR", "OOM"} else "ERROR",
            message=str((parsed or {}).get("message") or f"exit status {code}")[:8000],
            traceback=str((parsed or {}).get("traceback", ""))[:32000],
        )
    elif parsed is None:
        how = f"with status {code}" if status is not None else "(exit status lost)"
        rec.update(outcome="ERROR", message=f"exited {how} before reporting a verdict")
    else:
        outcome = str(parsed.get("outcome", "ERROR"))
        if outcome not in {"PASS", "FAIL", "ERROR", "OOM", "POLICY", "SANDBOX_ERROR"}:
            outcome = "ERROR"
        if outcome == "PASS" and code != 0:
            outcome, parsed["message"] = "ERROR", f"exited with status {code}"
        rec.update(
            outcome=outcome,
            message=str(parsed.get("message", ""))[:8000],
            traceback=str(parsed.get("traceback", ""))[:32000],
        )
    return rec
