"""The verifier: runs a node's verification functions on its outputs.

Python VFs run in the sandbox; natural-language VFs go to the judge model, which
first reasons in free text, as a ReAct agent with the executor's tools when it has
them (the paper's verifier), and then gives a schema-constrained `{passed,
explanation}` verdict in a last call (small models judge badly when forced to
reason inside JSON). A node passes on the strict AND of its VFs, or, when a
`threshold` is set, when the weighted share of passing VFs reaches it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, model_validator

from verimap.base import iotypes
from verimap.base.accounting import BudgetExceeded
from verimap.base.check_names import CATALOG
from verimap.base.errors import VerimapError
from verimap.base.messages import (
    AssistantMessage,
    GenerationSettings,
    Message,
    ModelRequest,
    SystemMessage,
    UserMessage,
)
from verimap.base.messages import Message as TranscriptMessage
from verimap.base.model import ModelError
from verimap.base.plan import LLMVF, USER_TASK, CheckVF, Node, Plan, PythonVF
from verimap.base.protocols import Model, Sandbox
from verimap.base.purpose import JudgeCall
from verimap.base.sandbox import Outcome
from verimap.base.usage import JUDGE
from verimap.base.verdicts import ABSTAINED, VerificationReport, VFVerdict
from verimap.base.verification import (
    Check,
    CheckTools,
    Disputing,
    SourceIndex,
    Submission,
    verdict,
)
from verimap.config import RunConfig
from verimap.core import prompts
from verimap.core.agent import flatten_tool_messages, react_protocol, tool_loop, uses_tool_api
from verimap.core.vf_checks import (
    CHEAP_TIER,
    DISPUTING_TIER,
    JUDGE_TIER,
    JudgeCheck,
    PythonVFCheck,
    judge_checks,
    tier_of,
)
from verimap.llm.structured import StructuredOutputError, request_structured
from verimap.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

VerificationMode = Literal["full", "instruction", "none"]


class JudgeVerdict(BaseModel):
    passed: bool
    explanation: str = Field(default="", description="why; required when passed is false")

    @model_validator(mode="after")
    def _explain_fail(self) -> JudgeVerdict:
        if not self.passed and not self.explanation.strip():
            raise ValueError("explanation is required when passed is false")
        return self


JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"passed": {"type": "boolean"}, "explanation": {"type": "string"}},
    "required": ["passed", "explanation"],
    "additionalProperties": False,
}


def _dumps(v: Any) -> str:
    return json.dumps(v, indent=2, ensure_ascii=False, default=str)


# What a judge samples with unless a run's config says otherwise.
JUDGE_SETTINGS = GenerationSettings(temperature=0.0, max_tokens=1024)


class Verifier:
    def __init__(
        self,
        sandbox: Sandbox | None,
        judge_model: Model | None = None,
        mode: VerificationMode = "full",
        threshold: float | None = None,
        *,
        vf_timeout_s: float = 10.0,
        settings: GenerationSettings = JUDGE_SETTINGS,
        judge_reasoning: bool = True,
        full_feedback: bool = False,
        batch_judge: bool = True,
        tools: ToolRegistry | None = None,
        judge_max_steps: int = 6,
        checks: Sequence[Check] = (),
        retry_temperature: float | None = None,
        lookup_tools: ToolRegistry | None = None,
    ):
        """`full_feedback`: ask the judge even when a Python VF has already failed the attempt
        (the paper runs every VF; the verdict is the same under strict AND). `batch_judge`: judge
        all of a node's natural-language VFs in one exchange, which reads the node's inputs and
        outputs once instead of once per criterion (the paper asks once per VF). `tools`: the
        judge reasons as a ReAct agent with them (the paper's verifier), up to `judge_max_steps`
        replies, before it gives its verdict; without tools it reasons in one reply. `checks`:
        built-in checks run beside every node's VFs where they apply (a plan may ask for more
        by name); `retry_temperature`: what their independent solutions after the first are
        sampled at. `lookup_tools`: the run's tools, whose knowledge of the corpus checks may
        consult (`CheckTools.sources`), whether or not the judge reasons with them."""
        if threshold is not None and not 0 <= threshold <= 1:
            raise ValueError(f"threshold must be within [0, 1], got {threshold}")
        self.sandbox = sandbox
        self.judge_model = judge_model
        self.mode = mode
        self.threshold = threshold
        self.vf_timeout_s = vf_timeout_s
        self.settings = settings
        self.judge_reasoning = judge_reasoning
        self.full_feedback = full_feedback
        self.batch_judge = batch_judge
        self.tools = tools if tools is not None else ToolRegistry()
        self.judge_max_steps = judge_max_steps
        self.checks = list(checks)
        self.retry_temperature = retry_temperature
        self.sources = source_index(lookup_tools)

    @property
    def check_tools(self) -> CheckTools:
        """What the checks may use (`CheckTools`)."""
        return CheckTools(
            sandbox=self.sandbox,
            model=self.judge_model,
            settings=self.settings,
            retry_temperature=self.retry_temperature,
            timeout_s=self.vf_timeout_s,
            sources=self.sources,
        )

    @classmethod
    def from_config(
        cls,
        sandbox: Sandbox | None,
        judge_model: Model | None,
        config: RunConfig,
        threshold: float | None = None,
        tools: ToolRegistry | None = None,
    ) -> Verifier:
        """The verifier a run's config asks for: one place where the config's knobs (sampling
        included: the judge samples like every other role) reach the verifier."""
        from verimap.checks.registry import get_check

        return cls(
            sandbox,
            judge_model,
            mode=config.verify.verification,
            threshold=threshold,
            vf_timeout_s=config.verify.vf_timeout_s,
            settings=JUDGE_SETTINGS.replace(
                temperature=config.sampling.temperature, seed=config.sampling.seed
            ),
            full_feedback=config.verify.full_feedback,
            batch_judge=config.verify.batch_judge,
            tools=tools if config.verify.judge_tools else None,
            checks=[get_check(n, config.verify.ballot) for n in config.verify.checks],
            retry_temperature=config.sampling.retry_temperature,
            lookup_tools=tools,
        )

    def vfs_for(self, node: Node) -> list[PythonVF | LLMVF | CheckVF]:
        if self.mode == "none":
            return []
        if self.mode == "instruction":
            return [
                LLMVF(
                    name="instruction",
                    content=prompts.INSTRUCTION_CRITERION.format(instruction=node.instruction),
                )
            ]
        return list(node.verification)

    def checks_for(self, sub: Submission) -> list[Check]:
        """The checks that run on this attempt besides the plan's Python and natural-language
        VFs: those its plan asks for (a built-in one by name, the verifier's own instance when
        it has one so its settings hold; a catalog one with the plan's arguments, under the
        VF's name), then the configured ones, each once and only where it applies. None
        without the plan's VFs (react, map, map-v)."""
        if self.mode != "full":
            return []
        from verimap.checks.registry import get_check, plan_check

        mine = {c.name: c for c in self.checks}
        asked = [v for v in sub.node.verification if isinstance(v, CheckVF)]
        builtin = dict.fromkeys(v.check for v in asked if v.check not in CATALOG)
        chosen = [mine.get(n) or get_check(n) for n in builtin]
        chosen += [plan_check(v) for v in asked if v.check in CATALOG]
        chosen += [c for c in self.checks if c.name not in builtin]
        return [c for c in chosen if c.applies(sub)]

    def all_checks(self, sub: Submission) -> list[Check]:
        """Every check of this attempt, one protocol for all: the plan's Python VFs, the
        checks (`checks_for`), and the judge's on the natural-language VFs."""
        vfs = self.vfs_for(sub.node)
        python: list[Check] = [PythonVFCheck(v, self) for v in vfs if isinstance(v, PythonVF)]
        judged = [v for v in vfs if isinstance(v, LLMVF)]
        judges: list[Check] = list(judge_checks(judged, self))
        return [*python, *self.checks_for(sub), *judges]

    async def verify(
        self,
        node: Node,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        *,
        ctx: RunContext,
        task: str | None = None,
        transcript: Sequence[TranscriptMessage] = (),
        final: bool = False,
    ) -> VerificationReport:
        """Every verdict on one attempt, reduced by strict AND (`aggregate`). The checks run by
        tier (`vf_checks`): the cheap ones first; when one fails the verdict is decided, and
        the judge and the checks that call a model (the slow, costly part) are not asked
        unless `full_feedback` is set. Model calls are charged to `ctx`'s ledger, as calls of
        its node and attempt. On the final node, each passing Python VF is probed for strength
        (does it fail a nearby wrong answer?)."""
        task = task if task is not None else str(inputs.get(USER_TASK, ""))
        sub = Submission(task, node, inputs, outputs, tuple(transcript), final)
        checks = self.all_checks(sub)
        tiers = {
            t: [c for c in checks if tier_of(c) == t]
            for t in (CHEAP_TIER, JUDGE_TIER, DISPUTING_TIER)
        }
        first = await self._run_checks(tiers[CHEAP_TIER], sub, ctx, together=True)
        decided = (
            self.threshold is None
            and not self.full_feedback
            and any(not v.passed and v.judged for v in first)
        )
        rest: list[VFVerdict] = []
        if decided:
            for c in tiers[JUDGE_TIER]:
                rest += c.skipped() if isinstance(c, JudgeCheck) else []
        else:
            rest = await self._run_checks(tiers[JUDGE_TIER], sub, ctx, together=True)
        if not decided and all(v.passed or not v.judged for v in rest):
            rest += await self._run_checks(tiers[DISPUTING_TIER], sub, ctx)
        order = {v.name: i for i, v in enumerate(self.vfs_for(node))}
        verdicts = sorted([*first, *rest], key=lambda v: order.get(v.name, len(order)))
        return self.aggregate(verdicts)

    async def _run_checks(
        self, checks: Sequence[Check], sub: Submission, ctx: RunContext, *, together: bool = False
    ) -> list[VFVerdict]:
        """The checks' verdicts, in the checks' order: `together` runs them at once, else one
        after another (the costly ones share a run's state, the independent solutions drawn so
        far). A check with a bug abstains (the answer is kept unverified, the run not lost); a
        verimap error does not."""
        if together:
            found = await asyncio.gather(*(self._run_check(c, sub, ctx) for c in checks))
        else:
            found = [await self._run_check(c, sub, ctx) for c in checks]
        return [v for vs in found for v in vs]

    async def _run_check(self, check: Check, sub: Submission, ctx: RunContext) -> list[VFVerdict]:
        try:
            found = await check.check(sub, self.check_tools, ctx)
        except VerimapError:
            raise
        except Exception as e:  # a fault in a check is no evidence about the answer
            found = verdict(check, ABSTAINED, f"could not judge: {type(e).__name__}: {e}")
        if found is None:
            return []
        return [found] if isinstance(found, VFVerdict) else list(found)

    @property
    def disputing(self) -> Disputing:
        """The checks that may dispute an answer, and what they say once they have."""
        return Disputing(self.checks)

    async def vacuous_vfs(self, plan: Plan, task: str) -> list[tuple[str, str]]:
        """(node, VF) of every Python VF that passes both on null outputs of the declared types
        (0, "", [], ...) and on absurd ones (-987654.321, "zq xq zq"): whatever it checks, no
        answer can fail it. Inputs hold ordinary values of their producers' types."""
        if self.sandbox is None:
            return []
        probes = []
        for node in plan.nodes:
            inputs: dict[str, Any] = {}
            for ref in node.inputs:
                if ref == USER_TASK:
                    inputs[ref] = task
                elif "." in ref:
                    src, var = ref.split(".", 1)
                    spec = plan.by_id[src].output_type(var) if src in plan.by_id else iotypes.ANY
                    inputs[ref] = inputs.setdefault(var, iotypes.plausible_value(spec))
            for vf in node.verification:
                if isinstance(vf, PythonVF):
                    for make in (iotypes.null_value, iotypes.absurd_value):
                        outs = {o: make(t) for o, t in node.outputs.items()}
                        probes.append((node.id, vf, inputs, outs))
        results = await asyncio.gather(
            *(self.run_python(vf, i, o) for _, vf, i, o in probes), return_exceptions=True
        )
        passed: dict[tuple[str, str], int] = {}
        for (nid, vf, _, _), r in zip(probes, results, strict=True):
            if isinstance(r, VFVerdict) and r.passed:
                passed[(nid, vf.name)] = passed.get((nid, vf.name), 0) + 1
        return [k for k, n in passed.items() if n == 2]

    def aggregate(self, verdicts: list[VFVerdict]) -> VerificationReport:
        counted = [v for v in verdicts if v.judged]
        total = sum(v.weight for v in counted)
        score = sum(v.weight for v in counted if v.passed) / total if total else 1.0
        if self.threshold is None:
            passed = all(v.passed or not v.judged for v in verdicts)
        else:
            passed = score >= self.threshold - 1e-12
        return VerificationReport(passed=passed, verdicts=verdicts, score=score)

    async def run_python(self, vf: PythonVF, inputs: dict, outputs: dict) -> VFVerdict:
        if self.sandbox is None:
            return VFVerdict(
                name=vf.name,
                type="python",
                outcome=Outcome.SANDBOX_ERROR.value,
                message="no sandbox configured for Python VFs",
                weight=vf.weight,
            )
        try:
            res = await self.sandbox.run_vf(vf.code, inputs, outputs, timeout=self.vf_timeout_s)
        except Exception as e:
            return VFVerdict(
                name=vf.name,
                type="python",
                outcome=Outcome.SANDBOX_ERROR.value,
                message=f"{type(e).__name__}: {e}",
                weight=vf.weight,
            )
        return VFVerdict(
            name=vf.name,
            type="python",
            outcome=res.outcome.value,
            message=res.message,
            traceback=res.traceback,
            weight=vf.weight,
        )

    async def _ask_judge(
        self,
        messages: list[Message],
        final: str,
        schema: Any,
        name: str,
        purpose: JudgeCall,
        ctx: RunContext | None = None,
    ) -> Any:
        """Think in free text, then answer in the schema (small models judge badly when made to
        reason inside JSON). Model and format failures propagate to the caller."""
        if self.judge_model is None:  # the callers answer without a judge before asking
            raise ValueError("no judge model configured")
        model = ctx.model(self.judge_model) if ctx is not None else self.judge_model
        tools = None
        if self.judge_reasoning and len(self.tools):
            system = messages[0].content + prompts.JUDGE_TOOLS + react_protocol(model, self.tools)
            loop = await tool_loop(
                model,
                self.tools,
                [SystemMessage(content=system), *messages[1:]],
                role=JUDGE,
                max_steps=self.judge_max_steps,
                settings=self.settings,
                purpose=purpose,
            )
            messages = [*flatten_tool_messages(loop.messages), UserMessage(content=final)]
            tools = self.tools.openai_specs() if uses_tool_api(model, self.tools) else None
        elif self.judge_reasoning:
            thought = await model.request(
                ModelRequest(messages=messages, role=JUDGE, settings=self.settings, purpose=purpose)
            )
            messages = [
                *messages,
                AssistantMessage(content=thought.content or ""),
                UserMessage(content=final),
            ]
        value, _ = await request_structured(
            model,
            messages,
            schema,
            role=JUDGE,
            schema_name=name,
            settings=self.settings,
            tools=tools,
            purpose=purpose.model_copy(update={"final_call": True}),
        )
        return value

    async def run_judge_many(
        self,
        node: Node,
        vfs: list[LLMVF],
        inputs: dict,
        outputs: dict,
        *,
        ctx: RunContext | None = None,
    ) -> list[VFVerdict]:
        """All of a node's criteria in one exchange, one verdict each: the prompt (instruction,
        inputs, outputs) is read once, and a criterion can still fail on its own."""
        names = [vf.name for vf in vfs]
        schema = {
            "type": "object",
            "properties": dict.fromkeys(names, JUDGE_SCHEMA),
            "required": names,
            "additionalProperties": False,
        }
        criteria = "\n".join(f"- {vf.name}: {vf.content}" for vf in vfs)
        messages: list[Message] = [
            SystemMessage(content=prompts.JUDGE_SYSTEM_MANY),
            UserMessage(
                content=prompts.JUDGE_USER_MANY.format(
                    instruction=node.instruction,
                    inputs=_dumps(inputs),
                    outputs=_dumps(outputs),
                    criteria=criteria,
                )
            ),
        ]
        final = prompts.JUDGE_FINAL_MANY.format(names=", ".join(json.dumps(n) for n in names))
        purpose = _judging(node, vfs, outputs)
        try:
            value = await self._ask_judge(messages, final, schema, "verdicts", purpose, ctx)
        except BudgetExceeded:
            raise
        except (ModelError, StructuredOutputError) as e:
            return [
                VFVerdict(
                    name=vf.name,
                    type="llm",
                    outcome="ERROR",
                    message=f"judge failed: {e}",
                    weight=vf.weight,
                )
                for vf in vfs
            ]
        return [
            _verdict(vf, bool(value[vf.name]["passed"]), value[vf.name]["explanation"])
            for vf in vfs
        ]

    async def run_judge(
        self,
        node: Node,
        vf: LLMVF,
        inputs: dict,
        outputs: dict,
        *,
        ctx: RunContext | None = None,
    ) -> VFVerdict:
        if self.judge_model is None:
            return VFVerdict(
                name=vf.name,
                type="llm",
                outcome="ERROR",
                message="no judge model configured for natural-language VFs",
                weight=vf.weight,
            )
        messages: list[Message] = [
            SystemMessage(content=prompts.JUDGE_SYSTEM),
            UserMessage(
                content=prompts.JUDGE_USER.format(
                    instruction=node.instruction,
                    inputs=_dumps(inputs),
                    outputs=_dumps(outputs),
                    criterion=vf.content,
                )
            ),
        ]
        try:
            verdict = await self._ask_judge(
                messages,
                prompts.JUDGE_FINAL,
                JudgeVerdict,
                "verdict",
                _judging(node, [vf], outputs),
                ctx,
            )
        except BudgetExceeded:
            raise
        except (ModelError, StructuredOutputError) as e:
            return VFVerdict(
                name=vf.name,
                type="llm",
                outcome="ERROR",
                message=f"judge failed: {e}",
                weight=vf.weight,
            )
        return _verdict(vf, verdict.passed, verdict.explanation)


def _judging(node: Node, vfs: Sequence[LLMVF], outputs: dict) -> JudgeCall:
    return JudgeCall(node_id=node.id, criteria={v.name: v.content for v in vfs}, outputs=outputs)


def _verdict(vf: LLMVF, passed: bool, explanation: str) -> VFVerdict:
    explanation = explanation.strip()
    if not passed and not explanation:
        explanation = "(the judge gave no reason)"
    return VFVerdict(
        name=vf.name,
        type="llm",
        outcome="PASS" if passed else "FAIL",
        message="" if passed else explanation.splitlines()[0][:300],
        explanation=explanation,
        weight=vf.weight,
        strength="strong",
    )


def source_index(tools: ToolRegistry | None) -> SourceIndex | None:
    """The first of `tools` that knows the corpus's sources, if any."""
    if tools is None:
        return None
    return next((t for n in tools.names() if isinstance(t := tools.get(n), SourceIndex)), None)
