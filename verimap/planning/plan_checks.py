"""What the planner checks in a model's plan beyond validity, and the schema the model answers
in. Small models write plans that validate and still cannot work; these checks name why."""

from __future__ import annotations

import copy
from typing import Any

from verimap.base import iotypes
from verimap.base.check_names import CATALOG, PLAN_CHECKS
from verimap.base.failure import FailureContext
from verimap.base.plan import USER_TASK, Plan, PythonVF, node_work, plan_json_schema


def plan_quality_problems(
    plan: Plan,
    *,
    demo_markers: list[str] | tuple[str, ...] = (),
    require_vfs: bool = True,
    answer_types: tuple[str, ...] = (),
) -> list[str]:
    """Problems a valid plan can still have that make it useless; small models make all of them.

    A node without inputs sees nothing; a plan where no node takes `USER_TASK` never
    sees the task; a node that carries a demonstration's marker (its task-specific
    instruction or function name) solves another task; a node without VFs is
    unchecked; a Python VF that never reads `outputs` checks nothing; a final node with no
    output of the `answer_types` gives no answer.
    """
    problems: list[str] = []
    sinks = plan.sinks()
    if answer_types and len(sinks) == 1:
        final = plan.node(sinks[0])
        if not {iotypes.label(t) for t in final.outputs.values()} & {*answer_types, iotypes.ANY}:
            problems.append(
                f"the final node {final.id!r} gives the answer, so it must have an output of type "
                f'{" or ".join(answer_types)} (e.g. "answer": "{answer_types[0]}")'
            )
    if not any(USER_TASK in n.inputs for n in plan.nodes):
        problems.append(
            f"no node takes {USER_TASK!r}, so no executor can see the task; add it to the first node's inputs"
        )
    for n in plan.nodes:
        if not n.inputs:
            problems.append(
                f"node {n.id!r} has no inputs; an executor sees only its inputs, so give it {USER_TASK!r} "
                "and/or '<node_id>.<output>' of earlier nodes"
            )
        text = "\n".join([n.instruction, *(vf.model_dump_json() for vf in n.verification)])
        copied = [m for m in demo_markers if m in text]
        if copied:
            problems.append(
                f"node {n.id!r} copies the example plan ({', '.join(map(repr, copied[:3]))} "
                "belong to the example task); write instructions and VFs for THIS task"
            )
        if require_vfs and not n.verification:
            problems.append(f"node {n.id!r} has no verification functions; add at least one")
        for vf in n.verification:
            if isinstance(vf, PythonVF) and "outputs" not in vf.code:
                problems.append(
                    f"node {n.id!r}: python VF {vf.name!r} never reads `outputs`, so it checks nothing"
                )
    return problems


def repeated_failure_problems(previous: Plan, plan: Plan, failure: FailureContext) -> list[str]:
    """A replan that keeps a node that failed verification, and everything it depends on, as they
    were asks for what the node's retries already tried. Under greedy decoding it fails again word
    for word, and small models often hand back the failed plan unchanged, replan after replan.
    With a sampling executor a rerun may still pass, so the planner asks once for a change but
    does not refuse the plan."""
    nid = failure.node_id
    if nid not in plan.by_id or all(v.passed for v in failure.verdicts):
        return []
    if node_work(previous, nid) != node_work(plan, nid):
        return []
    return [
        f"node {nid!r} and every node it depends on are exactly as in the plan that failed, so "
        "running them again repeats what already failed; change what caused the failure"
    ]


def planning_schema(*, require_vfs: bool = True, with_vfs: bool = True) -> dict[str, Any]:
    """The plan schema narrowed for a model to answer in: a subset of `plan_json_schema()`.

    Small grammar-constrained models fill in whatever the schema allows, so leave out what
    they get wrong and the validator can infer: edges (implied by inputs), the final flag
    (the unique sink) and VF weights; and require what a useful node needs.
    """
    schema = copy.deepcopy(plan_json_schema())
    schema["properties"].pop("edges", None)
    defs = schema["$defs"]
    node = defs["Node"]
    node["properties"].pop("final", None)
    node["properties"]["inputs"]["minItems"] = 1
    # One typed form for models: a name -> type-name object the grammar can enforce.
    node["properties"]["outputs"] = {
        "type": "object",
        "additionalProperties": {"enum": [t for t in iotypes.TYPE_NAMES if t != iotypes.ANY]},
    }
    if not with_vfs:
        node["properties"].pop("verification")
    elif require_vfs:
        node["properties"]["verification"]["minItems"] = 1
    node["required"] = list(node["properties"])
    for vf in ("PythonVF", "LLMVF"):
        defs[vf]["properties"].pop("weight", None)
        defs[vf]["required"] = list(defs[vf]["properties"])
    defs["CheckVF"] = {"anyOf": [_check_vf_schema(c) for c in PLAN_CHECKS]}
    return schema


def _check_vf_schema(check: str) -> dict[str, Any]:
    """A `CheckVF` naming `check`, with exactly the arguments it takes, all required (which
    outputs they may name is the node's: `plan.check_plan`). A grammar that allowed arguments
    for a check without any let small models write plans that do not parse."""
    props: dict[str, Any] = {
        "name": {"type": "string", "minLength": 1},
        "type": {"const": "check"},
        "check": {"const": check},
    }
    spec = CATALOG.get(check)
    if spec is not None:
        args = {
            a: {"type": "number"} if kind == "number" else {"type": "string", "minLength": 1}
            for a, kind in spec.args.items()
        }
        props["args"] = {
            "type": "object",
            "properties": args,
            "required": list(args),
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }
