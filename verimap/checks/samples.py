"""A sampled reasoning solution of the whole task: the self-consistency vote (Wang et al. 2023).

The answer-agreement check spends its budget on two kinds of independent solutions. Programs
catch a slipped sum; a sampled chain of reasoning, asked exactly as the `sc` baseline asks, is
the vote that baseline wins with at equal calls, so a disputed answer is settled by a plurality
at least as well informed as self-consistency's.
"""

from __future__ import annotations

from verimap.checks.programs import number_in
from verimap.llm.base import Model, ModelRequest, SolveCall
from verimap.llm.messages import GenerationSettings, UserMessage
from verimap.usage import JUDGE

REASONING_PROMPT = (
    "{task}\n\nSolve the problem step by step. End with the line 'The answer is N.', where N is "
    "the final number."
)
# A sample at the greedy temperature would repeat the attempt it is meant to check.
SAMPLE_TEMPERATURE = 0.7


async def sample_answer(
    model: Model, task: str, settings: GenerationSettings, *, role: str = JUDGE
) -> tuple[float | None, str]:
    """One sampled reasoning reply for `task` and the number it ends on (None if none); at
    `SAMPLE_TEMPERATURE` when `settings` are greedy."""
    if not settings.temperature:
        settings = settings.replace(temperature=SAMPLE_TEMPERATURE)
    request = ModelRequest(
        messages=[UserMessage(content=REASONING_PROMPT.format(task=task))],
        settings=settings,
        role=role,
        purpose=SolveCall(kind="sample", task=task),
    )
    reply = (await model.request(request)).content or ""
    return number_in(reply), reply
