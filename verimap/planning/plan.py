"""Validating a plan: what a plan a model wrote must satisfy before it runs.

A plan comes from a model, so it is untrusted input. `parse_plan` never raises anything but
`PlanError`, and a `PlanError` lists every problem at once so a planner can repair all of them
in one round. Beside what the schema says, `check_plan` checks the DAG, the references between
nodes, and each Python VF as far as it can be judged before it runs (`vfcheck`).
"""

from __future__ import annotations

import graphlib
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from verimap.base import iotypes
from verimap.base.check_names import CATALOG
from verimap.base.plan import USER_TASK, CheckVF, Edge, Node, Plan, PlanError, PythonVF
from verimap.planning.vfcheck import vf_problems

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")  # used with fullmatch: `$` admits a final "\n"


def _pydantic_problems(err: ValidationError, data: Any) -> list[str]:
    problems = []
    for e in err.errors():
        loc = list(e["loc"])
        where = ""
        if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
            try:
                nid = data["nodes"][loc[1]].get("id")
            except Exception:
                nid = None
            where = f"node {nid!r}" if nid else f"nodes[{loc[1]}]"
            rest = ".".join(
                str(x) for x in loc[2:] if not isinstance(x, str) or x not in ("python", "llm")
            )
            where = f"{where} {rest}".strip()
        else:
            where = ".".join(str(x) for x in loc) or "plan"
        problems.append(f"{where}: {e['msg']}")
    return problems


def check_plan(plan: Plan) -> list[str]:
    """Semantic problems a schema cannot express."""
    problems: list[str] = []
    ids = [n.id for n in plan.nodes]
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            problems.append(f"duplicate node id {i!r}")
        seen.add(i)
        if i == USER_TASK:
            problems.append(f"{USER_TASK!r} is reserved and cannot be a node id")
        elif not _IDENT.fullmatch(i):
            problems.append(f"node id {i!r} must be an identifier (letters, digits, _ or -)")
    by_id = {n.id: n for n in plan.nodes}

    for n in plan.nodes:
        for o, spec in n.outputs.items():
            if not o.isidentifier():
                problems.append(f"node {n.id!r}: output name {o!r} is not an identifier")
            if (why := iotypes.type_problem(spec)) is not None:
                problems.append(f"node {n.id!r}: output {o!r}: {why}")
        for r in n.inputs:
            if r == USER_TASK:
                continue
            if "." not in r:
                owners = [m.id for m in plan.nodes if r in m.outputs and m.id != n.id]
                hint = f"; did you mean {owners[0] + '.' + r!r}?" if len(owners) == 1 else ""
                problems.append(
                    f"node {n.id!r}: input {r!r} must be {USER_TASK!r} or '<node_id>.<var>'{hint}"
                )
                continue
            src, var = r.split(".", 1)
            if src == n.id:
                problems.append(f"node {n.id!r}: input {r!r} refers to the node itself")
            elif src == USER_TASK:
                problems.append(
                    f"node {n.id!r}: input {r!r}: {USER_TASK} has no variables; use {USER_TASK!r}"
                )
            elif src not in by_id:
                problems.append(f"node {n.id!r}: input {r!r} names unknown node {src!r}")
            elif var not in by_id[src].outputs:
                problems.append(
                    f"node {n.id!r}: input {r!r}: node {src!r} has no output {var!r} "
                    f"(it outputs {', '.join(by_id[src].outputs)})"
                )
        names: set[str] = set()
        for vf in n.verification:
            if vf.name in names:
                problems.append(f"node {n.id!r}: duplicate verification name {vf.name!r}")
            names.add(vf.name)
            if isinstance(vf, PythonVF):
                problems.extend(vf_problems(n, vf))
            elif isinstance(vf, CheckVF):
                problems.extend(_check_arg_problems(n, vf))

    for e in plan.edges:
        for end in (e.source, e.target):
            if end not in by_id:
                problems.append(f"edge {e.source}->{e.target} names unknown node {end!r}")
        if e.source == e.target:
            problems.append(f"edge {e.source}->{e.target} is a self-loop")
    known_edges = {(s, t) for s, t in plan.edge_set() if s in by_id and t in by_id and s != t}
    read_from = {(p, n.id) for n in plan.nodes for p in n.parent_ids()}
    for s, t in {e.as_tuple() for e in plan.edges}:
        if (t, s) in read_from:
            problems.append(f"edge {s}->{t} contradicts the inputs of {s!r}, which read from {t!r}")

    ts: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for nid in by_id:
        ts.add(nid)
    for s, t in known_edges:
        ts.add(t, s)
    try:
        ts.prepare()
    except graphlib.CycleError as ce:
        cycle = ce.args[1]
        problems.append("cycle: " + " -> ".join(cycle))

    flagged = [n.id for n in plan.nodes if n.final]
    if len(flagged) > 1:
        problems.append(f"several nodes are flagged final: {', '.join(flagged)}")
    elif not flagged:
        with_children = {s for s, _ in known_edges}
        sinks = [n.id for n in plan.nodes if n.id not in with_children]
        if len(sinks) > 1:
            problems.append(
                f"no final node: several nodes ({', '.join(sinks)}) have no node reading their outputs; "
                "every node except the final one must be an input of a later node (as "
                "'<node_id>.<output>'), or flag the final one with \"final\": true"
            )
        elif not sinks and not any(p.startswith("cycle") for p in problems):
            problems.append("no final node")
    return problems


def _check_arg_problems(node: Node, vf: CheckVF) -> list[str]:
    """A catalog check's arguments that name no output of the node (nor, for a `value`, an
    input it reads)."""
    spec = CATALOG.get(vf.check)
    problems = []
    for arg, ref in vf.named_values().items():
        allowed = list(node.outputs)
        if spec is not None and spec.args.get(arg) == "value":
            allowed += [r for r in node.inputs if r != USER_TASK]
        if ref not in allowed:
            problems.append(
                f"node {node.id!r}: check {vf.name!r}: argument {arg!r} names {ref!r}, which is "
                f"not {'an output or input' if len(allowed) > len(node.outputs) else 'an output'}"
                f" of the node (it has {', '.join(allowed)})"
            )
    return problems


def parse_plan(data: str | bytes | Mapping[str, Any] | Plan) -> Plan:
    """Parse and validate; the returned plan has the implied edges made explicit."""
    if isinstance(data, Plan):
        data = data.model_dump(by_alias=True)
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data, strict=False)
        except json.JSONDecodeError as e:
            raise PlanError([f"plan is not valid JSON: {e}"]) from None
    if not isinstance(data, Mapping):
        raise PlanError([f"plan must be a JSON object with 'nodes', got {type(data).__name__}"])
    if not data.get("nodes"):
        raise PlanError(["empty plan: 'nodes' is missing or empty"])
    try:
        plan = Plan.model_validate(data)
    except ValidationError as e:
        raise PlanError(_pydantic_problems(e, data)) from None
    problems = check_plan(plan)
    if problems:
        raise PlanError(problems)
    implied = {(p, n.id) for n in plan.nodes for p in n.parent_ids()}
    explicit = {e.as_tuple() for e in plan.edges}
    plan.edges = [Edge.model_validate({"from": s, "to": t}) for s, t in sorted(explicit | implied)]
    return plan
