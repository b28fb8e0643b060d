"""What a check is: a judgement on one attempt at a node, beside the plan's own VFs.

The plan's VFs are what the planner wrote for a node; a check is verification the framework
brings (run the task's examples, recompute written arithmetic, compare with independently
written solutions). Both end as `VFVerdict`s in one report, under one rule: the node passes
only if every verdict passes. A check's `strength` says what its PASS proves about the answer:
`strong` checks can tell a right answer from a nearby wrong one, `weak` ones (a finite number,
sound arithmetic in the reasoning) cannot, and an answer confirmed by weak checks alone is
returned unverified. A check whose FAIL `disputes` rather than refutes (another solution says
otherwise) leaves the node `unconfirmed` when retries run out, and may `choose` the answer
kept then: `Disputing` puts the loop's questions to those checks, never to one by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from verimap.base.messages import GenerationSettings, Message
from verimap.base.plan import Node
from verimap.base.protocols import Model, Sandbox
from verimap.base.verdicts import VerificationReport, VFVerdict

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

Strength = Literal["weak", "strong"]


@dataclass(frozen=True)
class Submission:
    """One attempt's answer as a check sees it: the run's task, the node, what it was given,
    what it answered and how it got there (its transcript, tool calls included)."""

    task: str
    node: Node
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]
    transcript: Sequence[Message] = ()
    final: bool = True


@runtime_checkable
class SourceIndex(Protocol):
    """A tool that knows the corpus's sources (the search tool)."""

    def holds_source(self, name: str) -> bool | None:
        """Whether any article of the corpus is from a source called `name` (None: it cannot
        tell, e.g. a tool that only describes itself)."""
        ...


@dataclass(frozen=True)
class CheckTools:
    """What checks may use: the verifier's sandbox and judge model, sampled as the run says, and
    what the run's tools know of the corpus (`sources`: whether it holds a source at all).
    `retry_temperature` is what an independent solution after the first is sampled at."""

    sandbox: Sandbox | None = None
    model: Model | None = None
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    retry_temperature: float | None = None
    timeout_s: float = 10.0
    sources: SourceIndex | None = None


@runtime_checkable
class Check(Protocol):
    """One verification of an attempt, whatever its origin: a framework check, a catalog check a
    plan names with arguments, or a plan's own Python or natural-language VF
    (`verimap.core.vf_checks`). The verifier ANDs their verdicts. A check may also say what it
    costs with an integer `tier` (0 cheap, 1 the judge, 2 solutions of its own); without one, a
    check that `disputes` is tier 2 and any other tier 0."""

    name: str
    strength: Strength
    disputes: bool

    def applies(self, sub: Submission) -> bool:
        """Whether the check has anything to say about this node and answer."""
        ...

    async def check(
        self, sub: Submission, tools: CheckTools, ctx: RunContext
    ) -> VFVerdict | Sequence[VFVerdict] | None:
        """The verdict, or None when the attempt gives the check nothing to look at (no
        calculation written out). ABSTAINED: it should have judged and could not (no
        independent solution ran), which withholds confirmation. A check that judges several
        criteria in one exchange (the judge on a node's natural-language VFs) gives one verdict
        for each."""
        ...


@runtime_checkable
class Chooser(Protocol):
    """A disputing check that knows which answer to keep when no attempt was confirmed."""

    def choose(
        self, node: Node, candidates: list[dict[str, Any]], ctx: RunContext
    ) -> dict[str, Any] | None: ...


@runtime_checkable
class Tallier(Protocol):
    """A disputing check that can show the votes behind an answer it kept unconfirmed: how
    strong the majority of an unverified answer was is what its reader needs to weigh it."""

    def tally(self, ctx: RunContext) -> str | None:
        """The votes cast, most first (None: none were)."""
        ...


@runtime_checkable
class Settler(Protocol):
    """A disputing check that can tell when retrying is futile: no further attempt at the node
    could be confirmed, whatever it answers."""

    def settled(self, node: Node, ctx: RunContext) -> str | None:
        """Why no further attempt could be confirmed; None while one could."""
        ...


def verdict(check: Check, outcome: str, message: str = "", **extra: Any) -> VFVerdict:
    """A check's verdict, carrying the check's strength so the run can tell whether a PASS
    confirms the answer."""
    return VFVerdict(
        name=check.name,
        type="check",
        outcome=outcome,
        message=message,
        strength=check.strength,
        **extra,
    )


_T = TypeVar("_T")


class Disputing:
    """The disputing checks among a verifier's checks. Once they dispute an answer every other
    verdict passed, the answer stands, unconfirmed, and the node loop asks them, and only them,
    which answer to keep, whether a retry could still be confirmed, and what the votes were.
    Each check answers from what the run's context remembers of its ballot, so without a
    context none can."""

    def __init__(self, checks: Sequence[Check]) -> None:
        self.checks = [c for c in checks if c.disputes]

    def of(self, report: VerificationReport) -> list[str] | None:
        """The checks that disputed an answer every other verdict passed (None if something
        else failed it, or nothing did)."""
        names = [v.name for v in report.failures]
        disputing = {c.name for c in self.checks}
        if names and all(v.type == "check" and v.name in disputing for v in report.failures):
            return names
        return None

    def _ask(
        self, protocol: type, ask: Callable[[Any], _T | None], ctx: RunContext | None
    ) -> _T | None:
        if ctx is None:
            return None
        found = (ask(c) for c in self.checks if isinstance(c, protocol))
        return next((x for x in found if x is not None), None)

    def choose(
        self, node: Node, candidates: list[dict[str, Any]], ctx: RunContext | None
    ) -> dict[str, Any] | None:
        """The answer a check keeps when no attempt was confirmed, if one knows."""
        return self._ask(Chooser, lambda c: c.choose(node, candidates, ctx), ctx)

    def tally(self, ctx: RunContext | None) -> str | None:
        """The votes behind a kept unconfirmed answer, if a check cast any."""
        return self._ask(Tallier, lambda c: c.tally(ctx), ctx)

    def settled(self, node: Node, ctx: RunContext | None) -> str | None:
        """Why retrying the node is futile, if a check can tell."""
        return self._ask(Settler, lambda c: c.settled(node, ctx), ctx)
