"""Planners turn a task into a verified-plan DAG, and a failure into a better plan.

`Planner` is a protocol: anything with `plan(task)` and `replan(task, previous,
failure)` coroutines returning a `Plan` works with the coordinator. Shipped:
`LLMPlanner` (the paper's verification-aware planner), `TemplatePlanner` (a fixed
plan; `single_node` builds the ReAct baseline) and `AddVFsPlanner`, an example of a
custom planner that wraps another and adds deterministic VFs to every node.
"""

from __future__ import annotations

import contextvars
import copy
import json
import re
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field, ValidationError

from verimap import iotypes, prompts
from verimap.accounting import call_model
from verimap.errors import VerimapError
from verimap.llm.base import Message, Model, ModelRequest, ModelResponse
from verimap.llm.structured import extract_json
from verimap.plan import USER_TASK, Node, Plan, PlanError, PythonVF, parse_plan, plan_json_schema
from verimap.plan_fixes import fix_raw_plan
from verimap.result import VFVerdict, clip
from verimap.tools import ToolRegistry
from verimap.usage import PLANNER

# Set by the coordinator for the duration of a run, so rejected plans show up as events.
invalid_plan_hook: contextvars.ContextVar[Callable[[list[str], str], None] | None] = (
    contextvars.ContextVar("verimap_invalid_plan_hook", default=None)
)


class AncestorContext(BaseModel):
    node_id: str
    instruction: str
    outputs: dict[str, Any] | None = None
    status: str = ""


class FailureContext(BaseModel):
    """Why the previous plan failed: the failed node, what it saw and produced, every VF verdict,
    and its ancestors (two generations by default) with their outputs."""

    node_id: str
    instruction: str = ""
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] | None = None
    error: str | None = None
    verdicts: list[VFVerdict] = Field(default_factory=list)
    attempts: int = 0
    ancestors: list[AncestorContext] = Field(default_factory=list)

    @property
    def kind(self) -> str:
        """What failed: "verification" (a VF said no), "vf_error" (a VF could not run: its own
        bug), or "executor" (no answer of the declared shape reached verification)."""
        if any(v.outcome == "FAIL" for v in self.verdicts):
            return "verification"
        if any(not v.passed for v in self.verdicts):
            return "vf_error"
        return "executor"

    def render(self, limit: int = 4000) -> str:
        """Only what failed (passing VFs are counted, not shown), each part cut to fit."""
        d = lambda v, n=600: clip(json.dumps(v, ensure_ascii=False, default=str), n)  # noqa: E731
        lines = [
            f"Node {self.node_id!r} failed after {self.attempts} attempt(s).",
            f"Instruction: {self.instruction}",
            f"Inputs: {d(self.inputs, 1200)}",
            f"Last outputs: {d(self.outputs, 1200)}",
        ]
        if self.error:
            lines.append(f"Error: {clip(self.error, 600)}")
        failed = [v for v in self.verdicts if not v.passed]
        if failed:
            passed = len(self.verdicts) - len(failed)
            lines.append(
                "Verification functions that failed on the last attempt"
                + (f" ({passed} other(s) passed):" if passed else ":")
            )
            per = max(300, limit // (2 * len(failed)))
            lines.extend("  " + clip(v.feedback(), per).replace("\n", "\n  ") for v in failed)
        if self.ancestors:
            lines.append("Ancestor nodes (nearest first):")
            for a in self.ancestors:
                lines.append(f"  - {a.node_id} [{a.status}]: {a.instruction} -> {d(a.outputs)}")
        return clip("\n".join(lines), limit)


@runtime_checkable
class Planner(Protocol):
    """Write your own: return a `Plan` (use `parse_plan` to validate) from both coroutines."""

    async def plan(self, task: str) -> Plan: ...

    async def replan(self, task: str, previous: Plan, failure: FailureContext) -> Plan: ...


class PlanningError(VerimapError, RuntimeError):
    """The planner gave no valid plan within its repair attempts."""

    def __init__(
        self, message: str, problems: list[str], responses: list[ModelResponse] | None = None
    ):
        super().__init__(
            message + ("\n" + "\n".join(f"- {p}" for p in problems) if problems else "")
        )
        self.problems = problems
        self.responses = responses or []


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
        if any(m in text for m in demo_markers):
            problems.append(
                f"node {n.id!r} copies the example plan (its instruction or VFs belong to the "
                "example task); write instructions and VFs for THIS task"
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
    for word, and small models often hand back the failed plan unchanged (seen on GSM8K: the same
    plan in all five iterations). With a sampling executor a rerun may still pass, so the planner
    asks once for a change but does not refuse the plan."""
    nid = failure.node_id
    if nid not in plan.by_id or all(v.passed for v in failure.verdicts):
        return []

    def work(p: Plan, node_id: str) -> dict[str, Any] | None:
        node = p.by_id.get(node_id)
        return node.model_dump(exclude={"name"}) if node else None

    if any(work(previous, i) != work(plan, i) for i in (nid, *plan.ancestors(nid))):
        return []
    return [
        f"node {nid!r} and every node it depends on are exactly as in the plan that failed, so "
        "running them again repeats what already failed; change what caused the failure"
    ]


# Replies cut at the length limit in a row after which the planner stops asking.
MAX_CUT_REPLIES = 2
_VF_PROBLEM = re.compile(r"^node '([^']+)': python VF '([^']+)'(.*)$", re.S)


def _without_vfs(raw: Any) -> Any:
    if isinstance(raw, dict) and isinstance(raw.get("nodes"), list):
        raw["nodes"] = [prompts.without_vfs(n) if isinstance(n, dict) else n for n in raw["nodes"]]
    return raw


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
    return schema


class LLMPlanner:
    """The verification-aware planner: tools, task and a demonstration in; a validated plan out.

    Invalid plans go back to the model with every validation message, up to
    `max_repairs` times; then `PlanningError`.
    """

    def __init__(
        self,
        model: Model,
        tools: ToolRegistry | None = None,
        demo: str | None = None,
        *,
        use_demo: bool = True,
        max_repairs: int = 3,
        temperature: float | None = None,
        max_tokens: int | None = 2048,
        on_invalid: Callable[[list[str]], None] | None = None,
        quality_checks: bool = True,
        require_vfs: bool = True,
        repeat_temperature: float = 0.7,
        domain: str = "math",
        show_schema: bool = False,
        write_vfs: bool = True,
        challenge_repeats: bool = True,
        fallback: bool = True,
        think_first: bool = False,
        think_max_tokens: int = 512,
        answer_types: tuple[str, ...] = (),
    ):
        """`write_vfs=False` plans without verification functions (the paper's MAP and MAP-V
        baselines): no VF rules in the prompt or the demonstration, none in the schema, and any
        a model writes anyway are dropped, so they cost no tokens and appear in no statistics.
        A replan that leaves the failed node and its ancestors as they were goes back to the model
        once, sampled at `repeat_temperature` (see `repeated_failure_problems`), and is used if
        the answer is no better; `challenge_repeats=False` takes it as it comes.
        With `fallback` (the default), a task the model cannot plan within `max_repairs` still
        runs, as the one-node `fallback_plan`; `fallback=False` raises `PlanningError` (the
        paper's behaviour).
        With `think_first`, the model first works the task out in free text and then writes the
        plan from its solution (a small model reasoning inside the plan's JSON writes wrong
        formulas into instructions and VFs alike). Off by default: on the local 1.5B it made
        plans longer and invalid (6 of 6 GSM8K tasks fell back to the one-node plan).
        `answer_types` (e.g. `("code",)` for HumanEval): the types the task's answer can have;
        a plan whose final node outputs none of them is sent back, since its answer could not
        be scored."""
        self.model = model
        self.think_first = think_first
        self.think_max_tokens = think_max_tokens
        self.domain = domain
        self.fallback = fallback
        self.tools = tools
        self.write_vfs = write_vfs
        require_vfs = require_vfs and write_vfs
        builtin = demo is None and use_demo
        self.demo = (
            demo
            if demo is not None
            else (prompts.default_demo(domain, with_vfs=write_vfs) if use_demo else None)
        )
        self.demo_markers = prompts.copy_markers(domain) if builtin else []
        self.max_repairs = max_repairs
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.on_invalid = on_invalid
        self.quality_checks = quality_checks
        self.require_vfs = require_vfs
        self.repeat_temperature = repeat_temperature
        self.schema = planning_schema(require_vfs=require_vfs, with_vfs=write_vfs)
        self.show_schema = show_schema
        self.challenge_repeats = challenge_repeats
        self.answer_types = answer_types

    def system_prompt(self) -> str:
        tools = (
            prompts.TOOLS_SECTION.format(tools=self.tools.describe())
            if self.tools and len(self.tools)
            else ""
        )
        return prompts.PLANNER_SYSTEM.format(
            tools_section=tools, **prompts.VF_PROMPT_PARTS[self.write_vfs]
        )

    def plan_messages(self, task: str) -> list[Message]:
        demo = prompts.DEMO_SECTION.format(demo=self.demo) if self.demo else ""
        user = prompts.PLANNER_USER.format(
            demo_section=demo, task=task, schema_section=self._schema_section()
        )
        return [
            {"role": "system", "content": self.system_prompt()},
            {"role": "user", "content": user},
        ]

    def replan_messages(self, task: str, previous: Plan, failure: FailureContext) -> list[Message]:
        msgs = self.plan_messages(task)[:1]
        if self.demo:
            msgs.append(
                {"role": "user", "content": prompts.DEMO_SECTION.format(demo=self.demo).strip()}
            )
            msgs.append({"role": "assistant", "content": "Understood."})
        msgs.append({
            "role": "user",
            "content": prompts.REPLANNER_USER.format(
                task=task, previous=self._as_written(previous), failure=failure.render(),
                fixable=prompts.REPLAN_FIXABLE[self.write_vfs],
                schema_section=self._schema_section(),
            ),
        })  # fmt: skip
        return msgs

    def _as_written(self, plan: Plan) -> str:
        """The plan in the shape the model answers in: shown fields it may not write (edges,
        final flags, weights), small models copy, e.g. as a node named "edges"."""
        defs = self.schema["$defs"]
        node_keys = set(defs["Node"]["properties"])
        vf_keys = set(defs["PythonVF"]["properties"]) | set(defs["LLMVF"]["properties"])
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
        self, messages: list[Message], challenge: Callable[[Plan], list[str]] | None = None
    ) -> Plan:
        """`challenge`: problems that send a valid plan back once, sampled more freely; if the
        next reply is no better (invalid, or no repairs left), the challenged plan is taken."""
        base = messages
        challenged: Plan | None = None
        responses: list[ModelResponse] = []
        problems: list[str] = []
        seen_problems: list[list[str]] = []
        stalled = False
        temperature = self.temperature
        for _ in range(self.max_repairs + 1):
            fresh_challenge = False
            sampled = (temperature or 0.0) >= self.repeat_temperature
            resp = await call_model(
                self.model,
                ModelRequest(
                    messages=messages, response_schema=self.schema, schema_name="plan", role=PLANNER,
                    temperature=temperature, max_tokens=self.max_tokens,
                ),
            )  # fmt: skip
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
                # reply at the length limit (about a minute on the local 1.5B) and brings nothing.
                problems = [f"{MAX_CUT_REPLIES} replies in a row were cut off at the length limit"]
                break
            try:
                if resp.finish_reason == "length":
                    # A cut reply's first balanced `{...}` is some inner object: name the real cause.
                    n = resp.usage.completion_tokens or self.max_tokens
                    raise PlanError([
                        f"the reply was cut off at the length limit ({n} tokens) before the plan "
                        "was complete; write a shorter plan (fewer nodes, short names and VFs) and "
                        "never repeat a phrase"
                    ])  # fmt: skip
                raw = extract_json(resp.content)
                raw = fix_raw_plan(raw, self.answer_types)
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
            if self.on_invalid:
                self.on_invalid(problems)
            if hook := invalid_plan_hook.get():
                hook(problems, resp.content)
            if challenged is not None and not fresh_challenge:
                return challenged
            if (salvaged := self._salvage(raw, problems)) is not None:
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
            messages = [
                *base,
                {"role": "assistant", "content": shown},
                {"role": "user", "content": repair},
            ]
        if challenged is not None:
            return challenged
        why = (
            "the same problems came back after a sampled repair"
            if stalled
            else f"no valid plan after {self.max_repairs} repair(s)"
        )
        raise PlanningError(f"{why}; last problems:", problems, responses)

    def _salvage(self, raw: Any, problems: list[str]) -> Plan | None:
        """The plan without the Python VFs its problems name, when those VFs are all that is
        wrong with it: a VF that cannot run or checks nothing adds no safety, and a repair round
        costs a whole plan (minutes on a small model, and on the local 1.5B it never fixed one).
        A node left without VFs gets the deterministic non-empty check, on top of its typed
        outputs. The dropped VFs are recorded on the plan."""
        bad: set[tuple[str, str]] = set()
        for p in problems:
            m = _VF_PROBLEM.match(p)
            if m is None:
                return None
            bad.add((m.group(1), m.group(2)))
        if not bad or not isinstance(raw, dict) or not isinstance(raw.get("nodes"), list):
            return None
        raw = copy.deepcopy(raw)
        for n in raw["nodes"]:
            if isinstance(n, dict) and isinstance(n.get("verification"), list):
                n["verification"] = [
                    v for v in n["verification"]
                    if not (isinstance(v, dict) and (n.get("id"), v.get("name")) in bad)
                ]  # fmt: skip
        try:
            plan = parse_plan(raw)
        except PlanError:
            return None
        for node in plan.nodes:
            if not node.verification and self.write_vfs:
                node.verification.append(nonempty_outputs_vf(node))
        if self.check(plan):
            return None
        reasons: dict[str, str] = {}
        for p in problems:
            m = _VF_PROBLEM.match(p)
            if m:
                reasons.setdefault(f"{m.group(1)}.{m.group(2)}", m.group(3).strip(" :"))
        plan.dropped_vfs.extend(f"{k} ({why[:120]})" for k, why in reasons.items())
        return plan

    def _quality_of_raw(self, raw: Any) -> list[str]:
        """Quality problems of a plan that failed validation, so one round can fix everything."""
        try:
            return self.check(Plan.model_validate(raw))
        except (ValidationError, TypeError):
            return []

    def check(self, plan: Plan) -> list[str]:
        """The planner's own checks on a valid plan (see `plan_quality_problems`)."""
        if not self.quality_checks:
            return []
        return plan_quality_problems(
            plan, demo_markers=self.demo_markers, require_vfs=self.require_vfs,
            answer_types=self.answer_types,
        )  # fmt: skip

    async def _thought_out(self, messages: list[Message]) -> list[Message]:
        """`messages` with the model's free-text solution and the request for the plan after it.
        The reasoning call's prompt is a prefix of the plan call's, so a prompt cache serves it."""
        if not self.think_first:
            return messages
        *head, last = messages
        ask = {**last, "content": f"{last['content']}\n\n{prompts.PLAN_THINK}"}
        thought = await call_model(
            self.model,
            ModelRequest(messages=[*head, ask], role=PLANNER, temperature=self.temperature,
                         max_tokens=self.think_max_tokens),
        )  # fmt: skip
        return [
            *head,
            ask,
            {"role": "assistant", "content": (thought.content or "").strip()},
            {"role": "user", "content": prompts.PLAN_AFTER_THINKING},
        ]

    async def plan(self, task: str) -> Plan:
        try:
            return await self._solicit(await self._thought_out(self.plan_messages(task)))
        except PlanningError as e:
            if not self.fallback:
                raise
            return fallback_plan(task, self.domain, reason=str(e), with_vfs=self.write_vfs)

    async def replan(self, task: str, previous: Plan, failure: FailureContext) -> Plan:
        """With no valid new plan, the one-node fallback runs; a failed fallback runs again
        (a retry at its node may still pass, and the iteration cap bounds it)."""

        def repeats(plan: Plan) -> list[str]:
            return repeated_failure_problems(previous, plan, failure)

        messages = await self._thought_out(self.replan_messages(task, previous, failure))
        try:
            return await self._solicit(messages, repeats if self.challenge_repeats else None)
        except PlanningError as e:
            if not self.fallback:
                raise
            if previous.fallback_reason is not None:
                return previous
            return fallback_plan(task, self.domain, reason=str(e), with_vfs=self.write_vfs)

    async def repair(self, task: str, plan: Plan, problems: list[str]) -> Plan:
        """One plan sent back with problems found outside the planner (e.g. vacuous VFs)."""
        messages = [
            *self.plan_messages(task),
            {"role": "assistant", "content": self._as_written(plan)},
            {
                "role": "user",
                "content": prompts.PLAN_REPAIR.format(
                    problems="\n".join(f"- {p}" for p in problems)
                ),
            },
        ]
        return await self._solicit(messages)


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

    async def plan(self, task: str) -> Plan:
        if self._fn is not None:
            return parse_plan(self._fn(task))
        assert self._plan is not None
        return self._plan.model_copy(deep=True)

    async def replan(self, task: str, previous: Plan, failure: FailureContext) -> Plan:
        return await self.plan(task)

    @classmethod
    def single_node(
        cls,
        outputs: list[str] | None = None,
        vfs: list[dict[str, Any]] | None = None,
        instruction: str = "Solve the task completely and give the final result.",
        node_id: str = "solve",
    ) -> TemplatePlanner:
        return cls({
            "nodes": [{
                "id": node_id, "name": "Solve", "instruction": instruction, "inputs": [USER_TASK],
                "outputs": outputs or ["answer"], "verification": vfs or [],
            }],
            "edges": [],
        })  # fmt: skip


def fallback_plan(
    task: str, domain: str = "math", *, reason: str = "", with_vfs: bool = True
) -> Plan:
    """The whole task as one node with one typed answer, checked by what the task's kind gives
    for free: a code task's own examples, a numeric answer's type (a finite number). Used when a
    planner writes no valid plan, so a task that can be attempted is attempted."""
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
            vfs.append({
                "name": "task_examples", "type": "python",
                "code": "run_examples(outputs['code'], inputs['USER_TASK'])",
            })  # fmt: skip
    elif domain == "qa":
        output, kind = "answer", "string"
        instruction = "Answer the question in the task, using the tools as needed."
        vfs.append({"name": "answered", "type": "python",
                    "code": "assert outputs['answer'].strip(), 'the answer is empty'"})  # fmt: skip
    else:
        output, kind = "answer", "number"
        instruction = "Solve the task step by step and give the final numeric answer."
        vfs.append({"name": "finite_number", "type": "python",
                    "code": "assert is_number(outputs['answer']), 'the answer must be a finite number'"})  # fmt: skip
    plan = parse_plan({
        "nodes": [{
            "id": "solve", "name": "Solve the whole task", "instruction": instruction,
            "inputs": [USER_TASK], "outputs": {output: kind},
            "verification": vfs if with_vfs else [],
        }],
    })  # fmt: skip
    plan.fallback_reason = reason or "fallback plan"
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

    async def plan(self, task: str) -> Plan:
        return self._augment(await self.inner.plan(task))

    async def replan(self, task: str, previous: Plan, failure: FailureContext) -> Plan:
        return self._augment(await self.inner.replan(task, previous, failure))
