"""What a run returns: the answer, the status, and enough detail to see why."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from verimap.plan import Plan
from verimap.usage import UsageByRole

# unconfirmed: every VF passed, but the answers of its attempts did not agree (RunConfig.agreement).
NodeStatus = Literal[
    "pending", "verified", "failed", "fail-accepted", "reused", "skipped", "unconfirmed"
]
RunStatus = Literal["success", "failed", "partial", "budget_exhausted"]
# Why a run ended without an answer of its own: "infrastructure" is a model endpoint that failed
# past its retries or a sandbox that could not run, which says nothing about the method.
ErrorKind = Literal["infrastructure"]


# A judge VF not asked because a Python VF had already failed the attempt (strict AND).
SKIPPED = "SKIPPED"
# A check that could not judge (no independent solution ran, no inputs to compare on): it fails
# nothing, and it confirms nothing either.
ABSTAINED = "ABSTAINED"
# Outcomes that neither pass nor fail an attempt.
NOT_JUDGED = (SKIPPED, ABSTAINED)


class VFVerdict(BaseModel):
    """One verification function's result. `outcome` is a sandbox `Outcome` value for Python
    VFs and PASS/FAIL/ERROR for judge VFs."""

    name: str
    type: Literal["python", "llm", "check"]
    outcome: str
    message: str = ""
    traceback: str = ""
    explanation: str = ""
    weight: float = 1.0
    # What a PASS proves: "strong" tells a right answer from a nearby wrong one, "weak" does
    # not (a finite number, non-empty code); None: not assessed (a node that is not final).
    strength: Literal["weak", "strong"] | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == "PASS"

    @property
    def judged(self) -> bool:
        return self.outcome not in NOT_JUDGED

    def feedback(self) -> str:
        """The text an executor sees on a retry."""
        kind = "check" if self.type == "check" else f"{self.type} VF"
        head = f"[{kind} {self.name!r}: {self.outcome}] {self.message}".rstrip()
        body = self.traceback or self.explanation
        return f"{head}\n{body.rstrip()}" if body and body.strip() != self.message.strip() else head


def clip(text: str, limit: int) -> str:
    """Text cut to `limit` characters, keeping its head and its tail (a traceback's last line,
    an answer's end): feedback must fit the model's context, whatever a VF or a model printed."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40)
    head = keep // 3
    return f"{text[:head]}\n...[{len(text) - keep} characters cut]...\n{text[len(text) - (keep - head) :]}"


class VerificationReport(BaseModel):
    passed: bool
    verdicts: list[VFVerdict] = Field(default_factory=list)
    score: float = 1.0

    @property
    def failures(self) -> list[VFVerdict]:
        return [v for v in self.verdicts if not v.passed and v.judged]

    @property
    def confirmed(self) -> bool:
        """Passed, and on evidence: a strong verdict passed and no check abstained. An answer
        that only weak checks passed (a finite number, sound arithmetic) is not confirmed."""
        return self.passed and self.why_unconfirmed() is None

    def why_unconfirmed(self) -> str | None:
        abstained = [v for v in self.verdicts if v.outcome == ABSTAINED]
        if abstained:
            return "; ".join(f"{v.name} could not judge: {v.message}" for v in abstained)
        if any(v.passed and v.strength == "strong" for v in self.verdicts):
            return None
        weak = [v.name for v in self.verdicts if v.passed]
        if not weak:
            return "no check ran"
        return f"only weak checks passed ({', '.join(weak)}): they cannot tell a right answer from a wrong one"


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
    # Why a verified node's answer is not confirmed by a strong check (None: it is, or the node
    # did not verify).
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
