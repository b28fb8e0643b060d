"""What every model backend speaks: typed chat messages in, a response out.

Messages are the models of `verimap.base.messages`; a backend turns them into its own wire
format (the OpenAI client with `to_openai`), so nothing else depends on that format.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field, model_validator

from verimap.base.errors import VerimapError
from verimap.base.messages import (
    AssistantMessage,
    GenerationSettings,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    as_messages,
    to_openai,
)
from verimap.base.purpose import ExecuteCall, JudgeCall, PlanCall, Purpose, SolveCall
from verimap.base.usage import Usage

__all__ = [
    "AssistantMessage",
    "ExecuteCall",
    "GenerationSettings",
    "JudgeCall",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "PlanCall",
    "Purpose",
    "SolveCall",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
    "as_messages",
    "estimate_prompt_tokens",
    "to_openai",
]


class ModelRequest(BaseModel):
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    # A JSON Schema the reply must satisfy; the backend picks how to enforce it
    # (json_schema, llama.cpp's grammar-enforced json_object+schema, or JSON mode).
    response_schema: dict[str, Any] | None = None
    schema_name: str = "output"
    settings: GenerationSettings = Field(default_factory=GenerationSettings)
    # Which role the call is for (planner, executor, judge): for accounting only.
    role: str = "executor"
    # Why the call is made (`verimap.base.purpose`): for traces and test doubles, never sent.
    purpose: Purpose | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _loose_settings(cls, data: Any) -> Any:
        """Callers written before `settings` existed pass `temperature`, `top_p`, `max_tokens`."""
        if not isinstance(data, dict) or not _LOOSE.intersection(data):
            return data
        data = dict(data)
        loose = {k: data.pop(k) for k in _LOOSE if k in data}
        given = data.get("settings") or GenerationSettings()
        if isinstance(given, dict):
            given = GenerationSettings.model_validate(given)
        data["settings"] = given.replace(**loose)
        return data


_LOOSE = frozenset(GenerationSettings.model_fields)


def estimate_prompt_tokens(req: ModelRequest) -> int:
    """About four characters a token over all a request sends (messages, tools, the reply's
    schema): the charge for a call cut off before the server said what its prompt cost."""
    sent = [to_openai(req.messages), req.tools or [], req.response_schema or {}]
    return len(json.dumps(sent, ensure_ascii=False)) // 4


class ModelResponse(BaseModel):
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None


class ModelError(VerimapError, RuntimeError):
    """A model call failed for good (after the backend's own retries)."""

    def __init__(self, message: str, *, usage: Usage | None = None):
        super().__init__(message)
        self.usage = usage or Usage(calls=1, failed_calls=1)


@runtime_checkable
class Model(Protocol):
    """An async chat model. `supports_tools` False makes executors use the ReAct text protocol.

    A model may also have `provider` (who serves its API, for telemetry; the class name
    otherwise) and `base_url` (whose host and port telemetry reports)."""

    # Read-only members: a wrapper (`WrappedModel`) passes the inner model's through.
    @property
    def name(self) -> str: ...

    @property
    def supports_tools(self) -> bool: ...

    async def request(self, req: ModelRequest) -> ModelResponse: ...


class WrappedModel:
    """A model around another (metering, a cache, a reply cap), as pydantic-ai's
    `WrapperModel`: the wrapper overrides `request`, and every attribute it does not define
    (`base_url`, `provider`, `cost_of`, `aclose`, a double's `requests`) is the inner model's."""

    def __init__(self, inner: Model):
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes the wrapper lacks (and, while copying, before `inner`).
        try:
            inner = self.__dict__["inner"]
        except KeyError:
            raise AttributeError(name) from None
        return getattr(inner, name)

    @property
    def name(self) -> str:  # the Model protocol's attributes, spelled out for type checkers
        return self.inner.name

    @property
    def supports_tools(self) -> bool:
        return self.inner.supports_tools

    async def request(self, req: ModelRequest) -> ModelResponse:
        return await self.inner.request(req)
