"""A sampled reasoning solution of the whole task: the self-consistency vote (Wang et al. 2023).

The answer-agreement check spends its budget on sampled chains of reasoning, asked exactly as
the `sc` baseline asks (and, under the mixed ballot, on programs, which catch a slipped sum):
that is the vote that baseline wins with at equal calls, so a disputed answer is settled by a
plurality as well informed as self-consistency's.

A reasoning reply of a small coder model often writes its arithmetic as a program and then a
block of "output" it made up, and the number it states is right far less often than the number
its program prints when run (design/decisions.md, D21). So a reply that holds a program is read
by running it: what Python prints is evidence, what the model says Python printed is not.
"""

from __future__ import annotations

from verimap.base.messages import GenerationSettings, ModelRequest, UserMessage
from verimap.base.protocols import Model, Sandbox
from verimap.base.purpose import SolveCall
from verimap.base.usage import JUDGE
from verimap.checks.programs import ProgramRun, number_in, run_program, runnable

REASONING_PROMPT = (
    "{task}\n\nSolve the problem step by step. End with the line 'The answer is N.', where N is "
    "the final number."
)
# A sample at the greedy temperature would repeat the attempt it is meant to check.
SAMPLE_TEMPERATURE = 0.7


async def reasoned_number(
    reply: str, sandbox: Sandbox | None, *, timeout: float = 10.0
) -> tuple[float | None, ProgramRun | None]:
    """The number a reasoning reply gives, and the run of its program when it holds one.

    A reply with a program gives what the program prints, or no number when it fails to run
    (its stated result was not computed). Without a sandbox, or with no program in the reply,
    the reply's final number as written."""
    if sandbox is None or runnable(reply) is None:
        return number_in(reply), None
    run = await run_program(sandbox, reply, timeout)
    return run.answer, run


async def sample_answer(
    model: Model,
    task: str,
    settings: GenerationSettings,
    *,
    role: str = JUDGE,
    sandbox: Sandbox | None = None,
    timeout: float = 10.0,
) -> tuple[float | None, str, ProgramRun | None]:
    """One sampled reasoning reply for `task`, the number it gives (None if none; see
    `reasoned_number`) and the run of its program if it holds one; at `SAMPLE_TEMPERATURE`
    when `settings` are greedy."""
    if not settings.temperature:
        settings = settings.replace(temperature=SAMPLE_TEMPERATURE)
    request = ModelRequest(
        messages=[UserMessage(content=REASONING_PROMPT.format(task=task))],
        settings=settings,
        role=role,
        purpose=SolveCall(kind="sample", task=task),
    )
    reply = (await model.request(request)).content or ""
    answer, run = await reasoned_number(reply, sandbox, timeout=timeout)
    return answer, reply, run
