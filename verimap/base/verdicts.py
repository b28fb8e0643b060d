"""What a verification function says: its verdict, a node's verification report, and the
markers of outcomes that neither pass nor fail.

Below the plan, the checks and the loop alike: a check returns a verdict, the verifier collects
them, a retry and a replan are told them, and a run's report keeps them; so none of those
packages owns them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

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
