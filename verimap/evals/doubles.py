"""Test doubles for the eval harness: scripted models that know the benchmark's answers.

`oracle_models` answers every task from the gold data (or deliberately wrongly
for every `wrong_every`-th task), so the harness (runner, resume, scoring,
report, methods) can be tested and benchmarked end to end without a model
server. It is a test double: nothing in verimap falls back to it, and numbers
measured with it say nothing about any real model.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from verimap.env import getenv_float, getenv_int
from verimap.evals.tasksets import EvalTask, get_benchmark
from verimap.llm.base import ModelRequest, ModelResponse
from verimap.llm.double import ScriptedModel, tool_call_reply


class Throttled:
    """A model behind an endpoint that serves at most as many calls at once as its
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


def _squash(text: str) -> str:
    text = text.replace("\\n", " ").replace('\\"', '"').replace("\\u2019", "\u2019")
    return re.sub(r"\W+", "", text)


def _answer_for(task: EvalTask, wrong: bool) -> Any:
    if task.benchmark == "gsm8k":
        return str(int(float(task.gold)) + 1) if wrong else f"The answer is {task.gold}."
    if task.benchmark == "humaneval":
        body = "    return None\n" if wrong else task.meta.get("solution", "")
        return f"```python\n{task.meta['prompt']}{body}```"
    return (
        "Insufficient information."
        if wrong and task.gold != "Insufficient information."
        else task.gold
    )


def _output(task: EvalTask) -> tuple[str, str]:
    """The answer's name and type in the double's plans: code for a code task, as the planner's
    answer types demand (`PLAN_ANSWER_TYPES`). The executor double answers under the name its
    request asks for."""
    return ("code", "code") if task.benchmark == "humaneval" else ("answer", "string")


def _plan(task: EvalTask) -> dict[str, Any]:
    name, kind = _output(task)
    return {
        "nodes": [
            {
                "id": "solve",
                "name": "Solve",
                "instruction": "Solve the task and give the final answer.",
                "inputs": ["USER_TASK"],
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


def oracle_models(
    tasks: list[EvalTask],
    *,
    latency_s: float = 0.0,
    wrong_every: int = 0,
    tool_first: bool = True,
    max_in_flight: int | None = None,
) -> dict[str, Any]:
    """Planner, executor and judge doubles for `tasks` (see the module docstring); with
    `max_in_flight`, on one endpoint that answers that many calls at once."""
    keys = [(_squash(t.meta.get("prompt") or t.prompt.split("\n\n")[0])[:160], t) for t in tasks]

    def find(req: ModelRequest) -> EvalTask:
        text = _squash(" ".join(m.content for m in req.messages))
        for k, t in keys:
            if k and k in text:
                return t
        raise LookupError("oracle double: no known task in the request")

    def index_of(task: EvalTask) -> int:
        return next(i for i, (_, t) in enumerate(keys) if t is task)

    def planner(req: ModelRequest) -> Any:
        return _plan(find(req))

    def executor(req: ModelRequest) -> Any:
        task = find(req)
        used_tool = any(m.role == "tool" for m in req.messages)
        if tool_first and not used_tool and req.tools and req.response_schema is None:
            names = [t["function"]["name"] for t in req.tools]
            if "calculator" in names:
                return tool_call_reply("calculator", {"expression": "6*7"})
            if "search" in names:
                return tool_call_reply("search", {"query": task.prompt.split("\n")[0][:100]})
            if "list_files" in names:
                return tool_call_reply("list_files", {})
        wrong = bool(wrong_every) and (index_of(task) + 1) % wrong_every == 0
        answer = _answer_for(task, wrong)
        user = next(m.content for m in req.messages if m.role == "user")
        asked = re.search(r"Required outputs: (\w+)( \(number\))?", user)
        if asked is None:
            return ModelResponse(content=str(answer))  # a text-only executor (map) replies in prose
        if asked[2] and isinstance(answer, str):
            answer = answer.removeprefix("The answer is ").rstrip(".")
        return ModelResponse(content=json.dumps({asked[1]: answer}))

    def judge(req: ModelRequest) -> Any:
        if req.response_schema is not None:
            return {"passed": True, "explanation": "the output meets the criterion"}
        return "The output meets the criterion."

    models = {
        "planner": ScriptedModel(planner, name="oracle-planner", latency_s=latency_s),
        "executor": ScriptedModel(executor, name="oracle-executor", latency_s=latency_s),
        "judge": ScriptedModel(judge, name="oracle-judge", latency_s=latency_s),
    }
    if max_in_flight is None:
        return models
    slots = asyncio.Semaphore(max_in_flight)
    return {role: Throttled(m, slots) for role, m in models.items()}


def factory(
    benchmark: str,
    data_dir: str | None = None,
    *,
    latency_s: float | None = None,
    wrong_every: int | None = None,
    max_in_flight: int | None = None,
) -> dict[str, Any]:
    """Entry point for `verimap eval --models-factory verimap.evals.doubles:factory` (tests only).

    Latency and wrong answers not given come from VERIMAP_DOUBLE_LATENCY /
    VERIMAP_DOUBLE_WRONG_EVERY."""
    bench = get_benchmark(benchmark, data_dir)
    return oracle_models(
        bench.tasks(),
        latency_s=getenv_float("VERIMAP_DOUBLE_LATENCY", 0.0) if latency_s is None else latency_s,
        wrong_every=getenv_int("VERIMAP_DOUBLE_WRONG_EVERY", 0)
        if wrong_every is None
        else wrong_every,
        max_in_flight=max_in_flight,
    )
