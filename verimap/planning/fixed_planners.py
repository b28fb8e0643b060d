"""Planners that need no model: a fixed plan (and the ReAct baseline built from one), and an
example wrapper that adds deterministic VFs to another planner's plans."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from verimap.base.failure import FailureContext
from verimap.base.plan import USER_TASK, Node, Plan, PythonVF
from verimap.base.roles import Planner
from verimap.planning.fallback import nonempty_outputs_vf
from verimap.planning.plan import parse_plan

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext


class TemplatePlanner:
    """A fixed plan (or a function of the task), validated once; replanning returns it again.

    `TemplatePlanner.single_node()` is the ReAct baseline: one node that takes the
    whole task and answers it.
    """

    def __init__(self, template: Plan | dict[str, Any] | Callable[[str], Plan | dict[str, Any]]):
        self._fn: Callable[[str], Plan | dict[str, Any]] | None = None
        self._plan: Plan | None = None
        if isinstance(template, Plan | dict):
            self._plan = parse_plan(template)
        else:
            self._fn = template

    async def plan(self, task: str, *, ctx: RunContext) -> Plan:
        if self._fn is not None:
            return parse_plan(self._fn(task))
        assert self._plan is not None
        return self._plan.model_copy(deep=True)

    async def replan(
        self, task: str, previous: Plan, failure: FailureContext, *, ctx: RunContext
    ) -> Plan:
        return await self.plan(task, ctx=ctx)

    @classmethod
    def single_node(
        cls,
        outputs: list[str] | None = None,
        vfs: list[dict[str, Any]] | None = None,
        instruction: str = "Solve the task completely and give the final result.",
        node_id: str = "solve",
    ) -> TemplatePlanner:
        return cls(
            {
                "nodes": [
                    {
                        "id": node_id,
                        "name": "Solve",
                        "instruction": instruction,
                        "inputs": [USER_TASK],
                        "outputs": outputs or ["answer"],
                        "verification": vfs or [],
                    }
                ],
                "edges": [],
            }
        )


class AddVFsPlanner:
    """Example custom planner: wraps another planner and adds deterministic VFs to every node.

    `make_vfs(node)` returns the VFs to add (default: outputs present and non-empty);
    a VF whose name the node already uses is skipped.
    """

    def __init__(self, inner: Planner, make_vfs: Callable[[Node], list[PythonVF]] | None = None):
        self.inner = inner
        self.make_vfs = make_vfs or (lambda n: [nonempty_outputs_vf(n)])

    def _augment(self, plan: Plan) -> Plan:
        data = copy.deepcopy(plan.model_dump(by_alias=True))
        for nd, node in zip(data["nodes"], plan.nodes, strict=True):
            names = {v["name"] for v in nd["verification"]}
            for vf in self.make_vfs(node):
                if vf.name not in names:
                    nd["verification"].append(vf.model_dump())
        return parse_plan(data)

    async def plan(self, task: str, *, ctx: RunContext) -> Plan:
        return self._augment(await self.inner.plan(task, ctx=ctx))

    async def replan(
        self, task: str, previous: Plan, failure: FailureContext, *, ctx: RunContext
    ) -> Plan:
        return self._augment(await self.inner.replan(task, previous, failure, ctx=ctx))
