"""The plan that always runs: when a planner writes no valid plan, the whole task becomes one
node with one typed answer and the checks its kind gives for free."""

from __future__ import annotations

import re
from typing import Any

from verimap.base import iotypes
from verimap.base.check_names import RUN_EXAMPLES
from verimap.base.plan import USER_TASK, Node, Plan, PythonVF
from verimap.planning.plan import parse_plan
from verimap.planning.plan_fixes import final_node, give_vfs_the_task


def fallback_plan(
    task: str, domain: str = "math", *, reason: str = "", with_vfs: bool = True
) -> Plan:
    """Used when a planner writes no valid plan, so a task that can be attempted is attempted."""
    plan = whole_task_plan(task, domain, with_vfs=with_vfs)
    plan.fallback_reason = reason or "fallback plan"
    return plan


def whole_task_plan(task: str, domain: str = "math", *, with_vfs: bool = True) -> Plan:
    """The whole task as one node with one typed answer, checked by what the task's kind gives
    for free: a code task's own examples, a numeric answer's type (a finite number). Without
    VFs it is the ReAct baseline, so that baseline and verimap's fallback differ only in
    verification."""
    from verimap.sandbox.policy import task_examples

    code = domain == "programming" or (domain != "qa" and bool(task_examples(task)))
    vfs: list[dict[str, Any]] = []
    if code:
        output, kind = "code", iotypes.CODE
        instruction = (
            "Write the complete Python code that the task asks for: the function with its exact "
            "signature and any imports it needs."
        )
        if task_examples(task):
            vfs.append(examples_vf())
    elif domain == "qa":
        output, kind = "answer", "string"
        instruction = "Answer the question in the task, using the tools as needed."
        vfs.append(
            {
                "name": "answered",
                "type": "python",
                "code": "assert outputs['answer'].strip(), 'the answer is empty'",
            }
        )
    else:
        output, kind = "answer", "number"
        instruction = "Solve the task step by step and give the final numeric answer."
        vfs.append(
            {
                "name": "finite_number",
                "type": "python",
                "code": "assert is_number(outputs['answer']), 'the answer must be a finite number'",
            }
        )
    plan = parse_plan(
        {
            "nodes": [
                {
                    "id": "solve",
                    "name": "Solve the whole task",
                    "instruction": instruction,
                    "inputs": [USER_TASK],
                    "outputs": {output: kind},
                    "verification": vfs if with_vfs else [],
                }
            ],
        }
    )
    return plan


def nonempty_outputs_vf(node: Node) -> PythonVF:
    """A deterministic VF: every declared output is present and not empty."""
    return PythonVF(
        name="outputs_nonempty",
        code=(
            f"for k in {list(node.outputs)!r}:\n"
            "    assert k in outputs, f'missing output {k}'\n"
            "    v = outputs[k]\n"
            "    assert v is not None and v != '' and v != [] and v != {}, f'output {k} is empty'\n"
        ),
    )


_RUNS_TASK_EXAMPLES = re.compile(r"""run_examples\([^)]*inputs\[\s*(['"])USER_TASK\1\s*\]""")


def examples_vf(name: str = "task_examples") -> dict[str, Any]:
    """The check a code task gives for free: its own examples, run against the node's code."""
    return {"name": name, "type": "check", "check": RUN_EXAMPLES}


def _runs_task_examples(vf: Any) -> bool:
    if not isinstance(vf, dict):
        return False
    return vf.get("check") == RUN_EXAMPLES or bool(
        _RUNS_TASK_EXAMPLES.search(str(vf.get("code", "")))
    )


def with_task_examples(raw: Any, task: str, answer_types: tuple[str, ...]) -> Any:
    """A code task's plan, its final node checked against the task's own examples.

    The planner's VFs on that node may be missing, or dropped as broken, and then nothing checks
    the answer at all, so a string that is no function could pass as one. So on a code task
    (`answer_types` led by `code`) whose text has examples, the final node's one code output
    gets the fallback plan's `task_examples` VF, unless one of the node's VFs runs the task's
    examples already (`run_examples(..., inputs["USER_TASK"])`; other nodes' outputs passed as
    the examples do not count), and `USER_TASK` among its inputs."""
    from verimap.sandbox.policy import task_examples

    final = final_node(raw)
    if not answer_types or answer_types[0] != iotypes.CODE or final is None:
        return raw
    outs, vfs = final.get("outputs"), final.setdefault("verification", [])
    if not isinstance(outs, dict) or not isinstance(vfs, list) or not task_examples(task):
        return raw
    code = [k for k, t in outs.items() if t == iotypes.CODE]
    if len(code) != 1:
        return raw
    if any(_runs_task_examples(v) for v in vfs):
        return raw
    names = {v.get("name") for v in vfs if isinstance(v, dict)}
    vfs.append(examples_vf("task_examples_free" if "task_examples" in names else "task_examples"))
    return give_vfs_the_task(raw)
