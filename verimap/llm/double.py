"""`ScriptedModel`: a test double that answers from a script instead of a server.

Like pydantic-ai's `FunctionModel`: give it a function of the request, or a list of
canned replies consumed in order. It records every request so tests can inspect
prompts, can sleep a fixed latency so schedulers can be measured, and reports
usage (and cost, from the price table) so accounting can be tested. It is a test
tool: nothing in verimap ever falls back to it.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from verimap.llm.base import ModelError, ModelRequest, ModelResponse, ToolCall
from verimap.usage import Price, Usage, cost_of

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
    """A `Model` whose replies come from `script` (a function or a list).

    Replies may be a `ModelResponse`, a string (the content), a dict (sent as JSON
    content) or an exception instance (raised, counted as a failed call). Usage is
    filled in from message lengths unless the reply carries its own.
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
        self._lock = asyncio.Lock()
        if callable(script):
            self._fn: ScriptFn | None = script
            self._queue: list[Reply] = []
        else:
            self._fn = None
            self._queue = list(script)
        self._ids = itertools.count(1)

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
