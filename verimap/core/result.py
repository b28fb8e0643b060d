"""What a run returns: the answer, the status, and enough detail to see why."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from verimap.base.plan import Plan
from verimap.base.usage import UsageByRole
from verimap.base.verdicts import VFVerdict

# unconfirmed: every VF passed, but the answers of its attempts did not agree (RunConfig.verify.agreement).
NodeStatus = Literal[
    "pending", "verified", "failed", "fail-accepted", "reused", "skipped", "unconfirmed"
]
RunStatus = Literal["success", "failed", "partial", "budget_exhausted"]
# Why a run ended without an answer of its own: "infrastructure" is a model endpoint that failed
# past its retries or a sandbox that could not run, which says nothing about the method.
ErrorKind = Literal["infrastructure"]


class AttemptReport(BaseModel):
    iteration: int
    attempt: int
    outputs: dict[str, Any] | None = None
    error: str | None = None
    verdicts: list[VFVerdict] = Field(default_factory=list)
    passed: bool = False
    steps: int = 0


class NodeReport(BaseModel):
    node_id: str
    status: NodeStatus = "pending"
    iteration: int = 0
    outputs: dict[str, Any] | None = None
    attempts: list[AttemptReport] = Field(default_factory=list)
    # Why a verified node's answer is not confirmed by a strong check, or the votes behind an
    # unconfirmed node's kept answer (None: it is confirmed, or the node did not verify).
    unconfirmed: str | None = None

    @property
    def verdicts(self) -> list[VFVerdict]:
        """Every VF verdict of every attempt, in order."""
        return [v for a in self.attempts for v in a.verdicts]


class RunResult(BaseModel):
    run_id: str
    task: str
    status: RunStatus
    final_node: str | None = None
    final_output: dict[str, Any] | None = None
    nodes: dict[str, NodeReport] = Field(default_factory=dict)
    iterations: int = 0
    retries: int = 0
    plans: list[Plan] = Field(default_factory=list)
    usage: UsageByRole = Field(default_factory=UsageByRole)
    error: str | None = None
    trace_path: str | None = None
    wall_time_s: float = 0.0
    # `final_output` of a run that did not verify is its best unverified answer (the final
    # node's most frequent one, else the deepest verified node's), so it can still be scored.
    verified: bool = False
    # Why a run that ended with an answer is not verified (only weak checks passed, a check
    # abstained, the answers were disputed, no verification at all).
    unverified_reason: str | None = None
    # The share of a vote's samples that gave the answer (self-consistency), a confidence that
    # asks for no verification; None for methods that do not vote.
    confidence: float | None = None
    # Plans that were the one-node fallback (iteration numbers), and VFs dropped from plans
    # ("iteration:node.vf (why)": vacuous, or a static problem the planner did not repair).
    fallback_iterations: list[int] = Field(default_factory=list)
    # Plans a rule made without a planner call ("1: one-node plan (small-model policy)").
    plan_rules: list[str] = Field(default_factory=list)
    dropped_vfs: list[str] = Field(default_factory=list)
    # Set when the run failed because of the machinery, not the method: an eval logs such a run
    # as an error to retry instead of scoring it, and `verimap run` exits with its own status.
    error_kind: ErrorKind | None = None

    @property
    def answer(self) -> Any:
        """The final node's single output, or the whole output dict when it has several."""
        if self.final_output is None:
            return None
        if len(self.final_output) == 1:
            return next(iter(self.final_output.values()))
        return self.final_output

    @property
    def ok(self) -> bool:
        return self.status == "success"

    def blame_infrastructure(self, faults: list[str]) -> None:
        """A run that did not verify after a model call failed for good (a judge's, which the
        verifier turns into an ERROR verdict) or a sandbox could not judge a VF may have failed
        for that reason alone, so it is no evidence about the method. A run that verified
        anyway keeps its answer."""
        if self.error_kind is not None or self.status == "success" or not faults:
            return
        self.error_kind = "infrastructure"
        first = faults[0] + (f" (and {len(faults) - 1} more)" if len(faults) > 1 else "")
        self.error = f"{first}; the run then ended: {self.error}" if self.error else first
