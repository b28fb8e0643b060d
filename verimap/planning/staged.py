"""The staged planner: a small model writes a plan and its VFs one stage at a time, each stage
under a grammar that admits only what can be valid.

1. The outline: the steps before the final node, each an id and typed outputs
   (`staged_schema.skeleton_schema`). The planner chooses the granularity: no steps at all is
   a one-node plan the model wrote, with its own checks.
2. Each node in order: its instruction, its inputs (an enum of `USER_TASK` and the outputs
   declared before it, so the DAG is valid by construction), the checks it names from the
   domain's catalog with their arguments, and the criteria its judge checks.

The prompt shows the demonstrations nearest the task (`demos`), written in the same stages:
the domain's shipped ones and those of a pool the run names (`extra_demos`). The assembled
plan goes through the validator and the planner's own checks; their messages go back to the
model once per node they name (`repairs`; a node rewritten word for word, as greedy decoding
often does, is asked for once more, sampled; a node that copied a demonstration is asked for
with the demonstrations out of view), then the plan is refused (`PlanningError`). A replan
keeps every node the failure did not touch (the failed node's ancestors and the branches
beside it) exactly as it was, so their verified results are reused, and rewrites the failed
node and what follows it, with the failure in the prompt.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from verimap.base.events import PlanInvalid
from verimap.base.failure import FailureContext
from verimap.base.messages import (
    AssistantMessage,
    GenerationSettings,
    Message,
    ModelRequest,
    SystemMessage,
    UserMessage,
)
from verimap.base.plan import Plan, PlanError, PlanningError, node_work
from verimap.base.protocols import Model
from verimap.base.purpose import PlanCall
from verimap.base.usage import PLANNER
from verimap.llm.structured import extract_json
from verimap.planning import staged_prompts as sp
from verimap.planning.demos import Demo, DemoPool, nearest
from verimap.planning.domain import infer_domain
from verimap.planning.fallback import with_task_examples
from verimap.planning.plan import parse_plan
from verimap.planning.plan_checks import plan_quality_problems
from verimap.planning.plan_fixes import join_extra_sinks
from verimap.planning.staged_schema import (
    ANSWER_TYPES,
    FINAL,
    make_node,
    node_schema,
    outline,
    skeleton_schema,
)
from verimap.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

# Reply limits per stage: an outline of four steps is about 120 tokens, a node about 200.
OUTLINE_TOKENS = 300
NODE_TOKENS = 450
# The steps an outline may have when the plan's size has no cap.
UNCAPPED_STEPS = 6
_NODE_PROBLEM = re.compile(r"^node '([^']+)'")
_COPIED = re.compile(r"^node '([^']+)' copies the example plan")
Kind = Literal["plan", "replan"]


class StagedPlanner:
    """Plans in stages under the grammar (module docstring). `domain`: the catalog, output
    types and demonstrations used (None: inferred from each task). `max_nodes`/`min_nodes`:
    the plan's size, the final node included. `repairs`: rounds of validator messages sent back
    (each redoes the nodes they name). `min_criteria`: criteria the final node must have (QA's
    final node has one unless set). `demos`: demonstrations shown, the nearest among the
    domain's and those of `extra_demos` when the task is of its domain."""

    def __init__(
        self,
        model: Model,
        tools: ToolRegistry | None = None,
        *,
        domain: str | None = None,
        settings: GenerationSettings | None = None,
        max_nodes: int | None = 4,
        min_nodes: int = 1,
        repairs: int = 1,
        demos: int = 2,
        with_vfs: bool = True,
        min_criteria: int | None = None,
        repeat_temperature: float = 0.7,
        extra_demos: DemoPool | None = None,
    ):
        if max_nodes is not None and max_nodes < min_nodes:
            raise ValueError(f"max_nodes ({max_nodes}) is below min_nodes ({min_nodes})")
        self.model = model
        self.tools = tools
        self.domain = domain
        self.settings = settings or GenerationSettings(temperature=0.0)
        self.max_nodes = max_nodes
        self.min_nodes = min_nodes
        self.repairs = repairs
        self.demos = demos
        self.with_vfs = with_vfs
        self.min_criteria = min_criteria
        self.repeat_temperature = repeat_temperature
        self.extra_demos = extra_demos

    def domain_of(self, task: str) -> str:
        return self.domain or infer_domain(task)

    def _final_criteria(self, domain: str) -> int:
        if not self.with_vfs:
            return 0
        return self.min_criteria if self.min_criteria is not None else int(domain == "qa")

    def _base(self, domain: str) -> list[Message]:
        tools = self.tools.describe() if self.tools is not None and len(self.tools) else ""
        return [SystemMessage(content=sp.system(domain, tools, with_vfs=self.with_vfs))]

    async def _ask(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        name: str,
        kind: Literal["plan", "replan", "repair"],
        task: str,
        ctx: RunContext,
        max_tokens: int,
        temperature: float | None,
    ) -> tuple[Any, str]:
        """One stage's reply under `schema`, parsed; `PlanningError` when it is not JSON (a
        reply cut at the length limit)."""
        settings = self.settings.replace(max_tokens=max_tokens)
        if temperature is not None:
            settings = settings.replace(temperature=temperature)
        resp = await ctx.model(self.model).request(
            ModelRequest(
                messages=messages,
                response_schema=schema,
                schema_name=name,
                role=PLANNER,
                settings=settings,
                purpose=PlanCall(kind=kind, task=task),
            ),
        )
        try:
            if resp.finish_reason == "length":
                raise ValueError(f"the reply was cut off at the length limit ({max_tokens} tokens)")
            return extract_json(resp.content), resp.content
        except ValueError as e:
            problems = [f"{name}: {e}"]
            ctx.emit(PlanInvalid(problems=problems, reply=resp.content[:8000]))
            raise PlanningError("the planner's reply was not JSON", problems) from None

    async def plan(self, task: str, *, ctx: RunContext) -> Plan:
        domain = self.domain_of(task)

        def ask(demos: str) -> str:
            return sp.ASK_OUTLINE.format(demos=demos, task=task, answer_type=ANSWER_TYPES[domain])

        return await self._write(task, domain, ask, [], "plan", ctx)

    async def replan(
        self, task: str, previous: Plan, failure: FailureContext, *, ctx: RunContext
    ) -> Plan:
        """The nodes the failure did not touch, as they were, and the rest rewritten. A rewrite
        that gives the failed node the same work as before is asked for once more, sampled."""
        domain = self.domain_of(task)
        failed = failure.node_id if failure.node_id in previous.by_id else previous.final_node().id
        touched = {failed, *(n.id for n in previous.nodes if failed in previous.ancestors(n.id))}
        kept = [n.model_dump(mode="json") for n in previous.nodes if n.id not in touched]
        listed = "\n".join(
            f"- {n['id']}: {n['instruction']} -> {sp.describe_outputs(n['outputs'])}" for n in kept
        )

        def ask(demos: str) -> str:
            return sp.ASK_REPLAN.format(
                demos=demos,
                task=task,
                failed=failed,
                kept=listed or "(none)",
                failure=failure.render(),
                answer_type=ANSWER_TYPES[domain],
            )

        plan = await self._write(task, domain, ask, kept, "replan", ctx)
        if failed in plan.by_id and node_work(plan, failed) == node_work(previous, failed):
            plan = await self._write(
                task, domain, ask, kept, "replan", ctx, temperature=self.repeat_temperature
            )
        return plan

    def _shown(self, task: str, domain: str) -> list[Demo]:
        return nearest(task, domain, self.demos, self.extra_demos)

    def _demos(self, task: str, domain: str) -> str:
        return sp.render_demos(self._shown(task, domain), with_vfs=self.with_vfs)

    async def _write(
        self,
        task: str,
        domain: str,
        ask: Callable[[str], str],
        kept: list[dict[str, Any]],
        kind: Kind,
        ctx: RunContext,
        temperature: float | None = None,
    ) -> Plan:
        """The outline, then each node, then the validator's word on the whole. `ask` is the
        request with the demonstrations given; a node that copied them is asked for afresh
        without them and without its own copying reply in view."""
        head: list[Message] = [
            *self._base(domain),
            UserMessage(content=ask(self._demos(task, domain))),
        ]
        messages = list(head)
        asked: dict[str, int] = {}
        max_steps = self.max_nodes - 1 - len(kept) if self.max_nodes is not None else UNCAPPED_STEPS
        min_steps = self.min_nodes - 1 - len(kept)
        schema = skeleton_schema(domain, min_steps=max(0, min_steps), max_steps=max(0, max_steps))
        raw, text = await self._ask(
            messages, schema, "outline", kind, task, ctx, OUTLINE_TOKENS, temperature
        )
        messages += [AssistantMessage(content=text)]
        final = (FINAL, sp.answer_outputs(ANSWER_TYPES[domain]))
        steps = [*outline(raw, {n["id"] for n in kept}), final]
        available = [f"{n['id']}.{o}" for n in kept for o in n["outputs"]]
        replies: dict[str, tuple[list[str], dict[str, Any]]] = {}
        for nid, outs in steps:
            asked[nid] = len(messages)
            reply, messages = await self._node(
                task, domain, nid, outs, available, messages, kind, ctx, temperature
            )
            replies[nid] = (list(available), reply)
            available += [f"{nid}.{o}" for o in outs]
        for round_ in range(self.repairs + 1):
            nodes = [
                make_node(nid, outs, replies[nid][1], with_vfs=self.with_vfs) for nid, outs in steps
            ]
            raw_plan = join_extra_sinks({"nodes": [*copy.deepcopy(kept), *nodes]})
            if domain == "programming" and self.with_vfs:
                raw_plan = with_task_examples(raw_plan, task, (ANSWER_TYPES[domain],))
            problems = self._problems(raw_plan, domain, task)
            if not problems:
                return parse_plan(raw_plan)
            ctx.emit(PlanInvalid(problems=problems, reply=json.dumps(raw_plan)[:8000]))
            named = {m[1] for p in problems if (m := _NODE_PROBLEM.match(p))} & set(replies)
            if round_ == self.repairs or not named:
                break
            listed = "\n".join(f"- {p}" for p in problems)
            copied = {m[1] for p in problems if (m := _COPIED.match(p))}
            for nid, outs in steps:
                if nid not in named:
                    continue
                if nid in copied:
                    note = UserMessage(content=sp.REPAIR_AFRESH.format(problems=listed, nid=nid))
                    plain = [*self._base(domain), UserMessage(content=ask(""))]
                    context = [*plain, *messages[len(head) : asked[nid]], note]
                else:
                    repair = UserMessage(content=sp.REPAIR.format(problems=listed, nid=nid))
                    context = [*messages, repair]
                for temp in (temperature, self.repeat_temperature):
                    reply, _ = await self._node(
                        task,
                        domain,
                        nid,
                        outs,
                        replies[nid][0],
                        context,
                        "repair",
                        ctx,
                        temp,
                        ask=nid in copied,
                    )
                    if reply != replies[nid][1]:
                        break
                replies[nid] = (replies[nid][0], reply)
        raise PlanningError("the staged plan is invalid; last problems:", problems)

    async def _node(
        self,
        task: str,
        domain: str,
        nid: str,
        outs: dict[str, str],
        available: list[str],
        messages: list[Message],
        kind: Literal["plan", "replan", "repair"],
        ctx: RunContext,
        temperature: float | None,
        *,
        ask: bool = True,
    ) -> tuple[dict[str, Any], list[Message]]:
        """One node's reply, and the conversation with it."""
        if ask:
            question = sp.ask_node(nid, outs, available, with_vfs=self.with_vfs)
            messages = [*messages, UserMessage(content=question)]
        schema = node_schema(
            domain,
            list(outs),
            available,
            with_vfs=self.with_vfs,
            min_criteria=self._final_criteria(domain) if nid == FINAL else 0,
        )
        raw, text = await self._ask(
            messages, schema, f"node {nid}", kind, task, ctx, NODE_TOKENS, temperature
        )
        reply = raw if isinstance(raw, dict) else {}
        return reply, [*messages, AssistantMessage(content=text)]

    def _problems(self, raw_plan: dict[str, Any], domain: str, task: str) -> list[str]:
        """The validator's problems, then the planner's: an output of the task's type, and no
        output of a demonstration named (`demo.output` where this plan has no such node:
        copied from the example, it means nothing here)."""
        try:
            plan = parse_plan(raw_plan)
        except PlanError as e:
            return e.problems
        own = {f"{n.id}.{o}" for n in plan.nodes for o in n.outputs}
        shown = self._shown(task, domain)
        copied = {f"{st['id']}.{o['name']}" for d in shown for st in d.steps for o in st["outputs"]}
        return plan_quality_problems(
            plan,
            demo_markers=sorted(copied - own),
            require_vfs=self.with_vfs,
            answer_types=(ANSWER_TYPES[domain],),
        )
