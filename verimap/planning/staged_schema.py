"""The grammars of the staged planner, and the plan its replies make.

A small model fills in whatever its grammar allows, so each stage's schema allows only what
can be right: the outline's ids and output names are identifiers and its types the domain's;
a node's inputs are an enum of `USER_TASK` and the outputs of the nodes before it (the DAG is
valid by construction), and its checks an `anyOf` of the domain's checks, each with its
arguments (an output the node declares, a source's name, a number). The final node is not the
model's to outline: it always gives one output, `answer`, of the domain's answer type.
"""

from __future__ import annotations

import copy
import itertools
import re
from typing import Any

from verimap.base.check_names import CATALOG, DOMAIN_CHECKS
from verimap.base.plan import LLMVF, USER_TASK, CheckVF, Node, Plan
from verimap.planning.plan_fixes import numbered

FINAL = "final"
ANSWER = "answer"
# Identifiers a small model writes whole: lower case. No length bounds in any string: llama.cpp
# spells a bounded repetition out as nested optional rules (bounds on a node's instruction and
# criteria made its grammar 2.3 times longer), and a string too short is the validator's to name.
ID_PATTERN = r"^[a-z][a-z0-9_]*$"
OUTPUT_TYPES: dict[str, list[str]] = {
    "qa": ["string", "number", "list[string]"],
    "math": ["number", "integer", "string", "list[number]"],
    "programming": ["code", "string", "list[string]"],
}
ANSWER_TYPES = {"qa": "string", "math": "number", "programming": "code"}
MAX_OUTPUTS = 3
MAX_CHECKS = 3
MAX_CRITERIA = 2


def skeleton_schema(domain: str, *, min_steps: int = 0, max_steps: int = 3) -> dict[str, Any]:
    """The outline: the steps before the final node, each an id and its typed outputs."""
    output = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": ID_PATTERN},
            "type": {"enum": OUTPUT_TYPES[domain]},
        },
        "required": ["name", "type"],
    }
    step = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": ID_PATTERN},
            "outputs": {"type": "array", "minItems": 1, "maxItems": MAX_OUTPUTS, "items": output},
        },
        "required": ["id", "outputs"],
    }
    steps = {"type": "array", "minItems": min_steps, "maxItems": max(min_steps, max_steps)}
    return {
        "type": "object",
        "properties": {"steps": {**steps, "items": step}},
        "required": ["steps"],
    }


def _arg_schema(kind: str, outputs: list[str], available: list[str]) -> dict[str, Any]:
    if kind == "output":
        return {"enum": outputs}
    if kind == "value":
        return {"enum": [*outputs, *available]}
    if kind == "number":
        return {"type": "number"}
    return {"type": "string"}


def check_schemas(domain: str, outputs: list[str], available: list[str]) -> list[dict[str, Any]]:
    """One schema per check a node of `domain` may name: its name as a constant and its
    arguments, outputs as an enum of the node's `outputs`, values of those and `available`.
    A check over several outputs gets one schema per set of distinct outputs, and none when
    the node declares too few: a grammar that let two arguments name one output let small
    models write plans that do not validate."""
    out = []
    for name in DOMAIN_CHECKS[domain]:
        spec = CATALOG.get(name)
        if spec is None:
            out.append(_check_schema(name, None))
            continue
        args = {a: _arg_schema(k, outputs, available) for a, k in spec.args.items()}
        output_args = [a for a, k in spec.args.items() if k == "output"]
        if len(output_args) < 2:
            out.append(_check_schema(name, args))
            continue
        for chosen in itertools.combinations(outputs, len(output_args)):
            pinned = {a: {"const": o} for a, o in zip(output_args, chosen, strict=True)}
            out.append(_check_schema(name, {**args, **pinned}))
    return out


def _check_schema(name: str, args: dict[str, Any] | None) -> dict[str, Any]:
    props: dict[str, Any] = {"check": {"const": name}}
    if args is not None:
        props["args"] = {"type": "object", "properties": args, "required": list(args)}
    return {"type": "object", "properties": props, "required": list(props)}


def node_schema(
    domain: str,
    outputs: list[str],
    available: list[str],
    *,
    with_vfs: bool = True,
    min_criteria: int = 0,
) -> dict[str, Any]:
    """A node's instruction, inputs (`USER_TASK` or one of `available`), checks and criteria."""
    props: dict[str, Any] = {
        "instruction": {"type": "string"},
        "inputs": {
            "type": "array",
            "minItems": 1,
            "maxItems": 1 + len(available),
            "items": {"enum": [USER_TASK, *available]},
        },
    }
    if with_vfs:
        props["checks"] = {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_CHECKS,
            "items": {"anyOf": check_schemas(domain, outputs, available)},
        }
        props["criteria"] = {
            "type": "array",
            "minItems": min_criteria,
            "maxItems": max(min_criteria, MAX_CRITERIA),
            "items": {"type": "string"},
        }
    return {"type": "object", "properties": props, "required": list(props)}


def unique_id(wanted: str, taken: set[str]) -> str:
    """`wanted`, or `wanted_2` (the first free `wanted_k`) when it is taken."""
    return wanted if wanted not in taken else numbered(wanted, set(taken))


def outline(raw: Any, taken: set[str]) -> list[tuple[str, dict[str, str]]]:
    """The steps of an outline reply as (id, {output: type}), ids made unique among themselves,
    `taken` and the final node's, output names unique within a step."""
    steps = raw.get("steps", []) if isinstance(raw, dict) else []
    out: list[tuple[str, dict[str, str]]] = []
    seen = {*taken, FINAL, USER_TASK}
    for s in steps:
        if not isinstance(s, dict) or not isinstance(s.get("id"), str):
            continue
        nid = unique_id(s["id"], seen)
        seen.add(nid)
        outs: dict[str, str] = {}
        for o in s.get("outputs", []):
            if isinstance(o, dict) and isinstance(o.get("name"), str):
                outs.setdefault(o["name"], str(o.get("type", "string")))
        if outs:
            out.append((nid, outs))
    return out


def make_node(
    nid: str, outputs: dict[str, str], reply: dict[str, Any], *, with_vfs: bool = True
) -> dict[str, Any]:
    """A plan node from a node reply: inputs without repeats and with every input a check
    names, checks as VFs named after the check (numbered when one repeats), criteria as the
    judge's VFs (`criterion_1`, ...)."""
    inputs = list(dict.fromkeys(r for r in reply.get("inputs", []) if isinstance(r, str)))
    node: dict[str, Any] = {
        "id": nid,
        "instruction": str(reply.get("instruction", "")).strip(),
        "inputs": inputs,
        "outputs": dict(outputs),
    }
    if not with_vfs:
        return node
    vfs: list[dict[str, Any]] = []
    names: set[str] = set()
    for c in reply.get("checks", []):
        if not isinstance(c, dict) or not isinstance(c.get("check"), str):
            continue
        args = copy.deepcopy(c.get("args") or {})
        spec = CATALOG.get(c["check"])
        for a, kind in spec.args.items() if spec else ():
            ref = args.get(a)
            if (
                kind == "value"
                and isinstance(ref, str)
                and ref not in outputs
                and ref not in inputs
            ):
                inputs.append(ref)
        name = unique_id(c["check"], names)
        names.add(name)
        vfs.append({"name": name, "type": "check", "check": c["check"], "args": args})
    for i, text in enumerate(reply.get("criteria", []), 1):
        if isinstance(text, str) and text.strip():
            vfs.append({"name": f"criterion_{i}", "type": "llm", "content": text.strip()})
    node["verification"] = vfs
    return node


def replies_of(plan: Plan, domain: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The replies the staged planner would have written for `plan`: the outline's steps (the
    nodes before the final one, in an order their inputs allow, each with its typed outputs)
    and each node's instruction, inputs, checks and criteria (the final node as `final`, its
    one output as `answer`): the inverse of `make_node`. A `ValueError` listing what the
    staged form cannot say: a Python VF, a check outside the domain's catalog, an id or type
    its grammar does not admit, a final node with more than one output."""
    problems: list[str] = []
    final = plan.final_node()
    if len(final.outputs) != 1:
        problems.append(f"the final node {final.id!r} gives {len(final.outputs)} outputs, not one")
    answer = next(iter(final.outputs), ANSWER)
    order = [n for n in _in_order(plan) if n.id != final.id]
    steps: list[dict[str, Any]] = []
    replies: dict[str, dict[str, Any]] = {}
    for n in order:
        if not re.match(ID_PATTERN, n.id) or n.id == FINAL:
            problems.append(f"node id {n.id!r} is not one the outline's grammar admits")
        outs = []
        for name, kind in n.outputs.items():
            if not re.match(ID_PATTERN, name) or kind not in OUTPUT_TYPES[domain]:
                problems.append(f"node {n.id!r}: output {name}: {kind} is not a {domain} step's")
            outs.append({"name": name, "type": kind})
        steps.append({"id": n.id, "outputs": outs})
    for n in [*order, final]:
        checks: list[dict[str, Any]] = []
        criteria: list[str] = []
        for vf in n.verification:
            if isinstance(vf, LLMVF):
                criteria.append(vf.content)
            elif isinstance(vf, CheckVF) and vf.check in DOMAIN_CHECKS[domain]:
                spec = CATALOG.get(vf.check)
                kinds = spec.args if spec is not None else {}
                args = {
                    a: ANSWER if n is final and kinds.get(a) == "output" and v == answer else v
                    for a, v in vf.args.items()
                }
                checks.append(
                    {"check": vf.check, "args": args} if spec or args else {"check": vf.check}
                )
            else:
                what = f"check {vf.check}" if isinstance(vf, CheckVF) else f"{vf.type} VF"
                problems.append(f"node {n.id!r}: {vf.name} is a {what}, not a {domain} check")
        replies[FINAL if n is final else n.id] = {
            "instruction": n.instruction,
            "inputs": list(n.inputs),
            "checks": checks,
            "criteria": criteria,
        }
    if problems:
        raise ValueError("; ".join(problems))
    return steps, replies


def _in_order(plan: Plan) -> list[Node]:
    """The plan's nodes, each after the nodes it reads, otherwise in the order written."""
    parents: dict[str, set[str]] = {n.id: set() for n in plan.nodes}
    for source, target in plan.edge_set():
        parents.setdefault(target, set()).add(source)
    done: set[str] = set()
    out: list[Node] = []
    while len(out) < len(plan.nodes):
        n = next(n for n in plan.nodes if n.id not in done and parents[n.id] <= done)
        done.add(n.id)
        out.append(n)
    return out
