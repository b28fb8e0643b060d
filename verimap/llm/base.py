"""What every model backend speaks: OpenAI-style chat messages in, a response out.

Messages stay plain dicts in the OpenAI chat format because every backend we
target (OpenAI, vLLM, Ollama, llama.cpp's server) takes them as they are.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from verimap.errors import VerimapError
from verimap.usage import Usage

Message = dict[str, Any]


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str = "{}"


class ModelRequest(BaseModel):
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    # A JSON Schema the reply must satisfy; the backend picks how to enforce it
    # (json_schema, llama.cpp's grammar-enforced json_object+schema, or JSON mode).
    response_schema: dict[str, Any] | None = None
    schema_name: str = "output"
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    # Which role the call is for (planner, executor, judge): for accounting only.
    role: str = "executor"


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

    # Read-only members: a wrapper (`accounting.MeteredModel`) passes the inner model's through.
    @property
    def name(self) -> str: ...

    @property
    def supports_tools(self) -> bool: ...

    async def request(self, req: ModelRequest) -> ModelResponse: ...
