"""The independent-solution check: a numeric final answer must agree with the answer the model
gives when it solves the whole task in one reply, without the plan.

Property VFs (`answer > 0`, whole numbers) cannot see a wrong decomposition: a node told to
"add the initial cost to the increase" does so, and every property holds. A solution written in
one reply, with no plan, errs in other places, so agreement between the two is evidence and
disagreement is a reason to look again. On the local 1.5B (runs r33 and r35, 20 GSM8K tasks) the
plan's verified answer agreed with such a reply on 7 tasks, 6 of them right, and disagreed on 13,
4 of them right. The reply is asked once per run, when a final answer first passes its VFs, and
only then: a failed attempt is decided already (strict AND). A disagreement fails the attempt,
and the retry is told that, never the other number: a retry shown it copies it (on the 1.5B a
right 26 became the other reply's wrong 30 in two retries), and agreement means something only
while the two stay independent. When no attempt agrees, the run ends unverified with the
node's most frequent answer, without a replan (as answers that never agree under
`RunConfig.agreement`): the plan's VFs passed, and a replan costs a plan and its nodes. The
other reply and its number go to the trace as a `cross_check` event.

The independent solution is a program by default (`RunConfig.cross_check_by`): the model writes
`solution()`, the sandbox runs it, and its return value is the number. A reply in prose errs
where the executor errs (the same model, greedy, on the same task: the pens of the README were
`17 * 20 = 340` and `340 + 3 = 343` in both), while a program names each quantity and lets
Python do the arithmetic. On the 1.5B, GSM8K 140-159, programs were right on 11 of 20 tasks
and prose replies on 6; where the two agreed (6 tasks) both were right. Because the program is
computed, not reasoned, it also settles a dispute no attempt resolved: it counts as one more
answer and wins a tie (`pick`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from verimap import iotypes
from verimap.accounting import BudgetExceeded
from verimap.config import RunConfig
from verimap.events import CROSS_CHECK
from verimap.executor import code_from_reply
from verimap.llm.base import Model, ModelError, ModelRequest
from verimap.llm.messages import AssistantMessage, GenerationSettings, Message, UserMessage
from verimap.node_context import plurality
from verimap.numbers import final_number, normalize_number
from verimap.plan import Node
from verimap.result import VerificationReport, VFVerdict
from verimap.run_context import RunContext
from verimap.sandbox.base import Outcome, Sandbox
from verimap.usage import JUDGE

if TYPE_CHECKING:
    from verimap.verifier import Verifier

NAME = "independent_solution"
PROMPT = (
    "{task}\n\nSolve this task on your own, step by step. End with the line 'The answer is N.', "
    "where N is the final number."
)
PROGRAM_PROMPT = (
    "{task}\n\nWrite a Python function `solution()` that computes and returns the final number "
    "this task asks for. Name a variable for each quantity the task gives, and let Python do "
    "the arithmetic. Reply with only the code, in one ```python code block."
)
# A program that does not run goes back once with its error (the 1.5B's first programs on
# GSM8K 0-19 failed on 3 of 20 tasks: a name used before it was set, or no function at all).
PROGRAM_TRIES = 2
PROGRAM_FIX = (
    "Running it failed: {error}\n\nFix the code. Reply with the whole corrected function "
    "`solution()` in one ```python code block."
)
# Printed last, so a program that prints on its own still ends on its answer.
RUN_SOLUTION = "\n\nprint(solution())\n"
Kind = Literal["program", "reply"]


def answer_from(text: str) -> float | None:
    """The number a free-text solution ends on, read as the GSM8K scorer reads it; None when
    it states none."""
    found = final_number(text)
    try:
        return float(found) if found is not None else None
    except ValueError:  # a boxed non-number
        return None


def numeric_answer(node: Node, outputs: dict[str, Any]) -> tuple[str, float] | None:
    """The node's one output when it is a number (declared number or integer, or undeclared and
    numeric): only such an answer can be compared with another solution's number."""
    if len(node.outputs) != 1:
        return None
    name, spec = next(iter(node.outputs.items()))
    value = outputs.get(name)
    if spec not in ("number", "integer", iotypes.ANY):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return name, float(value)


def agree(a: float, b: float) -> bool:
    """Equal up to rounding: a plan may carry 91.6667 where a reply writes 91.67; two whole
    numbers must be equal."""
    if float(a).is_integer() and float(b).is_integer():
        return a == b
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6) or round(a, 2) == round(b, 2)


def disputed(report: VerificationReport) -> bool:
    """Every VF passed and only this check said no: the answer stands, unconfirmed."""
    return [(v.name, v.outcome) for v in report.failures] == [(NAME, "FAIL")]


def _shown(x: float) -> str:
    return normalize_number(repr(x)) or repr(x)


class CrossCheck:
    """One run's independent solution, asked at most once, and its verdict on final answers."""

    def __init__(
        self,
        model: Model,
        task: str,
        settings: GenerationSettings,
        sandbox: Sandbox | None = None,
        timeout_s: float = 10.0,
    ):
        self.model = model
        self.task = task
        self.settings = settings
        self.sandbox = sandbox  # None: the solution is a reply in prose
        self.timeout_s = timeout_s
        self._solution: tuple[float | None, str] | None = None
        self.disputes = 0  # final answers that passed their VFs and disagreed

    @classmethod
    def for_run(cls, config: RunConfig, verifier: Verifier, task: str) -> CrossCheck | None:
        """The check a run's config asks for, asked of the verifier's judge model (a program
        needs the verifier's sandbox to run; without one the solution is a reply)."""
        judge = verifier.judge_model
        if not config.checks_independently or judge is None:
            return None
        sandbox = verifier.sandbox if config.cross_check_by == "program" else None
        return cls(judge, task, verifier.settings, sandbox, config.vf_timeout_s)

    @property
    def kind(self) -> Kind:
        return "program" if self.sandbox is not None else "reply"

    async def solution(self, ctx: RunContext | None = None) -> tuple[float | None, str]:
        """The independent answer (None if there is no number) and the model's reply."""
        if self._solution is None:  # one final node per run, its attempts one after another
            model = ctx.model(self.model) if ctx is not None else self.model
            prompt = PROGRAM_PROMPT if self.sandbox is not None else PROMPT
            messages: list[Message] = [UserMessage(content=prompt.format(task=self.task))]
            ran: dict[str, Any] = {}
            for tries in range(1, PROGRAM_TRIES + 1):
                request = ModelRequest(messages=messages, settings=self.settings, role=JUDGE)
                text = (await model.request(request)).content or ""
                if self.sandbox is None:
                    answer = answer_from(text)
                    break
                answer, ran = await self._run(text)
                ran["tries"] = tries
                if "error" not in ran or ran.get("sandbox_fault"):
                    break  # a sandbox fault is not the program's to fix
                messages += [
                    AssistantMessage(content=text),
                    UserMessage(content=PROGRAM_FIX.format(error=ran["error"])),
                ]
            self._solution = (answer, text)
            if ctx is not None:
                ctx.emit(CROSS_CHECK, answer=answer, reply=text, kind=self.kind, **ran)
        return self._solution

    async def _run(self, text: str) -> tuple[float | None, dict[str, Any]]:
        """What the reply's `solution()` returns, and what running it said (for the trace). A
        program that does not run gives no number: the check then stands aside."""
        assert self.sandbox is not None
        code = code_from_reply(text)
        if code is None:
            return None, {"error": "the reply holds no function `solution()`"}
        res = await self.sandbox.run_program(code + RUN_SOLUTION, timeout=self.timeout_s)
        if res.outcome is not Outcome.PASS:
            error = f"{res.outcome.value}: {res.message}"[:500]
            return None, {"error": error, "sandbox_fault": res.outcome is Outcome.SANDBOX_ERROR}
        lines = res.stdout.strip().splitlines()
        printed = lines[-1].strip() if lines else ""
        return answer_from(printed), {"printed": printed[:200]}

    def pick(self, node: Node, disputed: list[dict[str, Any]]) -> dict[str, Any]:
        """The answer kept when no attempt agreed: the one given most often, where a computed
        solution counts as one more answer and wins a tie (attempts that scatter say less than
        a program that ran). A prose solution never decides a tie."""
        best, count = plurality(disputed)
        independent = self._solution[0] if self._solution is not None else None
        answer = numeric_answer(node, best)
        if self.sandbox is None or independent is None or answer is None or count > 1:
            return best
        name = answer[0]
        if not independent.is_integer():
            # an integer output cannot take a fraction; the attempts' answer stands
            return best if node.outputs[name] == "integer" else {**best, name: independent}
        return {**best, name: int(independent)}

    def why_unconfirmed(self) -> str:
        answer = self._solution[0] if self._solution is not None else None
        shown = _shown(answer) if answer is not None else "none"
        what = "computed" if self.kind == "program" else "independent"
        return f"none of its answers agreed with the {what} solution ({shown})"

    def _other(self) -> str:
        if self.kind == "program":
            return "a program written for this task"
        return "the task solved in one go, without this plan,"

    async def add_to(
        self,
        report: VerificationReport,
        node: Node,
        outputs: dict[str, Any],
        ctx: RunContext | None = None,
    ) -> VerificationReport:
        """`report` with the check's verdict added, when the VFs passed and the answer is one
        number; a disagreement fails the attempt, and its retry sees the other solution."""
        answer = numeric_answer(node, outputs)
        if not report.passed or answer is None:
            return report
        name, value = answer
        try:
            independent, _ = await self.solution(ctx)
        except BudgetExceeded:
            raise
        except ModelError as e:
            verdict = VFVerdict(name=NAME, type="check", outcome="ERROR", message=f"{e}")
        else:
            if independent is None:
                return report
            if agree(value, independent):
                verdict = VFVerdict(name=NAME, type="check", outcome="PASS")
            else:
                self.disputes += 1
                verdict = VFVerdict(
                    name=NAME,
                    type="check",
                    outcome="FAIL",
                    message=f"{self._other()} gives another number "
                    f"than {name} = {_shown(value)}. One of them is wrong: re-read the task, "
                    "check each step that leads to the answer, and answer again.",
                )
        return report.model_copy(
            update={"verdicts": [*report.verdicts, verdict], "passed": verdict.passed}
        )
