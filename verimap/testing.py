"""Test doubles for logic tests: a scripted model and an in-process sandbox.

Never use these in production paths; they exist so the engine can be tested
without a model server or a container runtime.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import io
import json
import linecache
import re
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from verimap import executor, iotypes
from verimap.checks.programs import PROGRAM_PROMPTS
from verimap.llm.base import ModelRequest, ModelResponse, UserMessage
from verimap.llm.double import ScriptedModel, tool_call_reply
from verimap.plan import Plan, parse_plan
from verimap.sandbox.base import ExecResult, Outcome, Sandbox
from verimap.sandbox.policy import BYTECODE_MAGIC
from verimap.sandbox.pooled import OUTPUT_LIMIT, vf_job
from verimap.sandbox.worker import candidate, jobs, restricted


class InProcessSandboxDouble(Sandbox):
    """Judges VFs in this process with the worker's own VF runner, on a job built as the real
    backends build it (policy check, bytecode, codec): same namespace and helpers, same
    PASS/FAIL/ERROR/POLICY rules and messages. No isolation and no time limit: for logic
    tests of trusted code only. `policy=False` runs VFs unrestricted, as the backends can."""

    kind = "in-process-double"

    def __init__(self, *, policy: bool = True) -> None:
        self.calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        self.policy = policy

    async def run_vf(self, code, inputs, outputs, *, timeout=10.0):
        self.calls.append((code, inputs, outputs))
        start = time.monotonic()
        res = judge_vf(code, inputs, outputs, policy=self.policy)
        await asyncio.sleep(0)
        res.duration_s = time.monotonic() - start
        return res

    async def run_program(self, code, *, timeout=10.0, files=None, argv=None, stdin=""):
        raise NotImplementedError("InProcessSandboxDouble runs VFs only")

    async def run_tests(self, candidate_code, test_code, entry_point, *, timeout=10.0):
        raise NotImplementedError("InProcessSandboxDouble runs VFs only")


def judge_vf(
    code: str, inputs: dict[str, Any], outputs: dict[str, Any], *, policy: bool = True
) -> ExecResult:
    """One VF's verdict as a sandbox worker gives it, computed in this process.

    The job is the one PooledSandbox sends; the worker's `jobs.run_vf` runs it in a fresh
    namespace, with stdout and stderr captured, and the record is mapped as the worker's
    supervisor maps it. Candidates a VF loads (load_function, run_examples) run as host
    processes and are stopped before this returns.
    """
    job = vf_job(code, inputs, outputs, policy=policy, magic=BYTECODE_MAGIC)
    if isinstance(job, ExecResult):
        return job
    out, err = io.StringIO(), io.StringIO()
    candidate.CANDIDATE_ROOT = _candidate_root()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rec = jobs.run_vf(job, restricted.vf_namespace(policy))
    finally:
        candidate.close_candidates()
        linecache.cache.pop("<vf>", None)
    stdout, stderr = out.getvalue(), err.getvalue()
    if max(len(stdout.encode()), len(stderr.encode())) > OUTPUT_LIMIT:
        return ExecResult(
            outcome=Outcome.OUTPUT_LIMIT,
            message="output exceeded the sandbox limit; job stopped",
            truncated=True,
        )
    try:
        outcome = Outcome(rec.get("outcome", "ERROR"))
    except ValueError:
        outcome = Outcome.ERROR
    return ExecResult(
        outcome=outcome,
        message=str(rec.get("message", ""))[:8000],
        traceback=str(rec.get("traceback", ""))[:32000],
        stdout=stdout,
        stderr=stderr,
    )


@functools.cache
def _candidate_root() -> str:
    """Where candidates of in-process VFs get their directories (the worker's default, the
    current directory, would be the repository's)."""
    root = tempfile.mkdtemp(prefix="verimap-double-")
    atexit.register(shutil.rmtree, root, True)
    return root


OutputsFn = Callable[[str, int, dict[str, Any], str], dict[str, Any] | str]
JudgeFn = Callable[[str, str, dict[str, Any]], tuple[bool, str]]
_SUBTASK = re.compile(
    r"^(?P<inputs>.*?)\n(?:\nResults of earlier subtasks.*?\n)?\nSubtask: (?P<instruction>.*?)\n"
    r"Required outputs: ",
    re.S,
)
_INPUT_HEAD = re.compile(r"^Input (\S+?)(?: \((.*)\))?:\n", re.M)


def parse_inputs(shown: str) -> dict[str, Any]:
    """The inverse of `executor.render_inputs`: the named values an executor prompt shows."""
    heads = list(_INPUT_HEAD.finditer(shown))
    values: dict[str, Any] = {}
    for head, nxt in zip(heads, [*heads[1:], None], strict=True):
        body = shown[head.end() : nxt.start() - 2 if nxt else len(shown)]
        ref, label = head.group(1), head.group(2)
        spec = iotypes.ANY if label is None else label if label[:1] != "{" else json.loads(label)
        values[ref] = body if executor.shown_as_text(ref, body, spec) else json.loads(body)
    return values


# A text-only executor's prompt (structured_io=False): no named inputs to parse.
_TEXT_SUBTASK = re.compile(r"^Subtask: (?P<instruction>.*?)\n\n", re.S)
_JUDGE = re.compile(
    r"^Subtask instruction: (.*?)\n\nInputs \(JSON\):.*?Outputs \(JSON\):\n(.*?)\n\nCriterion: (.*?)\n\nDoes",
    re.S,
)
# The batched judge: several criteria, one "- name: criterion" line each.
_SOLVE_BY_PROGRAM = tuple(p.split("{task}")[1] for p in PROGRAM_PROMPTS)
_JUDGE_MANY = re.compile(
    r"^Subtask instruction: (.*?)\n\nInputs \(JSON\):.*?Outputs \(JSON\):\n(.*?)\n\nCriteria:\n(.*?)\n\nDoes",
    re.S,
)
_CRITERION = re.compile(r"^- (.*?): (.*)$", re.M)


class ScriptedWorld:
    """A scripted model for every role of a run, driven by tables instead of a call order.

    The planner gets `plans[i]` on its i-th call for a plan (the last one repeats); its
    free-text reasoning calls get a line of text. An executor
    call is routed to the node whose instruction it carries, and answered with
    `outputs(node_id, attempt_index, inputs, prompt)` as JSON (one call per attempt), or as
    written when it returns a string (a text-only executor's reply; its `inputs` are {}).
    The judge answers `judge(node_id, criterion, outputs) -> (passed, explanation)`,
    after a free-text reasoning call, and a request to solve the whole task at once (the
    independent-solution check, in prose or as a program, and a program's fix) with
    `solve(task)`. Node instructions must be unique within a
    plan.
    """

    def __init__(
        self,
        plans: Sequence[dict[str, Any] | Plan],
        outputs: OutputsFn,
        judge: JudgeFn | None = None,
        *,
        solve: Callable[[str], str] | None = None,
        latency_s: float = 0.0,
        supports_tools: bool = True,
        name: str = "scripted-world",
    ):
        self.plans = [parse_plan(p) for p in plans]
        self.outputs = outputs
        self.judge = judge or (lambda node_id, criterion, outs: (True, "looks right"))
        self.solve = solve or (lambda task: "I cannot tell.")
        self.executor_calls: dict[str, int] = defaultdict(int)
        self.executor_prompts: dict[str, list[str]] = defaultdict(list)
        self.order: list[str] = []
        self.planner_calls = 0
        self.model = ScriptedModel(
            self._answer, name=name, latency_s=latency_s, supports_tools=supports_tools
        )

    def plan_prompts(self) -> list[str]:
        """What the planner was told on each call for a plan (its user turns, joined): the first
        plan's task, then each repair's or replan's problems."""
        return [
            "\n\n".join(m.content for m in r.messages if isinstance(m, UserMessage))
            for r in self.model.requests
            if r.role == "planner" and r.response_schema is not None
        ]

    def _node_for(self, instruction: str) -> str:
        for plan in reversed(self.plans[: self.planner_calls] or self.plans):
            for n in plan.nodes:
                if n.instruction == instruction:
                    return n.id
        raise LookupError(f"ScriptedWorld: no node has instruction {instruction!r}")

    def _answer(self, req: ModelRequest) -> ModelResponse | str | dict:
        if req.role == "planner":
            if req.response_schema is None:
                return "Let me work the task out before I write the plan."
            plan = self.plans[min(self.planner_calls, len(self.plans) - 1)]
            self.planner_calls += 1
            return plan.to_json()
        user = next(m.content for m in req.messages if isinstance(m, UserMessage))
        if req.role == "judge":
            for suffix in _SOLVE_BY_PROGRAM:
                if user.endswith(suffix):
                    return self.solve(user[: -len(suffix)])
            if req.response_schema is None:
                return "Let me reason about the criteria."
            if many := _JUDGE_MANY.search(user):
                node_id, outs = self._node_for(many.group(1)), json.loads(many.group(2))
                verdicts = {}
                for name, criterion in _CRITERION.findall(many.group(3)):
                    passed, why = self.judge(node_id, criterion, outs)
                    verdicts[name] = {"passed": passed, "explanation": why}
                return verdicts
            m = _JUDGE.search(user)
            if m is None:
                raise LookupError("ScriptedWorld: unrecognised judge prompt")
            passed, why = self.judge(self._node_for(m.group(1)), m.group(3), json.loads(m.group(2)))
            return {"passed": passed, "explanation": why}
        m = _SUBTASK.search(user)
        found = m or _TEXT_SUBTASK.search(user)
        if found is None:
            raise LookupError("ScriptedWorld: unrecognised executor prompt")
        node_id = self._node_for(found["instruction"])
        k = self.executor_calls[node_id]
        self.executor_calls[node_id] += 1
        self.executor_prompts[node_id].append(user)
        self.order.append(node_id)
        reply = self.outputs(node_id, k, parse_inputs(m["inputs"]) if m else {}, user)
        return reply if isinstance(reply, str) else json.dumps(reply)

    def models(self) -> dict[str, ScriptedModel]:
        return {"planner": self.model, "executor": self.model, "judge": self.model}


__all__ = [
    "InProcessSandboxDouble",
    "ScriptedModel",
    "ScriptedWorld",
    "judge_vf",
    "parse_inputs",
    "tool_call_reply",
]


def need(condition: bool, reason: str) -> None:
    """In a test: go on if `condition`, else fail under CI (which must provide Docker, the model,
    Chromium, ...) and skip elsewhere, where they are optional."""
    if condition:
        return
    import pytest

    from verimap.env import getenv

    if getenv("CI"):
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)
