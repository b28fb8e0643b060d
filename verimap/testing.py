"""Test doubles for logic tests: scripted models, models that know a benchmark's answers, and an
in-process sandbox. They are shipped so that tests of code built on verimap can use them too.

- `ScriptedModel`: a model double that answers from a function of the request or a list.
- `ScriptedWorld`: a model double for every role of a run, driven by tables.
- `oracle_models`: planner, executor and judge doubles that answer a benchmark's tasks from its
  gold data (`oracle_factory` for `verimap eval --models-factory`).
- `InProcessSandboxDouble`: a sandbox double that judges VFs in this process.
- `HashingEmbedderDouble`: an embedder for the retrieval index with no model to load.

The model doubles route each request on its purpose (`verimap.base.purpose`: which node, which
criteria, which kind of independent solution), never on the wording of its prompt, so a prompt
can be reworded without touching them. Nothing in verimap ever falls back to a double, and
numbers measured with one say nothing about any real model.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import hashlib
import inspect
import io
import json
import linecache
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from verimap.base.env import getenv, getenv_float, getenv_int
from verimap.base.messages import ModelRequest, ModelResponse, ToolCall, UserMessage
from verimap.base.model import ModelError
from verimap.base.plan import USER_TASK, Plan
from verimap.base.protocols import Sandbox
from verimap.base.purpose import ExecuteCall, JudgeCall, PlanCall, SolveCall
from verimap.base.sandbox import ExecResult, Outcome
from verimap.base.usage import Price, Usage, cost_of
from verimap.evals.tasksets import Benchmark, EvalTask, get_benchmark
from verimap.planning.plan import parse_plan
from verimap.sandbox.policy import BYTECODE_MAGIC
from verimap.sandbox.pooled import OUTPUT_LIMIT, vf_job
from verimap.sandbox.worker import candidate, jobs, restricted

__all__ = [
    "InProcessSandboxDouble",
    "ScriptedModel",
    "ScriptedWorld",
    "Throttled",
    "judge_vf",
    "need",
    "oracle_factory",
    "oracle_models",
    "tool_call_reply",
]

# ---- a scripted model ---------------------------------------------------------------------------

Reply = ModelResponse | str | dict[str, Any] | Exception
ScriptFn = Callable[[ModelRequest], Reply | Awaitable[Reply]]


def _approx_tokens(text: str) -> int:
    """Four characters a token: close enough for accounting tests and benchmarks."""
    return max(1, len(text) // 4) if text else 0


def tool_call_reply(
    name: str, arguments: Mapping[str, Any] | None = None, *, id: str = "call_1"
) -> ModelResponse:
    """A reply that calls one tool (OpenAI tools API)."""
    return ModelResponse(
        content="",
        tool_calls=[ToolCall(id=id, name=name, arguments=json.dumps(dict(arguments or {})))],
    )


class ScriptedModel:
    """A test double of a `Model` whose replies come from `script`, like pydantic-ai's
    `FunctionModel`: a function of the request, or a list of replies consumed in order.

    Replies may be a `ModelResponse`, a string (the content), a dict (sent as JSON content) or an
    exception instance (raised, counted as a failed call). Every request is recorded in
    `requests`; `latency_s` lets schedulers be measured; usage is filled in from message lengths
    unless the reply carries its own, and priced from `prices`, so accounting can be tested.
    """

    provider = "verimap.scripted"

    def __init__(
        self,
        script: ScriptFn | Iterable[Reply],
        *,
        name: str = "scripted",
        supports_tools: bool = True,
        latency_s: float = 0.0,
        prices: Mapping[str, Price] | None = None,
    ):
        self.name = name
        self.supports_tools = supports_tools
        self.latency_s = latency_s
        self.prices = prices
        self.requests: list[ModelRequest] = []
        self.responses: list[ModelResponse] = []
        if callable(script):
            self._fn: ScriptFn | None = script
            self._queue: list[Reply] = []
        else:
            self._fn = None
            self._queue = list(script)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _usage(self, req: ModelRequest, content: str, given: Usage) -> Usage:
        if given.prompt_tokens or given.completion_tokens:
            u = given.model_copy()
        else:
            prompt = sum(_approx_tokens(m.content) for m in req.messages)
            u = Usage(prompt_tokens=prompt, completion_tokens=_approx_tokens(content))
        u.calls = 1
        if not u.cost:
            u.cost = cost_of(u, self.name, self.prices)
        return u

    async def request(self, req: ModelRequest) -> ModelResponse:
        self.requests.append(req)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self._fn is not None:
            reply = self._fn(req)
            if inspect.isawaitable(reply):
                reply = await reply
        else:
            if not self._queue:
                raise ModelError(
                    f"ScriptedModel {self.name!r}: script exhausted after {len(self.responses)} replies",
                    usage=Usage(calls=1, failed_calls=1),
                )
            reply = self._queue.pop(0)
        if isinstance(reply, ModelError):
            raise reply
        if isinstance(reply, Exception):
            raise ModelError(
                f"{type(reply).__name__}: {reply}", usage=Usage(calls=1, failed_calls=1)
            ) from reply
        if isinstance(reply, str):
            resp = ModelResponse(content=reply)
        elif isinstance(reply, dict):
            resp = ModelResponse(content=json.dumps(reply))
        elif isinstance(reply, ModelResponse):
            resp = reply.model_copy(deep=True)
        else:
            raise TypeError(f"ScriptedModel: unsupported reply type {type(reply).__name__}")
        resp.model = resp.model or self.name
        resp.usage = self._usage(req, resp.content, resp.usage)
        self.responses.append(resp)
        return resp

    def total_usage(self) -> Usage:
        """The sum over every call this double answered (failed ones included by the caller's ledger)."""
        out = Usage()
        for r in self.responses:
            out = out + r.usage
        return out


def _user_text(req: ModelRequest) -> str:
    return next((m.content for m in req.messages if isinstance(m, UserMessage)), "")


def _unrouted(req: ModelRequest, double: str) -> LookupError:
    return LookupError(
        f"{double}: no answer for a request (role {req.role!r}) with purpose {req.purpose!r}; "
        "every request a run makes carries a purpose (verimap.base.purpose)"
    )


# ---- a scripted world ---------------------------------------------------------------------------

OutputsFn = Callable[[str, int, dict[str, Any], str], dict[str, Any] | str]
JudgeFn = Callable[[str, str, dict[str, Any]], tuple[bool, str]]


class ScriptedWorld:
    """A test double of the models of every role of a run, driven by tables instead of a call
    order. It answers each request by its purpose:

    - a plan (or a replan, or a repair): `plans[i]` on the i-th such call (the last one repeats);
      the planner's free-text reasoning gets a line of text;
    - an executor call of node n: `outputs(n, k, inputs, prompt)` for its k-th call, as JSON, or
      as written when it returns a string (a text-only executor's reply). `inputs` are the
      node's input values as the executor was given them; `prompt` is its user turn;
    - a judge's verdict: `judge(n, criterion, outputs) -> (passed, explanation)` for each of its
      criteria, after a free-text reasoning call;
    - an independent solution of the task (a program and its fix, a reference function, a bare
      sample): `solve(task)`; a sampled reasoning reply goes to `sample(task)` when given.
    """

    def __init__(
        self,
        plans: Sequence[dict[str, Any] | Plan],
        outputs: OutputsFn,
        judge: JudgeFn | None = None,
        *,
        solve: Callable[[str], str] | None = None,
        sample: Callable[[str], str] | None = None,
        latency_s: float = 0.0,
        supports_tools: bool = True,
        name: str = "scripted-world",
    ):
        self.plans = [parse_plan(p) for p in plans]
        self.outputs = outputs
        self.judge = judge or (lambda node_id, criterion, outs: (True, "looks right"))
        self.solve = solve or (lambda task: "I cannot tell.")
        self.sample = sample
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
            if isinstance(r.purpose, PlanCall) and r.purpose.kind != "think"
        ]

    def _answer(self, req: ModelRequest) -> ModelResponse | str | dict:
        p = req.purpose
        if isinstance(p, PlanCall):
            if p.kind == "think":
                return "Let me work the task out before I write the plan."
            plan = self.plans[min(self.planner_calls, len(self.plans) - 1)]
            self.planner_calls += 1
            return plan.to_json()
        if isinstance(p, ExecuteCall):
            return self._execute(p, _user_text(req))
        if isinstance(p, JudgeCall):
            if not p.final_call:
                return "Let me reason about the criteria."
            verdicts = {}
            for name, criterion in p.criteria.items():
                passed, why = self.judge(p.node_id, criterion, dict(p.outputs))
                verdicts[name] = {"passed": passed, "explanation": why}
            return verdicts if len(verdicts) > 1 else next(iter(verdicts.values()))
        if isinstance(p, SolveCall):
            if p.kind == "sample" and self.sample is not None:
                return self.sample(p.task)
            return self.solve(p.task)
        raise _unrouted(req, "ScriptedWorld")

    def _execute(self, p: ExecuteCall, prompt: str) -> str:
        k = self.executor_calls[p.node_id]
        self.executor_calls[p.node_id] += 1
        self.executor_prompts[p.node_id].append(prompt)
        self.order.append(p.node_id)
        reply = self.outputs(p.node_id, k, dict(p.inputs), prompt)
        return reply if isinstance(reply, str) else json.dumps(reply)

    def models(self) -> dict[str, ScriptedModel]:
        return {"planner": self.model, "executor": self.model, "judge": self.model}


# ---- models that know a benchmark's answers -----------------------------------------------------


class Throttled:
    """A model double behind an endpoint that serves at most as many calls at once as its
    `slots` allow (shared by every role on the endpoint), as one model server does."""

    def __init__(self, model: ScriptedModel, slots: asyncio.Semaphore) -> None:
        self.model = model
        self.name = model.name
        self.supports_tools = model.supports_tools
        self.slots = slots

    @property
    def calls(self) -> int:
        return self.model.calls

    async def request(self, req: ModelRequest) -> ModelResponse:
        async with self.slots:
            return await self.model.request(req)


def _is_code(task: EvalTask) -> bool:
    """HumanEval's tasks, and a custom benchmark's scored by tests."""
    return task.benchmark == "humaneval" or "entry_point" in task.meta


def _answer_for(task: EvalTask, wrong: bool) -> Any:
    if task.benchmark == "gsm8k":
        return str(int(float(task.gold)) + 1) if wrong else f"The answer is {task.gold}."
    if _is_code(task):
        body = "    return None\n" if wrong else task.meta.get("solution", "")
        return f"```python\n{task.meta['prompt']}{body}```"
    return (
        "Insufficient information."
        if wrong and task.gold != "Insufficient information."
        else task.gold
    )


def _program_for(task: EvalTask, wrong: bool) -> str:
    """What the answer-agreement check and the `program` baseline ask for: a program that returns
    the task's number. A code or a text task has no such program; it gets its answer as is."""
    if task.benchmark != "gsm8k":
        return str(_answer_for(task, wrong))
    value = int(float(task.gold)) + 1 if wrong else task.gold
    return f"```python\ndef solution():\n    return {value}\n```"


def _plan(task: EvalTask) -> dict[str, Any]:
    """One node for the whole task; its output is code for a code task, as the planner's answer
    types demand (`PLAN_ANSWER_TYPES`). The executor double answers under the names its
    request asks for, so other plans (react's one node) work too."""
    name, kind = ("code", "code") if _is_code(task) else ("answer", "string")
    return {
        "nodes": [
            {
                "id": "solve",
                "name": "Solve",
                "instruction": "Solve the task and give the final answer.",
                "inputs": [USER_TASK],
                "outputs": {name: kind},
                "verification": [
                    {
                        "name": "nonempty",
                        "type": "python",
                        "code": f"assert outputs[{name!r}].strip(), 'the answer is empty'",
                    },
                    {
                        "name": "answers_task",
                        "type": "llm",
                        "content": "The answer addresses the task.",
                    },
                ],
            }
        ],
        "edges": [],
    }


def _first_tool(req: ModelRequest, task: EvalTask) -> ModelResponse | None:
    """One domain tool call before the answer, so tests see tools used: only in an agent loop
    that has not called one yet."""
    names = [t["function"]["name"] for t in req.tools or []]
    if any(m.role == "tool" for m in req.messages) or req.response_schema is not None:
        return None
    if "calculator" in names:
        return tool_call_reply("calculator", {"expression": "6*7"})
    if "search" in names:
        return tool_call_reply("search", {"query": task.prompt.split("\n")[0][:100]})
    if "list_files" in names:
        return tool_call_reply("list_files", {})
    return None


def oracle_models(
    tasks: list[EvalTask],
    *,
    latency_s: float = 0.0,
    wrong_every: int = 0,
    tool_first: bool = True,
    max_in_flight: int | None = None,
) -> dict[str, Any]:
    """Planner, executor and judge doubles that answer every task of `tasks` from its gold data,
    or wrongly for every `wrong_every`-th task, so the eval harness (runner, resume, scoring,
    report, methods) can be tested and benchmarked end to end without a model server. With
    `tool_first`, an executor calls one domain tool before it answers; with `max_in_flight`,
    all three are on one endpoint that answers that many calls at once.

    A request's purpose says what to answer. Which task it is about is the one thing only its
    text can tell (a run knows its task by its text alone): the planner's and the solutions'
    purposes carry the task, and an executor's its `USER_TASK` input."""
    by_text: dict[str, tuple[int, EvalTask]] = {}
    for i, t in enumerate(tasks):
        by_text.setdefault(t.prompt, (i, t))

    def find(text: Any) -> tuple[EvalTask, bool]:
        if not isinstance(text, str) or text not in by_text:
            raise LookupError("oracle double: the request is about no known task")
        i, task = by_text[text]
        return task, bool(wrong_every) and (i + 1) % wrong_every == 0

    def answer(req: ModelRequest) -> Any:
        p = req.purpose
        if isinstance(p, PlanCall):
            return "I will solve it in one step." if p.kind == "think" else _plan(find(p.task)[0])
        if isinstance(p, JudgeCall):
            if not p.final_call:
                return "The output meets the criterion."
            verdict = {"passed": True, "explanation": "the output meets the criterion"}
            return {name: verdict for name in p.criteria} if len(p.criteria) > 1 else verdict
        if isinstance(p, SolveCall):
            task, wrong = find(p.task)
            return _program_for(task, wrong) if p.kind == "program" else _answer_for(task, wrong)
        if isinstance(p, ExecuteCall):
            task, wrong = find(p.inputs.get(USER_TASK))
            called = _first_tool(req, task) if tool_first else None
            return called or _executed(p, _answer_for(task, wrong))
        raise _unrouted(req, "oracle double")

    models = {
        role: ScriptedModel(answer, name=f"oracle-{role}", latency_s=latency_s)
        for role in ("planner", "executor", "judge")
    }
    if max_in_flight is None:
        return models
    slots = asyncio.Semaphore(max_in_flight)
    return {role: Throttled(m, slots) for role, m in models.items()}


def _executed(p: ExecuteCall, answer: Any) -> ModelResponse:
    """The answer under the first output the request asks for (as a number when it is one), or
    as written for a text-only executor (map), which is asked for none."""
    if not p.outputs:
        return ModelResponse(content=str(answer))
    name, spec = next(iter(p.outputs.items()))
    if spec == "number" and isinstance(answer, str):
        answer = answer.removeprefix("The answer is ").rstrip(".")
    return ModelResponse(content=json.dumps({name: answer}))


def oracle_factory(
    benchmark: str | Benchmark,
    data_dir: str | None = None,
    *,
    latency_s: float | None = None,
    wrong_every: int | None = None,
    max_in_flight: int | None = None,
) -> dict[str, Any]:
    """`oracle_models` for a benchmark: `verimap eval --models-factory
    verimap.testing:oracle_factory` (tests only), by name or, for a custom benchmark, the
    benchmark itself. Latency and wrong answers not given come from
    VERIMAP_DOUBLE_LATENCY / VERIMAP_DOUBLE_WRONG_EVERY."""
    if latency_s is None:
        latency_s = getenv_float("VERIMAP_DOUBLE_LATENCY", 0.0)
    if wrong_every is None:
        wrong_every = getenv_int("VERIMAP_DOUBLE_WRONG_EVERY", 0)
    bench = benchmark if isinstance(benchmark, Benchmark) else get_benchmark(benchmark, data_dir)
    return oracle_models(
        bench.tasks(),
        latency_s=latency_s,
        wrong_every=wrong_every,
        max_in_flight=max_in_flight,
    )


# ---- an in-process sandbox ----------------------------------------------------------------------


class InProcessSandboxDouble(Sandbox):
    """A sandbox test double that judges VFs in this process with the worker's own VF runner, on
    a job built as the real backends build it (policy check, bytecode, codec): same namespace and
    helpers, same PASS/FAIL/ERROR/POLICY rules and messages. No isolation and no time limit: for
    logic tests of trusted code only. `policy=False` runs VFs unrestricted, as the backends can."""

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


class EngineGoneSandboxDouble(InProcessSandboxDouble):
    """A sandbox test double whose engine is gone: every program it is given to run comes back
    as a sandbox error with `message`, as the Docker backend reports a daemon that went away."""

    kind = "engine-gone-double"

    def __init__(self, message: str = "the Docker daemon went away") -> None:
        super().__init__()
        self.message = message

    async def run_program(self, code, *, timeout=10.0, files=None, argv=None, stdin=""):
        return ExecResult(outcome=Outcome.SANDBOX_ERROR, message=self.message)


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


def need(condition: bool, reason: str) -> None:
    """In a test: go on if `condition`, else fail under CI (which must provide Docker, the model,
    Chromium, ...) and skip elsewhere, where they are optional."""
    if condition:
        return
    import pytest

    if getenv("CI"):
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


class HashingEmbedderDouble:
    """An `Embedder` double: bag-of-words hashed into 64 unit-length dimensions; deterministic,
    no model to load (numpy, from the eval extras, is imported when it encodes)."""

    name = "hashing-double"

    def encode(self, texts: Sequence[str]) -> Any:
        import numpy as np

        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.strip(".,?").encode()).hexdigest(), 16) % 64] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)
