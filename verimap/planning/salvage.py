"""A model's plan kept without the Python VFs that are all that is wrong with it."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from verimap.base.plan import Plan, PlanError
from verimap.planning.fallback import nonempty_outputs_vf
from verimap.planning.plan import parse_plan
from verimap.planning.vfcheck import UNDECLARED_OUTPUT

_VF_PROBLEM = re.compile(r"^node '([^']+)': python VF '([^']+)'(.*)$", re.S)


def salvage(
    raw: Any, problems: list[str], check: Callable[[Plan], list[str]], write_vfs: bool = True
) -> Plan | None:
    """The plan without the Python VFs its problems name, when those VFs are all that is
    wrong with it: a VF that cannot run or checks nothing adds no safety, and a repair round
    costs a whole plan (minutes on a small model, which seldom fixes it).
    A node left without VFs gets the deterministic non-empty check, on top of its typed
    outputs (with `write_vfs`). `check`: the planner's own checks, which the plan must pass.
    The dropped VFs are recorded on the plan."""
    reasons: dict[tuple[str, str], str] = {}
    for p in problems:
        m = _VF_PROBLEM.match(p)
        if m is None:
            return None
        reasons.setdefault((m.group(1), m.group(2)), m.group(3).strip(" :"))
    bad = set(reasons)
    if not bad or not isinstance(raw, dict) or not isinstance(raw.get("nodes"), list):
        return None
    raw = copy.deepcopy(raw)
    for n in raw["nodes"]:
        if isinstance(n, dict) and isinstance(n.get("verification"), list):
            n["verification"] = [
                v
                for v in n["verification"]
                if not (isinstance(v, dict) and (n.get("id"), v.get("name")) in bad)
            ]
    try:
        plan = parse_plan(raw)
    except PlanError:
        return None
    final = plan.final_node().id
    if any(n == final and UNDECLARED_OUTPUT in why for (n, _), why in reasons.items()):
        # The final node's VFs check an output it does not give: the node that gives the
        # answer got lost (e.g. fell into a VF string, leaving only an extraction node). The
        # fallback plan at least asks for the whole task.
        return None
    for node in plan.nodes:
        if not node.verification and write_vfs:
            node.verification.append(nonempty_outputs_vf(node))
    if check(plan):
        return None
    plan.dropped_vfs.extend(f"{n}.{vf} ({why[:120]})" for (n, vf), why in reasons.items())
    return plan
