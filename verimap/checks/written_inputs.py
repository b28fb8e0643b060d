"""Calls the judge model writes for a task whose examples give no inputs to compare code on.

Inputs come from the task's own example calls (`code_inputs`); when its examples are prose
("For N = 1000, the sum of digits will be 1"), call another name, or are missing, no input can
be derived, and code agreement could only abstain. The judge is then asked, from the task
alone, for calls a tester would make; they serve as examples do, mutated and drawn around.
Their results are never expected values: only what independently written solutions do on them
is compared.
"""

from __future__ import annotations

from verimap.iotypes import python_blocks
from verimap.llm.base import Model, ModelRequest, SolveCall
from verimap.llm.messages import GenerationSettings, UserMessage
from verimap.usage import JUDGE

INPUTS_PROMPT = (
    "{task}\n\nWrite {n} different calls of `{entry}` that a careful tester would make to check "
    "a solution: typical inputs and edge cases the description allows. Reply with only the "
    "calls, one per line, in one ```python code block; each line a plain call with literal "
    "arguments, like `{entry}(...)`, and no expected result."
)
CALLS = 8


async def write_calls(
    model: Model, task: str, entry: str, settings: GenerationSettings, *, role: str = JUDGE
) -> str:
    """The lines of Python the judge wrote for `task` (its code blocks, else its whole reply):
    the caller reads the calls of `entry` out of them as it reads a task's examples."""
    request = ModelRequest(
        messages=[UserMessage(content=INPUTS_PROMPT.format(task=task, entry=entry, n=CALLS))],
        settings=settings,
        role=role,
        purpose=SolveCall(kind="inputs", task=task),
    )
    reply = (await model.request(request)).content or ""
    return "\n".join(python_blocks(reply)) or reply
