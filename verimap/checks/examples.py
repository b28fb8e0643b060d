"""The task's own examples, run against the node's code in the sandbox.

A code task usually states what some calls must return (doctests, `f(x) == y`); the code that
does not reproduce them is wrong, whatever else it does. Strong, but few: two or three examples
pass code that fails the hidden tests often enough that the examples alone confirm nothing on
a small model, which is why the code-agreement check runs beside them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from verimap.base import iotypes
from verimap.base.check_names import RUN_EXAMPLES
from verimap.base.plan import output_type
from verimap.base.sandbox import Outcome
from verimap.base.verdicts import ABSTAINED, VFVerdict
from verimap.base.verification import CheckTools, Strength, Submission, verdict

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

# The VF the sandbox runs: the worker's `run_examples` helper, with the task and code as data.
EXAMPLES_VF = "run_examples(outputs['code'], inputs['USER_TASK'])"


def code_output(sub: Submission) -> str | None:
    """The name of the node's one code output, if it has exactly one."""
    names = [o for o in sub.node.outputs if output_type(sub.node, o) == iotypes.CODE]
    return names[0] if len(names) == 1 else None


class RunExamples:
    name = RUN_EXAMPLES
    strength: Strength = "strong"
    disputes = False

    def applies(self, sub: Submission) -> bool:
        from verimap.sandbox.policy import task_examples

        return code_output(sub) is not None and bool(task_examples(sub.task))

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict | None:
        out = code_output(sub)
        code = sub.outputs.get(out) if out is not None else None
        if not isinstance(code, str):
            return verdict(self, "FAIL", "the node gave no code to run the examples on")
        return await run_examples(self, tools, sub.task, code)


async def run_examples(check: RunExamples, tools: CheckTools, task: str, code: str) -> VFVerdict:
    """The examples' verdict on `code`, as a Python VF of the sandbox reports it."""
    if tools.sandbox is None:
        return verdict(check, ABSTAINED, "no sandbox to run the examples in")
    try:
        res = await tools.sandbox.run_vf(
            EXAMPLES_VF, {"USER_TASK": task}, {"code": code}, timeout=tools.timeout_s
        )
    except Exception as e:  # a sandbox that cannot run is no verdict on the code
        return verdict(check, Outcome.SANDBOX_ERROR.value, f"{type(e).__name__}: {e}")
    return verdict(check, res.outcome.value, res.message, traceback=res.traceback)
