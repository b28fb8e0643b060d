"""A numeric answer is confirmed only when independent solutions agree with it.

Property VFs (`answer > 0`) cannot see a wrong decomposition, and one other solution by the
same model shares its misreadings of the task. So the attempt at the final answer is put to a
ballot of solutions the check draws, and is confirmed only by a high share of their votes.

Three ballots; `--ballot` (`RunConfig.verify.ballot`) chooses:

- `STRICT_BALLOT`, the default, draws replies sampled as the `sc` baseline samples them. The
  first attempt the check votes on is confirmed when three samples agree with it and at most
  one says otherwise; no retry after a dispute is confirmed. A disputed attempt draws samples
  on, up to five, while more votes could still change the answer most of them give, and that
  answer is kept, unverified, as self-consistency keeps its majority. A sample is held to the
  bar the attempt is: one whose written arithmetic slips is drawn but does not vote.
- `MIXED_BALLOT` votes every attempt and draws programs (in different framings) and samples in
  turn: three votes confirm an answer, a program and a sample among them, holding twice any
  other answer's votes; a disputed attempt is retried only while a retry could still be
  confirmed by the votes already cast. It verifies more tasks in less time, and more wrong
  answers (design/decisions.md, D28).
- `SAMPLED_BALLOT` confirms the first attempt with two of at most three samples.

Under every ballot a disagreement fails the attempt without telling a retry the other number:
a retry shown it copies it, and agreement means something only while solutions stay
independent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from verimap.base import iotypes
from verimap.base.check_names import ANSWER_AGREEMENT, MIXED, SAMPLED, STRICT, known_ballot
from verimap.base.events import CrossCheck
from verimap.base.model import ModelError
from verimap.base.numbers import normalize_number
from verimap.base.plan import Node
from verimap.base.verdicts import ABSTAINED, VFVerdict
from verimap.base.verification import CheckTools, Strength, Submission, verdict
from verimap.checks.arithmetic import slips
from verimap.checks.programs import ProgramRun, write_program
from verimap.checks.samples import sample_answer

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

Kind = Literal["attempt", "sample", "program"]
# The kinds of independent solution a confirmation needs among its votes.
SAMPLES_ONLY = frozenset({"sample"})
PROGRAM_AND_SAMPLE = frozenset({"program", "sample"})
# Programs and samples in turn: three votes confirm, a program and a sample among them.
MIXED_BALLOT: dict[str, Any] = {
    "quorum": 3,
    "max_programs": 3,
    "max_samples": 2,
    "witnesses": PROGRAM_AND_SAMPLE,
    "confirm_retries": True,
    "max_dissent": None,
    "draw_for_majority": False,
    "sound_samples": False,
}
# Samples alone confirm the first attempt, and no retry is confirmed.
SAMPLED_BALLOT: dict[str, Any] = {
    **MIXED_BALLOT,
    "max_programs": 0,
    "max_samples": 3,
    "witnesses": SAMPLES_ONLY,
    "confirm_retries": False,
}
# The default: the first attempt and three samples agree with at most one against, no retry is
# confirmed, a disputed attempt draws samples until the majority is settled, and a sample
# whose written arithmetic slips does not vote.
STRICT_BALLOT: dict[str, Any] = {
    "quorum": 4,
    "max_programs": 0,
    "max_samples": 5,
    "witnesses": SAMPLES_ONLY,
    "confirm_retries": False,
    "max_dissent": 1,
    "draw_for_majority": True,
    "sound_samples": True,
}
# Each ballot's settings under the name `--ballot` and `RunConfig.verify.ballot` know it by.
BALLOT_SETTINGS: dict[str, dict[str, Any]] = {
    MIXED: MIXED_BALLOT,
    SAMPLED: SAMPLED_BALLOT,
    STRICT: STRICT_BALLOT,
}


def numeric_answer(node: Node, outputs: Any) -> tuple[str, float] | None:
    """The node's one output when it is a finite number (declared number or integer, or
    undeclared and numeric): only such an answer can be voted on."""
    if len(node.outputs) != 1:
        return None
    name, spec = next(iter(node.outputs.items()))
    if spec not in ("number", "integer", iotypes.ANY):
        return None
    value = outputs.get(name) if hasattr(outputs, "get") else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return name, float(value)


def agree(a: float, b: float) -> bool:
    """Equal up to rounding: one solution may carry 91.6667 where another writes 91.67; two
    whole numbers must be equal."""
    if float(a).is_integer() and float(b).is_integer():
        return a == b
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6) or round(a, 2) == round(b, 2)


def shown(x: float) -> str:
    return normalize_number(repr(x)) or repr(x)


@dataclass
class Vote:
    value: float
    kind: Kind

    @property
    def family(self) -> str:
        """Attempts and samples both reason in prose; a program computes."""
        return "program" if self.kind == "program" else "reasoning"


@dataclass
class Ballot:
    """One run's votes and the solutions drawn so far."""

    votes: list[Vote] = field(default_factory=list)
    programs: int = 0
    samples: int = 0

    def support(self, value: float) -> list[Vote]:
        return [v for v in self.votes if agree(v.value, value)]

    def rival(self, value: float) -> int:
        """The votes of the strongest other answer."""
        return max(
            (len(self.support(v.value)) for v in self.votes if not agree(v.value, value)), default=0
        )


@dataclass
class AnswerAgreement:
    """`quorum` agreeing votes, one of each kind in `witnesses` among them, confirm a final
    numeric answer; at most `max_programs` programs and `max_samples` reasoning samples are
    drawn per run. Unless `confirm_retries`, only the first attempt the check votes on can be
    confirmed. `max_dissent` bounds the votes against a confirmed answer; with
    `draw_for_majority`, solutions are drawn past the point where nothing can be confirmed,
    while more votes could still change the answer most of them give. With `sound_samples`, a
    sample votes only if the arithmetic it writes out holds, the bar the attempt itself must
    pass, so a slipped sum that several samples repeat cannot confirm a wrong attempt. The
    defaults are `STRICT_BALLOT`, the default ballot."""

    quorum: int = 4
    max_programs: int = 0
    max_samples: int = 5
    witnesses: frozenset[str] = SAMPLES_ONLY
    confirm_retries: bool = False
    max_dissent: int | None = 1
    draw_for_majority: bool = True
    sound_samples: bool = True
    name: str = ANSWER_AGREEMENT
    strength: Strength = "strong"
    disputes: bool = True

    @classmethod
    def with_ballot(cls, ballot: str) -> AnswerAgreement:
        """The check under a named ballot (`BALLOTS`)."""
        return cls(**BALLOT_SETTINGS[known_ballot(ballot)])

    def applies(self, sub: Submission) -> bool:
        return sub.final and numeric_answer(sub.node, sub.outputs) is not None

    def _ballot(self, ctx: RunContext) -> Ballot:
        return ctx.remember(self.name, Ballot)

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict | None:
        found = numeric_answer(sub.node, sub.outputs)
        if found is None:
            return verdict(self, ABSTAINED, "the answer is not one number")
        name, value = found
        ballot = self._ballot(ctx)
        late = any(v.kind == "attempt" for v in ballot.votes)
        ballot.votes.append(Vote(value, "attempt"))
        if late and not self.confirm_retries:
            return verdict(
                self, "FAIL", f"a retry after a dispute is not confirmed ({name} = {shown(value)})"
            )
        while not self.confirmed(ballot, value) and self._worth_a_draw(ballot, value):
            if tools.model is None or (tools.sandbox is None and self.max_programs):
                break
            await self._draw(ballot, sub.task, tools, ctx)
        if self.confirmed(ballot, value):
            n = len(ballot.support(value))
            return verdict(self, "PASS", f"{n} independent solutions agree on {shown(value)}")
        drawn = "program" if self.max_programs else "sample"  # the kind the ballot leans on
        if all(v.kind != drawn for v in ballot.votes):
            return verdict(self, ABSTAINED, f"no {drawn} drawn for the task gave a number to vote")
        return verdict(
            self,
            "FAIL",
            f"solutions written independently for this task do not confirm {name} = "
            f"{shown(value)}. One of them is wrong: re-read the task, check each step that leads "
            "to the answer, and answer again.",
        )

    def confirmed(self, ballot: Ballot, value: float) -> bool:
        support = ballot.support(value)
        return (
            len(support) >= self.quorum
            and {v.kind for v in support} >= self.witnesses
            and len(support) >= 2 * ballot.rival(value)
            and not self._too_disputed(ballot, support)
        )

    def _too_disputed(self, ballot: Ballot, support: list[Vote]) -> bool:
        return self.max_dissent is not None and len(ballot.votes) - len(support) > self.max_dissent

    def _reachable(self, ballot: Ballot, value: float, draws: int, attempts: int = 0) -> bool:
        """Whether `value` could be confirmed with `draws` more solutions drawn (each kind while
        it has some left) and `attempts` more attempts giving it."""
        support = ballot.support(value)
        kinds = {v.kind for v in support}
        left = {
            "program": self.max_programs - ballot.programs,
            "sample": self.max_samples - ballot.samples,
        }
        if any(kind not in kinds and (left[kind] <= 0 or draws <= 0) for kind in self.witnesses):
            return False
        if self._too_disputed(ballot, support):
            return False
        return len(support) + draws + attempts >= max(self.quorum, 2 * ballot.rival(value))

    def settled(self, node: Node, ctx: RunContext) -> str | None:
        """Why no retry could be confirmed: retries are not confirmed at all, or none is one
        vote short of confirmation with its witnesses among its votes."""
        ballot: Ballot | None = ctx.memo.get(self.name)
        if ballot is None or not ballot.votes:
            return None
        if not self.confirm_retries:
            return "a retry after a dispute is not confirmed by this ballot"
        if any(self._reachable(ballot, v.value, draws=0, attempts=1) for v in ballot.votes):
            return None
        return f"no answer is one vote short of confirmation (votes: {self.tally(ctx)})"

    def tally(self, ctx: RunContext) -> str | None:
        """Each answer voted for with its votes, most first, and the first attempt's marked:
        `391 x3, 343 x1 (the first attempt), 401 x1`."""
        ballot: Ballot | None = ctx.memo.get(self.name)
        if ballot is None or not ballot.votes:
            return None
        first = next((v for v in ballot.votes if v.kind == "attempt"), None)
        groups: list[list[Vote]] = []
        for v in ballot.votes:
            if not any(agree(g[0].value, v.value) for g in groups):
                groups.append(ballot.support(v.value))
        groups.sort(key=len, reverse=True)
        return ", ".join(
            f"{shown(g[0].value)} x{len(g)}" + (" (the first attempt)" if first in g else "")
            for g in groups
        )

    def _left(self, ballot: Ballot) -> int:
        return self.max_programs - ballot.programs + self.max_samples - ballot.samples

    def _worth_a_draw(self, ballot: Ballot, value: float) -> bool:
        """A solution is drawn only while no answer is confirmed and one that may still be
        (`value`, or any answer when a retry could be confirmed) could be by the draws left, or,
        with `draw_for_majority`, while they could still change the answer kept: past that,
        more votes cost time and settle nothing."""
        left = self._left(ballot)
        if left <= 0 or any(self.confirmed(ballot, v.value) for v in ballot.votes):
            return False
        values = [v.value for v in ballot.votes] if self.confirm_retries else [value]
        if any(self._reachable(ballot, x, draws=left) for x in values):
            return True
        return self.draw_for_majority and self._majority_open(ballot, left)

    @staticmethod
    def _majority_open(ballot: Ballot, left: int) -> bool:
        """Whether `left` more votes could change the answer most votes give (or tie it)."""
        leader = max(ballot.votes, key=lambda v: len(ballot.support(v.value))).value
        return len(ballot.support(leader)) - ballot.rival(leader) <= left

    async def _draw(self, ballot: Ballot, task: str, tools: CheckTools, ctx: RunContext) -> None:
        """The next solution: a program, then a sample, in turn while each kind has some left."""
        sample = ballot.samples < self.max_samples and (
            ballot.samples < ballot.programs or ballot.programs >= self.max_programs
        )
        if sample:
            await self._draw_sample(ballot, task, tools, ctx)
        else:
            await self._draw_program(ballot, task, tools, ctx)

    async def _draw_sample(
        self, ballot: Ballot, task: str, tools: CheckTools, ctx: RunContext
    ) -> None:
        assert tools.model is not None
        settings = tools.settings
        if tools.retry_temperature is not None:
            settings = settings.replace(temperature=tools.retry_temperature)
        ballot.samples += 1
        try:
            answer, reply, run = await sample_answer(
                ctx.model(tools.model),
                task,
                settings,
                sandbox=tools.sandbox,
                timeout=tools.timeout_s,
            )
        except ModelError as e:
            ctx.emit(CrossCheck(kind="sample", sample=ballot.samples, error=f"model error: {e}"))
            return
        slipped = slips(reply) if self.sound_samples else []
        if answer is not None and not slipped:
            ballot.votes.append(Vote(answer, "sample"))
        found = run.trace() if run is not None else {"answer": answer, "reply": reply}
        if slipped:
            found["slip"] = slipped[0].describe()
        ctx.emit(CrossCheck(kind="sample", sample=ballot.samples, **found))

    async def _draw_program(
        self, ballot: Ballot, task: str, tools: CheckTools, ctx: RunContext
    ) -> None:
        assert tools.model is not None and tools.sandbox is not None
        settings = tools.settings
        if ballot.programs and tools.retry_temperature is not None:
            settings = settings.replace(temperature=tools.retry_temperature)
        try:
            run: ProgramRun = await write_program(
                ctx.model(tools.model),
                task,
                tools.sandbox,
                settings,
                timeout=tools.timeout_s,
                framing=ballot.programs,
            )
        except ModelError as e:  # the endpoint failed past its retries: no vote, no verdict
            run = ProgramRun(None, "", 1, error=f"model error: {e}", sandbox_fault=True)
        ballot.programs += 1
        if run.answer is not None:
            ballot.votes.append(Vote(run.answer, "program"))
        ctx.emit(CrossCheck(kind="program", program=ballot.programs, **run.trace()))

    def choose(
        self, node: Node, candidates: list[dict[str, Any]], ctx: RunContext
    ) -> dict[str, Any] | None:
        """The answer most votes give; on a tie one both families gave, then the earliest
        attempt's. Another solution's number replaces the attempts' only by outvoting them."""
        ballot: Ballot | None = ctx.memo.get(self.name)
        answers = [a for c in candidates if (a := numeric_answer(node, c)) is not None]
        if ballot is None or not answers or not ballot.votes:
            return None
        name = answers[0][0]
        attempts = [v for v in ballot.votes if v.kind == "attempt"]

        def rank(vote: Vote) -> tuple[int, int, int]:
            support = ballot.support(vote.value)
            both = {v.family for v in support} == {"reasoning", "program"}
            first = next((i for i, v in enumerate(attempts) if agree(v.value, vote.value)), 99)
            return (len(support), both, -first)

        best = max(ballot.votes, key=rank).value
        base = next(
            (c for c in candidates if (a := numeric_answer(node, c)) and agree(a[1], best)),
            candidates[0],
        )
        if node.outputs[name] == "integer" and not float(best).is_integer():
            return dict(base)
        number: float | int = int(best) if float(best).is_integer() else best
        return {**base, name: number}
