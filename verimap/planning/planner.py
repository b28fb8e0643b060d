"""Planners turn a task into a verified-plan DAG, and a failure into a better plan.

`Planner` is a protocol (`verimap.base.roles`): anything with `plan(task, *, ctx)` and
`replan(task, previous, failure, *, ctx)` coroutines returning a `Plan` works with the
coordinator. `ctx` is the run's
`RunContext`: a planner meters its model calls with `ctx.model(...)` and reports rejected plans
with `ctx.emit(PlanInvalid(...))`. Shipped: `LLMPlanner` here (the paper's verification-aware
planner); `TemplatePlanner` and `AddVFsPlanner` in `verimap.planning.fixed_planners`. What
`LLMPlanner` checks in a model's plan is in `plan_checks`, the rewrites it makes in
`plan_fixes`, the plan it falls back to in `fallback`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from verimap.base.events import PlanInvalid
from verimap.base.failure import FailureContext
from verimap.base.messages import (
    AssistantMessage,
    GenerationSettings,
    Message,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    UserMessage,
)
from verimap.base.plan import Plan, PlanError, PlanningError
from verimap.base.protocols import Model
from verimap.base.purpose import PlanCall
from verimap.base.usage import PLANNER
from verimap.llm.structured import extract_json
from verimap.planning import prompts
from verimap.planning.demos import DemoFileError, DemoPool, of_domain
from verimap.planning.domain import infer_domain
from verimap.planning.fallback import fallback_plan, whole_task_plan, with_task_examples
from verimap.planning.plan import parse_plan
from verimap.planning.plan_checks import (
    plan_quality_problems,
    planning_schema,
    repeated_failure_problems,
)
from verimap.planning.plan_fixes import fix_raw_plan
from verimap.planning.salvage import salvage
from verimap.planning.staged import StagedPlanner
from verimap.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext


# Replies cut at the length limit in a row after which the planner stops asking.
MAX_CUT_REPLIES = 2


def _without_vfs(raw: Any) -> Any:
    if isinstance(raw, dict) and isinstance(raw.get("nodes"), list):
        raw["nodes"] = [prompts.without_vfs(n) if isinstance(n, dict) else n for n in raw["nodes"]]
    return raw


# A plan's reply limit unless a run's config says otherwise.
# A plan never holds six line breaks in a row; a small model under the JSON grammar that leaves a
# string open writes blank lines until the length limit, so that run stops the reply.
BLANK_RUN = "\n" * 6
PLANNER_SETTINGS = GenerationSettings(max_tokens=2048, stop=(BLANK_RUN,))


class PlannerOptions(BaseModel):
    """How an `LLMPlanner` plans; `verimap.wiring` derives a run's from its config and policies.

    `write_vfs=False` plans without verification functions (the paper's MAP and MAP-V
    baselines): no VF rules in the prompt or the demonstration, none in the schema, and any a
    model writes anyway are dropped, so they cost no tokens and appear in no statistics.
    A replan that leaves the failed node and its ancestors as they were goes back to the model
    once, sampled at `repeat_temperature` (see `repeated_failure_problems`), and is used if the
    answer is no better; `challenge_repeats=False` takes it as it comes.
    With `fallback`, a task the model cannot plan within `max_repairs` still runs, as the
    one-node `fallback_plan`; `fallback=False` raises `PlanningError` (the paper's behaviour).
    With `think_first`, the model first works the task out in free text and then writes the
    plan from its solution.
    `answer_types` (e.g. `("code",)` for HumanEval): the types the task's answer can have; a
    plan whose final node outputs none of them is sent back, since its answer could not be
    scored. With `task_examples` and `answer_types` led by `code`, the final node is checked
    against the task's own examples (`fallback.with_task_examples`; off: the paper's plans
    carry only the planner's VFs).
    `max_nodes`: the most nodes a plan may have; the prompt says so and a plan with more is sent
    back like any invalid one (None: no cap, as the paper). 1 means the whole task as one node
    (`fallback.whole_task_plan`, with the checks its kind gives for free), without a model call;
    the plan names the rule that made it (`one_node_rule`), never a fallback that did not happen.
    `fix_plans`: repair common mistakes of a model's plan before validating it (`plan_fixes`;
    off: the paper's plans are taken as written).
    `domain` (math, programming, qa): the kind of the tasks, which sets the demonstration and
    the one-node plan's answer type; None infers it from each task (`infer_domain`).
    `demo`: the demonstration shown (None: the domain's built-in one, unless `use_demo` is off).
    `decoding="staged"`: the model writes the plan in stages under the grammar, its VFs from the
    catalog of checks (`staged.StagedPlanner`, with `max_nodes` and `min_nodes` counting the
    final node, `max_repairs` rounds of validator messages); it is always asked, even under
    `max_nodes=1`, for then it still writes the node and its VFs. A pool of demonstrations
    shown beside the domain's shipped ones is no option but the planner's `demos`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    demo: str | None = None
    use_demo: bool = True
    max_repairs: int = 3
    settings: GenerationSettings = PLANNER_SETTINGS
    quality_checks: bool = True
    require_vfs: bool = True
    repeat_temperature: float = 0.7
    domain: str | None = None
    show_schema: bool = False
    write_vfs: bool = True
    challenge_repeats: bool = True
    fallback: bool = True
    think_first: bool = False
    think_max_tokens: int = 512
    answer_types: tuple[str, ...] = ()
    task_examples: bool = True
    max_nodes: int | None = None
    fix_plans: bool = True
    one_node_rule: str = "one-node plan (max_nodes=1)"
    decoding: Literal["whole", "staged"] = "whole"
    min_nodes: int = 1


def shown_pool(
    extra: DemoPool | None, options: PlannerOptions, name: str = "a pool of demonstrations"
) -> DemoPool | None:
    """`extra` when a planner with `options` shows it: the staged planner's
    (`decoding="staged"`, the small-model-planner policy's), of the options' domain when one is
    set (`demos.of_domain`); else a `DemoFileError` calling the pool `name`."""
    if extra is None:
        return None
    if options.decoding != "staged":
        raise DemoFileError(
            f"{name}: only the staged planner shows a pool of demonstrations (--policy "
            "small-model-planner); this run's planner writes the plan whole"
        )
    return of_domain(extra, options.domain, name)


class LLMPlanner:
    """The verification-aware planner: tools, task and a demonstration in; a validated plan out.

    Invalid plans go back to the model with every validation message, up to
    `options.max_repairs` times; then the one-node fallback plan, or `PlanningError`.
    """

    def __init__(
        self,
        model: Model,
        tools: ToolRegistry | None = None,
        options: PlannerOptions | None = None,
        demos: DemoPool | None = None,
    ):
        """A planner on `model`, showing it `tools`, planning as `options` say (`PlannerOptions`);
        the staged planner also shows `demos`, a pool read when the run started, beside the
        domain's shipped demonstrations (`shown_pool`: a `DemoFileError` when it would not)."""
        o = options or PlannerOptions()
        self.options = o
        self.model = model
        self.think_first = o.think_first
        self.think_max_tokens = o.think_max_tokens
        self.domain = o.domain
        self.fallback = o.fallback
        self.tools = tools
        self.write_vfs = o.write_vfs
        require_vfs = o.require_vfs and o.write_vfs
        builtin = o.demo is None and o.use_demo
        self.demo = (
            o.demo
            if o.demo is not None
            else (
                prompts.default_demo(o.domain or "math", with_vfs=o.write_vfs)
                if o.use_demo
                else None
            )
        )
        self.demo_markers = prompts.copy_markers(o.domain or "math") if builtin else []
        # Without a domain, the built-in demonstration follows each task's inferred one.
        self.demo_per_task = builtin and o.domain is None
        self.max_repairs = o.max_repairs
        self.settings = o.settings
        self.quality_checks = o.quality_checks
        self.require_vfs = require_vfs
        self.repeat_temperature = o.repeat_temperature
        self.schema = planning_schema(require_vfs=require_vfs, with_vfs=o.write_vfs)
        self.show_schema = o.show_schema
        self.challenge_repeats = o.challenge_repeats
        self.answer_types = o.answer_types
        self.task_examples = o.task_examples
        self.max_nodes = o.max_nodes
        self.fix_plans = o.fix_plans
        self.one_node_rule = o.one_node_rule
        extra_demos = shown_pool(demos, o)
        self.staged = (
            StagedPlanner(
                model,
                tools,
                domain=o.domain,
                settings=o.settings,
                max_nodes=o.max_nodes,
                min_nodes=o.min_nodes,
                repairs=o.max_repairs,
                with_vfs=o.write_vfs,
                repeat_temperature=o.repeat_temperature,
                extra_demos=extra_demos,
            )
            if o.decoding == "staged"
            else None
        )

    def system_prompt(self) -> str:
        tools = (
            prompts.TOOLS_SECTION.format(tools=self.tools.describe())
            if self.tools and len(self.tools)
            else ""
        )
        size_rule = (
            prompts.SIZE_RULE
            if self.max_nodes is None
            else prompts.SIZE_CAP_RULE.format(max_nodes=self.max_nodes)
        )
        return prompts.PLANNER_SYSTEM.format(
            tools_section=tools, size_rule=size_rule, **prompts.VF_PROMPT_PARTS[self.write_vfs]
        )

    def plan_messages(self, task: str) -> list[Message]:
        if self.demo_per_task:
            self.demo = prompts.default_demo(self.domain_of(task), with_vfs=self.write_vfs)
        demo = prompts.DEMO_SECTION.format(demo=self.demo) if self.demo else ""
        user = prompts.PLANNER_USER.format(
            demo_section=demo, task=task, schema_section=self._schema_section()
        )
        return [SystemMessage(content=self.system_prompt()), UserMessage(content=user)]

    def replan_messages(self, task: str, previous: Plan, failure: FailureContext) -> list[Message]:
        msgs = self.plan_messages(task)[:1]
        if self.demo:
            msgs.append(UserMessage(content=prompts.DEMO_SECTION.format(demo=self.demo).strip()))
            msgs.append(AssistantMessage(content="Understood."))
        msgs.append(
            UserMessage(
                content=prompts.REPLANNER_USER.format(
                    task=task,
                    previous=self._as_written(previous),
                    failure=failure.render(),
                    fixable=prompts.REPLAN_FIXABLE[self.write_vfs],
                    schema_section=self._schema_section(),
                ),
            )
        )
        return msgs

    def _as_written(self, plan: Plan) -> str:
        """The plan in the shape the model answers in: shown fields it may not write (edges,
        final flags, weights), small models copy, e.g. as a node named "edges"."""
        defs = self.schema["$defs"]
        node_keys = set(defs["Node"]["properties"])
        vf_keys = {k for d in ("PythonVF", "LLMVF") for k in defs[d]["properties"]}
        vf_keys |= {k for v in defs["CheckVF"]["anyOf"] for k in v["properties"]}
        vf_keys.discard("weight")
        nodes = []
        for n in json.loads(plan.to_json())["nodes"]:
            node = {k: v for k, v in n.items() if k in node_keys}
            if "verification" in node:
                node["verification"] = [
                    {k: v for k, v in vf.items() if k in vf_keys} for vf in node["verification"]
                ]
            nodes.append(node)
        return json.dumps({"nodes": nodes}, indent=2)

    def _schema_section(self) -> str:
        """The schema already constrains the reply; printed too, it costs ~1,000 prompt tokens
        and small models copy its titles into plans, so printing it is opt-in."""
        return (
            prompts.SCHEMA_SECTION.format(schema=json.dumps(self.schema))
            if self.show_schema
            else ""
        )

    async def _solicit(
        self,
        messages: list[Message],
        challenge: Callable[[Plan], list[str]] | None = None,
        ctx: RunContext | None = None,
        task: str | None = None,
        kind: Literal["plan", "replan", "repair"] = "plan",
    ) -> Plan:
        """`challenge`: problems that send a valid plan back once, sampled more freely; if the
        next reply is no better (invalid, or no repairs left), the challenged plan is taken.
        Each rejected reply is reported to `ctx` as a `plan_invalid` event. `kind`: what the
        first request is for; each one after it repairs a rejected reply."""
        model = ctx.model(self.model) if ctx is not None else self.model
        base = messages
        challenged: Plan | None = None
        responses: list[ModelResponse] = []
        problems: list[str] = []
        seen_problems: list[list[str]] = []
        stalled = False
        temperature = self.settings.temperature
        for round_ in range(self.max_repairs + 1):
            fresh_challenge = False
            sampled = (temperature or 0.0) >= self.repeat_temperature
            purpose = PlanCall(kind=kind if round_ == 0 else "repair", task=task or "")
            resp = await model.request(
                ModelRequest(
                    messages=messages,
                    response_schema=self.schema,
                    schema_name="plan",
                    role=PLANNER,
                    settings=self.settings.replace(temperature=temperature),
                    purpose=purpose,
                ),
            )
            if any(r.content == resp.content for r in responses):
                # A model that repeats a rejected plan word for word (greedy decoding does) gets
                # sampled more freely next time, or every repair round is wasted.
                temperature = max(temperature or 0.0, self.repeat_temperature)
            responses.append(resp)
            raw: Any = None
            if [r.finish_reason for r in responses[-MAX_CUT_REPLIES:]] == [
                "length"
            ] * MAX_CUT_REPLIES:
                # A model in a repetition loop stays in it: each further repair costs a whole
                # reply at the length limit and brings nothing.
                problems = [f"{MAX_CUT_REPLIES} replies in a row were cut off at the length limit"]
                break
            try:
                if resp.finish_reason == "length":
                    # A cut reply's first balanced `{...}` is some inner object: name the real cause.
                    n = resp.usage.completion_tokens or self.settings.max_tokens
                    raise PlanError(
                        [
                            f"the reply was cut off at the length limit ({n} tokens) before the plan "
                            "was complete; write a shorter plan (fewer nodes, short names and VFs) and "
                            "never repeat a phrase"
                        ]
                    )
                raw = extract_json(resp.content)
                if self.fix_plans:
                    raw = fix_raw_plan(raw, self.answer_types)
                if task is not None and self.write_vfs and self.task_examples:
                    raw = with_task_examples(raw, task, self.answer_types)
                if not self.write_vfs:
                    raw = _without_vfs(raw)
                plan = parse_plan(raw)
            except ValueError as e:
                problems = (
                    e.problems if isinstance(e, PlanError) else [f"reply is not a JSON plan: {e}"]
                )
                problems += [p for p in self._quality_of_raw(raw) if p not in problems]
            else:
                problems = self.check(plan)
                if not problems:
                    if challenge is None or challenged is not None:
                        return plan
                    problems = challenge(plan)
                    if not problems:
                        return plan
                    challenged, fresh_challenge = plan, True
                    temperature = max(temperature or 0.0, self.repeat_temperature)
            problems = list(dict.fromkeys(problems))
            if ctx is not None:
                ctx.emit(PlanInvalid(problems=problems, reply=resp.content[:8000]))
            if challenged is not None and not fresh_challenge:
                return challenged
            if (salvaged := salvage(raw, problems, self.check, self.write_vfs)) is not None:
                return salvaged
            if problems in seen_problems:
                # The repair changed nothing the validator sees: once more, sampled more
                # freely; after that every round costs a whole plan (minutes on a small
                # model) and the fallback plan is the better use of the time.
                if sampled:
                    stalled = True
                    break
                temperature = max(temperature or 0.0, self.repeat_temperature)
            seen_problems.append(problems)
            # Only the latest rejected reply goes back, so the prompt stays bounded; a reply cut
            # at the limit is usually a repetition loop, and showing it primes another one.
            shown = resp.content or ""
            if resp.finish_reason == "length":
                shown = shown[:1500] + " ... [cut off]"
            repair = prompts.PLAN_REPAIR.format(problems="\n".join(f"- {p}" for p in problems))
            messages = [*base, AssistantMessage(content=shown), UserMessage(content=repair)]
        if challenged is not None:
            return challenged
        why = (
            "the same problems came back after a sampled repair"
            if stalled
            else f"no valid plan after {self.max_repairs} repair(s)"
        )
        raise PlanningError(f"{why}; last problems:", problems, responses)

    def _quality_of_raw(self, raw: Any) -> list[str]:
        """Quality problems of a plan that failed validation, so one round can fix everything."""
        try:
            return self.check(Plan.model_validate(raw))
        except (ValidationError, TypeError):
            return []

    def check(self, plan: Plan) -> list[str]:
        """The planner's own checks on a valid plan: its size cap, and with `quality_checks`
        the problems `plan_quality_problems` finds."""
        problems = []
        if self.max_nodes is not None and len(plan.nodes) > self.max_nodes:
            problems.append(
                f"the plan has {len(plan.nodes)} nodes, more than the {self.max_nodes} allowed; "
                "let one node do several steps of the work"
            )
        if self.quality_checks:
            problems += plan_quality_problems(
                plan,
                demo_markers=self.demo_markers,
                require_vfs=self.require_vfs,
                answer_types=self.answer_types,
            )
        return problems

    async def _thought_out(
        self, messages: list[Message], task: str, ctx: RunContext | None = None
    ) -> list[Message]:
        """`messages` with the model's free-text solution and the request for the plan after it.
        The reasoning call's prompt is a prefix of the plan call's, so a prompt cache serves it."""
        if not self.think_first:
            return messages
        *head, last = messages
        ask = last.model_copy(update={"content": f"{last.content}\n\n{prompts.PLAN_THINK}"})
        model = ctx.model(self.model) if ctx is not None else self.model
        thought = await model.request(
            ModelRequest(
                messages=[*head, ask],
                role=PLANNER,
                purpose=PlanCall(kind="think", task=task),
                settings=self.settings.replace(max_tokens=self.think_max_tokens),
            ),
        )
        return [
            *head,
            ask,
            AssistantMessage(content=(thought.content or "").strip()),
            UserMessage(content=prompts.PLAN_AFTER_THINKING),
        ]

    def domain_of(self, task: str) -> str:
        return self.domain or infer_domain(task)

    async def plan(self, task: str, *, ctx: RunContext) -> Plan:
        if self.max_nodes == 1 and self.staged is None:
            return self._one_node(task)
        try:
            if self.staged is not None:
                return await self.staged.plan(task, ctx=ctx)
            messages = await self._thought_out(self.plan_messages(task), task, ctx)
            return await self._solicit(messages, ctx=ctx, task=task)
        except PlanningError as e:
            if not self.fallback:
                raise
            return fallback_plan(task, self.domain_of(task), reason=str(e), with_vfs=self.write_vfs)

    async def replan(
        self, task: str, previous: Plan, failure: FailureContext, *, ctx: RunContext
    ) -> Plan:
        """With no valid new plan, the one-node fallback runs; a failed fallback runs again
        (a retry at its node may still pass, and the iteration cap bounds it)."""

        if self.max_nodes == 1 and self.staged is None:
            return self._one_node(task)

        def repeats(plan: Plan) -> list[str]:
            return repeated_failure_problems(previous, plan, failure)

        try:
            if self.staged is not None:
                return await self.staged.replan(task, previous, failure, ctx=ctx)
            messages = self.replan_messages(task, previous, failure)
            messages = await self._thought_out(messages, task, ctx)
            challenge = repeats if self.challenge_repeats else None
            return await self._solicit(messages, challenge, ctx, task, "replan")
        except PlanningError as e:
            if not self.fallback:
                raise
            if previous.fallback_reason is not None:
                return previous
            return fallback_plan(task, self.domain_of(task), reason=str(e), with_vfs=self.write_vfs)

    def _one_node(self, task: str) -> Plan:
        """Made by a rule, not planned: its VFs are built in, so they are never sent to a model
        for repair (design/decisions.md, D04)."""
        plan = whole_task_plan(task, self.domain_of(task), with_vfs=self.write_vfs)
        plan.rule = self.one_node_rule
        return plan

    async def repair(self, task: str, plan: Plan, problems: list[str], *, ctx: RunContext) -> Plan:
        """One plan sent back with problems found outside the planner (e.g. vacuous VFs)."""
        messages = [
            *self.plan_messages(task),
            AssistantMessage(content=self._as_written(plan)),
            UserMessage(
                content=prompts.PLAN_REPAIR.format(problems="\n".join(f"- {p}" for p in problems))
            ),
        ]
        return await self._solicit(messages, ctx=ctx, task=task, kind="repair")
