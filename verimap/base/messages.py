"""Typed chat messages, generation settings, and the request and response of a model call:
what crosses between verimap's components.

Components build and read these models; only the OpenAI client turns them into the
OpenAI chat format (`to_openai`), so a typo in a role or a key fails where it is made, not
as an HTTP 400 from the server. Plain OpenAI dicts still validate into them (the union is
discriminated by `role`), so callers that build dicts keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from verimap.base.purpose import Purpose
from verimap.base.usage import Usage


class ToolCall(BaseModel):
    """One call of a tool the model asked for; `arguments` is the JSON text the model wrote."""

    id: str
    name: str
    arguments: str = "{}"

    @model_validator(mode="before")
    @classmethod
    def _from_openai(cls, data: Any) -> Any:
        """Accept the OpenAI wire shape (`{"id", "type", "function": {"name", "arguments"}}`)."""
        if isinstance(data, dict) and isinstance(data.get("function"), dict):
            fn = data["function"]
            return {"id": data.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments")}
        return data


class _Message(BaseModel):
    # Unknown keys fail loudly rather than vanishing from what the model is sent.
    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("content", mode="before", check_fields=False)
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        """The OpenAI format allows `content: None` beside tool calls, but llama.cpp's server
        rejects it (HTTP 500)."""
        return "" if v is None else v


class SystemMessage(_Message):
    role: Literal["system"] = "system"
    content: str


class UserMessage(_Message):
    role: Literal["user"] = "user"
    content: str


class AssistantMessage(_Message):
    role: Literal["assistant"] = "assistant"
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolMessage(_Message):
    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str = ""
    content: str


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def as_messages(messages: Sequence[Message | dict[str, Any]]) -> list[Message]:
    """`messages` as typed models; OpenAI dicts are validated, models kept as they are."""
    return _MESSAGES.validate_python(list(messages))


def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The OpenAI chat format of `messages`, with keys in the order the format documents."""
    return [_openai(m) for m in messages]


def _openai(m: Message) -> dict[str, Any]:
    if isinstance(m, AssistantMessage):
        out: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            out["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": tc.arguments},
                }
                for tc in m.tool_calls
            ]
        return out
    if isinstance(m, ToolMessage):
        out = {"role": m.role, "tool_call_id": m.tool_call_id}
        if m.name:
            out["name"] = m.name
        out["content"] = m.content
        return out
    return {"role": m.role, "content": m.content}


class GenerationSettings(BaseModel):
    """How a reply is sampled, as one value: components pass it on whole instead of repeating
    three loose parameters, and derive variants (a retry's temperature) with `replace`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    # Texts that end the reply where they would begin (at most 4, the OpenAI API's limit).
    stop: tuple[str, ...] | None = Field(default=None, max_length=4)
    # The sampler's seed, sent as the request's `seed` (endpoints that take one repeat a sample
    # for it, as far as they can). A request repeated word for word is sent seed + k the k-th
    # time (`OpenAIModel`), so a seed makes a run repeatable without making its samples alike.
    seed: int | None = None

    def replace(self, **changes: Any) -> GenerationSettings:
        """A copy with `changes`, validated (unlike `model_copy(update=...)`)."""
        return self.model_validate({**self.model_dump(), **changes})


class ModelRequest(BaseModel):
    """One call to a model. Sampling knobs go in `settings`; any other keyword is refused."""

    model_config = ConfigDict(extra="forbid")

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


class ModelResponse(BaseModel):
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None
