"""The node loop's questions to the disputing checks: only they are asked, the first answer is
taken, and without the run's context nobody answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from verimap.base.plan import Node
from verimap.base.run_context import RunContext
from verimap.base.verdicts import VerificationReport, VFVerdict
from verimap.base.verification import Disputing

NODE = Node(id="solve", instruction="Solve.", inputs=["USER_TASK"], outputs={"answer": "number"})


@dataclass
class Voter:
    """A check double that answers every question with its own name, unless it is mute."""

    name: str
    disputes: bool = True
    answers: bool = True
    strength: str = "strong"

    def applies(self, sub: Any) -> bool:
        return True

    async def check(self, sub: Any, tools: Any, ctx: Any) -> None:
        return None

    def choose(self, node: Node, candidates: list[dict[str, Any]], ctx: Any) -> Any:
        return None if not self.answers else {"answer": self.name}

    def tally(self, ctx: Any) -> str | None:
        return None if not self.answers else f"{self.name} x1"

    def settled(self, node: Node, ctx: Any) -> str | None:
        return None if not self.answers else self.name


def _failed(*names: str, kind: Literal["python", "llm", "check"] = "check") -> VerificationReport:
    return VerificationReport(
        passed=False, verdicts=[VFVerdict(name=n, type=kind, outcome="FAIL") for n in names]
    )


def test_only_disputing_checks_are_asked_and_the_first_with_an_answer_speaks():
    checks = [Voter("plain", disputes=False), Voter("mute", answers=False), Voter("a"), Voter("b")]
    d, ctx = Disputing(checks), RunContext()  # type: ignore[arg-type]
    assert [c.name for c in d.checks] == ["mute", "a", "b"]
    assert d.choose(NODE, [{"answer": 1}], ctx) == {"answer": "a"}
    assert d.tally(ctx) == "a x1" and d.settled(NODE, ctx) == "a"
    assert d.choose(NODE, [], None) is None and d.tally(None) is None  # no run, no ballot


def test_an_answer_is_disputed_only_when_disputing_checks_alone_failed_it():
    d = Disputing([Voter("agreement"), Voter("arithmetic", disputes=False)])  # type: ignore[list-item]
    assert d.of(_failed("agreement")) == ["agreement"]
    assert d.of(_failed("agreement", "arithmetic")) is None  # a slip is a fault, not a dispute
    assert d.of(_failed("agreement", kind="python")) is None  # a VF of the same name is not it
    assert d.of(VerificationReport(passed=True)) is None
