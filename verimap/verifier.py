"""The verifier: runs a node's verification functions on its outputs.

Python VFs run in the sandbox; natural-language VFs go to the judge model, which
first reasons in free text and then gives a schema-constrained `{passed,
explanation}` verdict in a second call (small models judge badly when forced to
reason inside JSON). A node passes on the strict AND of its VFs, or, when a
`threshold` is set, when the weighted share of passing VFs reaches it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from verimap import prompts
from verimap.accounting import BudgetExceeded, call_model
from verimap.llm.base import Model, ModelError, ModelRequest
from verimap.llm.structured import StructuredOutputError, request_structured
from verimap.plan import LLMVF, Node, PythonVF
from verimap.result import VerificationReport, VFVerdict
from verimap.sandbox.base import Outcome, Sandbox
from verimap.usage import JUDGE

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


class Verifier:
    def __init__(
        self,
        sandbox: Sandbox | None,
        judge_model: Model | None = None,
        mode: VerificationMode = "full",
        threshold: float | None = None,
        *,
        vf_timeout_s: float = 10.0,
        temperature: float | None = 0.0,
        judge_reasoning: bool = True,
        max_tokens: int | None = 1024,
    ):
        if threshold is not None and not 0 <= threshold <= 1:
            raise ValueError(f"threshold must be within [0, 1], got {threshold}")
        self.sandbox = sandbox
        self.judge_model = judge_model
        self.mode = mode
        self.threshold = threshold
        self.vf_timeout_s = vf_timeout_s
        self.temperature = temperature
        self.judge_reasoning = judge_reasoning
        self.max_tokens = max_tokens

    def vfs_for(self, node: Node) -> list[PythonVF | LLMVF]:
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

    async def verify(
        self, node: Node, inputs: dict[str, Any], outputs: dict[str, Any]
    ) -> VerificationReport:
        vfs = self.vfs_for(node)
        if not vfs:
            return VerificationReport(passed=True, verdicts=[], score=1.0)
        verdicts = await asyncio.gather(
            *(self._run_one(node, vf, inputs, outputs) for vf in vfs), return_exceptions=True
        )
        for v in verdicts:
            if isinstance(v, BaseException):
                raise v
        return self.aggregate(list(verdicts))  # type: ignore[arg-type]

    def aggregate(self, verdicts: list[VFVerdict]) -> VerificationReport:
        total = sum(v.weight for v in verdicts)
        score = sum(v.weight for v in verdicts if v.passed) / total if total else 1.0
        if self.threshold is None:
            passed = all(v.passed for v in verdicts)
        else:
            passed = score >= self.threshold - 1e-12
        return VerificationReport(passed=passed, verdicts=verdicts, score=score)

    async def _run_one(
        self, node: Node, vf: PythonVF | LLMVF, inputs: dict, outputs: dict
    ) -> VFVerdict:
        if isinstance(vf, PythonVF):
            return await self.run_python(vf, inputs, outputs)
        return await self.run_judge(node, vf, inputs, outputs)

    async def run_python(self, vf: PythonVF, inputs: dict, outputs: dict) -> VFVerdict:
        if self.sandbox is None:
            return VFVerdict(name=vf.name, type="python", outcome=Outcome.SANDBOX_ERROR.value,
                             message="no sandbox configured for Python VFs", weight=vf.weight)  # fmt: skip
        try:
            res = await self.sandbox.run_vf(vf.code, inputs, outputs, timeout=self.vf_timeout_s)
        except Exception as e:
            return VFVerdict(name=vf.name, type="python", outcome=Outcome.SANDBOX_ERROR.value,
                             message=f"{type(e).__name__}: {e}", weight=vf.weight)  # fmt: skip
        return VFVerdict(
            name=vf.name,
            type="python",
            outcome=res.outcome.value,
            message=res.message,
            traceback=res.traceback,
            weight=vf.weight,
        )

    async def run_judge(self, node: Node, vf: LLMVF, inputs: dict, outputs: dict) -> VFVerdict:
        if self.judge_model is None:
            return VFVerdict(name=vf.name, type="llm", outcome="ERROR",
                             message="no judge model configured for natural-language VFs", weight=vf.weight)  # fmt: skip
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": prompts.JUDGE_SYSTEM},
            {
                "role": "user",
                "content": prompts.JUDGE_USER.format(
                    instruction=node.instruction,
                    inputs=_dumps(inputs),
                    outputs=_dumps(outputs),
                    criterion=vf.content,
                ),
            },
        ]
        try:
            if self.judge_reasoning:
                thought = await call_model(
                    self.judge_model,
                    ModelRequest(
                        messages=messages,
                        role=JUDGE,
                        temperature=self.temperature,
                        max_tokens=self.max_tokens,
                    ),
                )
                messages = [
                    *messages,
                    {"role": "assistant", "content": thought.content or ""},
                    {"role": "user", "content": prompts.JUDGE_FINAL},
                ]
            verdict, _ = await request_structured(
                self.judge_model, messages, JudgeVerdict, role=JUDGE, schema_name="verdict",
                temperature=self.temperature, max_tokens=self.max_tokens,
            )  # fmt: skip
        except BudgetExceeded:
            raise
        except (ModelError, StructuredOutputError) as e:
            return VFVerdict(name=vf.name, type="llm", outcome="ERROR",
                             message=f"judge failed: {e}", weight=vf.weight)  # fmt: skip
        return VFVerdict(
            name=vf.name,
            type="llm",
            outcome="PASS" if verdict.passed else "FAIL",
            message="" if verdict.passed else verdict.explanation.strip().splitlines()[0][:300],
            explanation=verdict.explanation,
            weight=vf.weight,
        )
