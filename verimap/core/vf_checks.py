"""A plan's own VFs as checks: the one protocol every verification speaks.

The verifier holds a list of `Check`s and reduces their verdicts with AND. A framework check
(the task's examples, recomputed arithmetic), a catalog check a plan names with arguments
(`fact_in_source`), a Python VF and a natural-language VF are all `Check`s; what tells them
apart is what they cost, their `tier`:

- 0: cheap and local (Python in the sandbox, the catalog's and the framework's own checks);
- 1: the judge (one exchange for a node's criteria, or one each);
- 2: checks that dispute an answer with solutions of their own (sampled, costly).

A tier runs only while the verdict is open: once a cheaper check failed, the AND is decided
(a run may still ask every judge, `full_feedback`). A check of tier 1 that is not asked leaves
a SKIPPED verdict, so a reader sees which criteria went unjudged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from verimap.base.plan import LLMVF, PythonVF
from verimap.base.verdicts import SKIPPED, VFVerdict
from verimap.base.verification import Check, CheckTools, Strength, Submission
from verimap.checks.strength import perturbations

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext
    from verimap.core.verifier import Verifier

CHEAP_TIER, JUDGE_TIER, DISPUTING_TIER = 0, 1, 2


def tier_of(check: Check) -> int:
    """A check's cost tier: its own `tier` when it has one, else 2 for a check that disputes
    (it draws solutions of its own) and 0 for any other."""
    tier = getattr(check, "tier", None)
    if isinstance(tier, int):
        return tier
    return DISPUTING_TIER if check.disputes else CHEAP_TIER


@dataclass
class PythonVFCheck:
    """A plan's Python VF, run in the verifier's sandbox. On the final node a passing VF is
    probed with nearby wrong answers: strong when it fails one of them, weak when it cannot."""

    vf: PythonVF
    verifier: Verifier
    tier: int = CHEAP_TIER
    disputes: bool = False
    strength: Strength = "weak"
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.vf.name

    def applies(self, sub: Submission) -> bool:
        return True

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict:
        inputs, outputs = dict(sub.inputs), dict(sub.outputs)
        found = await self.verifier.run_python(self.vf, inputs, outputs)
        if not (sub.final and found.passed):
            return found
        probes = await asyncio.gather(
            *(self.verifier.run_python(self.vf, inputs, o) for o in perturbations(outputs))
        )
        strong = any(p.outcome == "FAIL" for p in probes)
        return found.model_copy(update={"strength": "strong" if strong else "weak"})


@dataclass
class JudgeCheck:
    """A node's natural-language VFs, sent to the judge: in one exchange when there are several
    and the verifier batches them, else one VF. One verdict per VF."""

    vfs: list[LLMVF]
    verifier: Verifier
    tier: int = JUDGE_TIER
    disputes: bool = False
    strength: Strength = "strong"
    names: list[str] = field(init=False)
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.names = [v.name for v in self.vfs]
        self.name = ",".join(self.names)

    def applies(self, sub: Submission) -> bool:
        return bool(self.vfs)

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> list[VFVerdict]:
        inputs, outputs = dict(sub.inputs), dict(sub.outputs)
        if len(self.vfs) > 1:
            return await self.verifier.run_judge_many(sub.node, self.vfs, inputs, outputs, ctx=ctx)
        return [await self.verifier.run_judge(sub.node, self.vfs[0], inputs, outputs, ctx=ctx)]

    def skipped(self) -> list[VFVerdict]:
        """The verdicts of criteria left unjudged because the AND was already decided."""
        return [
            VFVerdict(
                name=v.name,
                type="llm",
                outcome=SKIPPED,
                weight=v.weight,
                message="not judged: a Python VF or a check already failed this attempt",
            )
            for v in self.vfs
        ]


def judge_checks(vfs: Sequence[LLMVF], verifier: Verifier) -> list[JudgeCheck]:
    """The judge's checks for `vfs`: one for all when the verifier batches and has a judge,
    else one each (without a judge each says so in its verdict)."""
    if not vfs:
        return []
    if verifier.batch_judge and len(vfs) > 1 and verifier.judge_model is not None:
        return [JudgeCheck(list(vfs), verifier)]
    return [JudgeCheck([vf], verifier) for vf in vfs]
