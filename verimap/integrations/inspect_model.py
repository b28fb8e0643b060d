"""A verimap `Model` whose requests go through an Inspect AI `Model`.

Each request of a verimap role becomes one `Model.generate` call, so Inspect's providers, its
connection limits, retries and cache serve verimap, and every call is a `ModelEvent` in the
sample's transcript (inside the span of the node it works on, when the solver gives one).

What maps: system, user, assistant (with tool calls) and tool messages; tool specs (OpenAI
function specs to `ToolInfo`) and the tool choice (`required` is Inspect's `any`); temperature,
top_p, max_tokens and stop sequences, where the Inspect model's own config leaves them unset
(an eval's `--temperature` wins, as for any solver); a reply schema, as a `ResponseSchema`
when Inspect's `JSONSchema` holds it whole; usage (with cached input tokens) and the cost
Inspect computed, else verimap's price table.

What does not: a schema Inspect's `JSONSchema` cannot hold (`$defs`/`$ref`, `const`, `oneOf`:
the planner's) is not sent, and the reply is read by verimap's own lenient parsing and repair
path (`verimap.llm.structured`), as for an endpoint in JSON mode; a call's purpose never
reaches the provider (it names the node span instead); tool-call arguments that are not JSON
reach Inspect as an empty object with a parse error; a reply Inspect served from its cache
counts in verimap's usage as the call it replays. A model of verimap's own served to Inspect
(`inspect_served`) gets the request whole, schema and purpose included, beside Inspect's types
(`ServedCall`), and answers whole the same way; what Inspect records of such a call (the
messages, the reply, the raw call) has its secrets masked (`redaction.redact`), and a reply
Inspect replays from its cache is that masked copy.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from verimap.base.messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from verimap.base.model import ModelError
from verimap.base.purpose import Purpose
from verimap.base.redaction import redact, secret_values
from verimap.base.usage import Usage, cost_of, price_known
from verimap.integrations import missing_extra
from verimap.llm.openai_model import parse_text_tool_calls

try:
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        GenerateConfig,
        ModelOutput,
        ModelUsage,
        ResponseSchema,
    )
    from inspect_ai.model import Model as InspectModelType
    from inspect_ai.tool import ToolCall as InspectToolCall
    from inspect_ai.tool import ToolChoice, ToolFunction, ToolInfo, ToolParams
    from inspect_ai.util import JSONSchema, LimitExceededError
    from inspect_ai.util._span import parent_span  # no public way to nest under a given span
except ModuleNotFoundError as e:
    raise missing_extra(e, "inspect_ai", "inspect") from None


@dataclass
class ServedCall:
    """The generate call a served verimap model answers (`inspect_served`): the request whole,
    which Inspect's types cannot hold, and the reply whole once it answered."""

    request: ModelRequest
    response: ModelResponse | None = None


# The call of the one generate call the adapter makes, passed beside Inspect's types.
CURRENT_CALL: ContextVar[ServedCall | None] = ContextVar("verimap_call", default=None)
# Where a served model's reply travels, secrets masked, in its `ModelOutput.metadata`: for a
# reply Inspect replays from its cache, when no `ServedCall` was answered.
RESPONSE_KEY = "verimap_response"

_STOP = {"max_tokens": "length", "model_length": "length"}

SpanFor = Callable[[Purpose | None], str | None]


def to_inspect_messages(messages: list[Message]) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append(ChatMessageSystem(content=m.content))
        elif isinstance(m, AssistantMessage):
            calls = [inspect_call(tc) for tc in m.tool_calls] or None
            out.append(ChatMessageAssistant(content=m.content, tool_calls=calls))
        elif isinstance(m, ToolMessage):
            out.append(
                ChatMessageTool(
                    content=m.content, tool_call_id=m.tool_call_id, function=m.name or None
                )
            )
        else:
            out.append(ChatMessageUser(content=m.content))
    return out


def _masked(messages: list[Message]) -> list[Message]:
    """`messages` with their secrets masked, each message kept as its own type."""
    secrets = secret_values()
    out: list[Message] = []
    for m in messages:
        dumped = m.model_dump()
        clean = redact(dumped, secrets)
        out.append(m if clean == dumped else type(m).model_validate(clean))
    return out


def inspect_call(tc: ToolCall) -> InspectToolCall:
    try:
        args = json.loads(tc.arguments or "{}", strict=False)
    except json.JSONDecodeError as e:
        return InspectToolCall(id=tc.id, function=tc.name, arguments={}, parse_error=str(e))
    if not isinstance(args, dict):
        return InspectToolCall(
            id=tc.id, function=tc.name, arguments={}, parse_error="arguments are not an object"
        )
    return InspectToolCall(id=tc.id, function=tc.name, arguments=args)


def to_inspect_tools(specs: list[dict[str, Any]] | None) -> list[ToolInfo]:
    tools = []
    for spec in specs or []:
        fn = spec.get("function", spec)
        tools.append(
            ToolInfo(
                name=fn["name"],
                description=fn.get("description") or fn["name"],
                parameters=ToolParams.model_validate(fn.get("parameters") or {}),
            )
        )
    return tools


def to_inspect_choice(choice: str | dict[str, Any] | None, has_tools: bool) -> ToolChoice | None:
    if not has_tools:
        return None
    if isinstance(choice, dict):
        return ToolFunction(name=choice.get("function", choice)["name"])
    return {"required": "any", "none": "none"}.get(choice or "auto", "auto")  # type: ignore[return-value]


def response_schema(req: ModelRequest) -> ResponseSchema | None:
    """The request's reply schema as Inspect's `ResponseSchema`, or None when it has none or
    Inspect's `JSONSchema` would drop part of it (a provider must not enforce a schema other
    than the one asked for)."""
    if req.response_schema is None:
        return None
    try:
        schema = JSONSchema.model_validate(req.response_schema)
    except ValueError:
        return None
    if schema.model_dump(exclude_none=True) != req.response_schema:
        return None
    return ResponseSchema(name=req.schema_name, json_schema=schema)


def calls_of(output: ModelOutput, req: ModelRequest) -> tuple[str, list[ToolCall]]:
    """The reply's text and tool calls; calls written as text (Qwen's `<tool_call>`) are
    recovered as `OpenAIModel` does for llama.cpp."""
    msg = output.message
    content = msg.text
    calls = [
        ToolCall(id=tc.id, name=tc.function, arguments=json.dumps(tc.arguments))
        for tc in msg.tool_calls or []
    ]
    if not calls and req.tools and req.tool_choice != "none":
        names = {t["function"]["name"] for t in req.tools if "function" in t}
        calls = parse_text_tool_calls(content, names)
        if calls:
            content = ""
    return content, calls


def usage_of(output: ModelOutput) -> Usage:
    """verimap's usage of one call, from Inspect's `ModelUsage` (whose input tokens exclude
    those read from or written to the provider's prompt cache)."""
    u = output.usage
    if u is None:
        return Usage(calls=1)
    read, wrote = u.input_tokens_cache_read or 0, u.input_tokens_cache_write or 0
    return Usage(
        calls=1,
        prompt_tokens=u.input_tokens + read + wrote,
        completion_tokens=u.output_tokens,
        cached_tokens=read,
        cost=u.total_cost or 0.0,
    )


def model_usage(usage: Usage) -> ModelUsage:
    """Inspect's usage of a served verimap model's call."""
    return ModelUsage(
        input_tokens=usage.prompt_tokens - usage.cached_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        input_tokens_cache_read=usage.cached_tokens or None,
        total_cost=usage.cost or None,
    )


def served_error(e: BaseException) -> ModelError | None:
    """The `ModelError` a served verimap model raised (with its usage), behind Inspect's own."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, ModelError):
            return seen
        seen = seen.__cause__
    return None


class InspectModel:
    """A verimap `Model` on an Inspect `Model` (see the module docstring for what maps).

    `span_for(purpose)` names the Inspect span a call belongs in (the node it works on), or
    None for the current one. A sample limit Inspect raises (tokens, messages) ends the call
    like any failure, and is kept in `limit_error` for the solver to raise when the run is
    over, so the sample ends as Inspect's limits say it should.
    """

    def __init__(self, model: InspectModelType, *, span_for: SpanFor | None = None):
        self.model = model
        self.span_for = span_for
        self.limit_error: LimitExceededError | None = None

    @property
    def name(self) -> str:
        return str(self.model)

    @property
    def supports_tools(self) -> bool:
        return bool(getattr(self.served, "supports_tools", True))

    @property
    def provider(self) -> str:
        return self.name.split("/", 1)[0]

    @property
    def base_url(self) -> str | None:
        return self.model.api.base_url

    @property
    def served(self) -> Any:
        """The verimap model an `inspect_served` API serves, if that is what this wraps."""
        return getattr(self.model.api, "served", None)

    @property
    def price_known(self) -> bool:
        served = self.served
        if served is not None:
            from verimap.base.accounting import has_known_price

            return has_known_price(served)
        return price_known(self.model.api.model_name, base_url=self.base_url)

    def cost_of(self, usage: Usage) -> float:
        """The cost Inspect reported for the call (already in `usage`), else the price table's."""
        if usage.cost:
            return usage.cost
        return cost_of(usage, self.model.api.model_name, base_url=self.base_url)

    def config_for(self, req: ModelRequest) -> GenerateConfig:
        """The call's settings: verimap's where the Inspect model's config leaves them unset."""
        own, s = self.model.config, req.settings
        return GenerateConfig(
            temperature=s.temperature if own.temperature is None else None,
            top_p=s.top_p if own.top_p is None else None,
            max_tokens=s.max_tokens if own.max_tokens is None else None,
            stop_seqs=list(s.stop) if s.stop and own.stop_seqs is None else None,
            response_schema=response_schema(req),
        )

    async def request(self, req: ModelRequest) -> ModelResponse:
        tools = to_inspect_tools(req.tools)
        span = self.span_for(req.purpose) if self.span_for else None
        call = ServedCall(req)
        token = CURRENT_CALL.set(call)
        # A served model reads the request from `call`: Inspect records only a masked copy.
        messages = req.messages if self.served is None else _masked(req.messages)
        try:
            with parent_span(span) if span else contextlib.nullcontext():
                output = await self.model.generate(
                    to_inspect_messages(messages),
                    tools=tools,
                    tool_choice=to_inspect_choice(req.tool_choice, bool(tools)),
                    config=self.config_for(req),
                )
        except LimitExceededError as e:
            self.limit_error = self.limit_error or e
            raise ModelError(f"{self.name}: {e}") from e
        except Exception as e:
            if (theirs := served_error(e)) is not None:
                raise theirs from None
            raise ModelError(f"{self.name}: {type(e).__name__}: {e}") from e
        finally:
            CURRENT_CALL.reset(token)
        if call.response is not None:
            return call.response
        replayed = (output.metadata or {}).get(RESPONSE_KEY)
        if isinstance(replayed, dict):  # a served verimap model's reply, from Inspect's cache
            return ModelResponse.model_validate(replayed)
        if not output.choices:
            raise ModelError(f"{self.name} returned no choices", usage=usage_of(output))
        content, calls = calls_of(output, req)
        usage = usage_of(output)
        usage.cost = self.cost_of(usage)
        stop = output.stop_reason
        return ModelResponse(
            content=content,
            tool_calls=calls,
            usage=usage,
            model=output.model or self.name,
            finish_reason="tool_calls" if calls else _STOP.get(stop, stop),
        )
