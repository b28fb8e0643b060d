"""What a replan is told about the failure that caused it: the failed node, what it saw and
produced, every verdict, and its ancestors. The coordinator builds it from a node's report
(`verimap.core.node_context`); a planner's `replan` takes it and renders it into its prompt.
What a retried node is told is `verimap.base.execution.Feedback`."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from verimap.base.verdicts import VFVerdict, clip


class AncestorContext(BaseModel):
    node_id: str
    instruction: str
    outputs: dict[str, Any] | None = None
    status: str = ""


class FailureContext(BaseModel):
    """Why the previous plan failed: the failed node, what it saw and produced, every VF verdict,
    and its ancestors (two generations by default) with their outputs."""

    node_id: str
    instruction: str = ""
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] | None = None
    error: str | None = None
    verdicts: list[VFVerdict] = Field(default_factory=list)
    attempts: int = 0
    ancestors: list[AncestorContext] = Field(default_factory=list)
    # The node's VFs that are catalog checks the plan named (`fact_in_source`, ...): their
    # verdicts are the plan's verification, not a built-in check of the executor's work.
    plan_checks: list[str] = Field(default_factory=list)

    @property
    def kind(self) -> str:
        """What failed: "verification" (a VF said no, a catalog check the plan named among
        them), "vf_error" (a VF could not run: its own bug), or "executor" (no answer of the
        declared shape reached verification, or only a built-in check of the executor's work,
        such as its arithmetic, failed)."""
        vfs = [v for v in self.verdicts if v.type != "check" or v.name in self.plan_checks]
        if any(v.outcome == "FAIL" for v in vfs):
            return "verification"
        if any(not v.passed for v in vfs):
            return "vf_error"
        return "executor"

    def render(self, limit: int = 4000) -> str:
        """Only what failed (passing VFs are counted, not shown), each part cut to fit."""
        d = lambda v, n=600: clip(json.dumps(v, ensure_ascii=False, default=str), n)  # noqa: E731
        lines = [
            f"Node {self.node_id!r} failed after {self.attempts} attempt(s).",
            f"Instruction: {self.instruction}",
            f"Inputs: {d(self.inputs, 1200)}",
            f"Last outputs: {d(self.outputs, 1200)}",
        ]
        if self.error:
            lines.append(f"Error: {clip(self.error, 600)}")
        failed = [v for v in self.verdicts if not v.passed]
        if failed:
            passed = len(self.verdicts) - len(failed)
            lines.append(
                "Verification functions that failed on the last attempt"
                + (f" ({passed} other(s) passed):" if passed else ":")
            )
            per = max(300, limit // (2 * len(failed)))
            lines.extend("  " + clip(v.feedback(), per).replace("\n", "\n  ") for v in failed)
        if self.ancestors:
            lines.append("Ancestor nodes (nearest first):")
            for a in self.ancestors:
                lines.append(f"  - {a.node_id} [{a.status}]: {a.instruction} -> {d(a.outputs)}")
        return clip("\n".join(lines), limit)
