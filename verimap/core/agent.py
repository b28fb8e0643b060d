"""The tool loop the agent roles share: reason, call tools, read what they return, answer.

The executor solves a node with it; the judge (the paper's ReAct verifier) checks a node's
outputs with it. Tools go through the OpenAI tools API when the model has one, else through
a ReAct text protocol ("Action:" / "Action Input:" / "Observation:").
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

from verimap.base.execution import OnToolCall
from verimap.base.messages import (
    AssistantMessage,
    GenerationSettings,
    Message,
    ModelRequest,
    ToolMessage,
    UserMessage,
)
from verimap.base.protocols import Model
from verimap.base.purpose import Purpose
from verimap.core import prompts
from verimap.llm.structured import extract_json
from verimap.tools.registry import ToolRegistry, ToolsExhausted, transcript_scope

_ACTION = re.compile(
    r"Action\s*:\s*(?P<tool>[A-Za-z_][\w\-]*)\s*\n+\s*Action Input\s*:\s*(?P<args>.*)", re.S
)
_FINAL = re.compile(r"Final Answer\s*:", re.I)


def parse_react(text: str) -> tuple[str, str] | None:
    """(tool, json args) when the reply asks for an action before any final answer."""
    final = _FINAL.search(text)
    m = _ACTION.search(text)
    if not m or (final and final.start() < m.start()):
        return None
    args = m.group("args").strip()
    args = args.split("\nObservation", 1)[0].strip()
    try:
        value = extract_json(args)
        args = json.dumps(value)
    except ValueError:
        pass
    return m.group("tool"), args


_CALL_START = re.compile(r'\{\s*"name"\s*:')
_DECODER = json.JSONDecoder()


def inline_tool_call(text: str, tools: ToolRegistry) -> tuple[str, str, int] | None:
    """(tool, json arguments, end offset) of the first call of a known tool that a model wrote
    into its reply as text (`{"name": "calculator", "arguments": {...}}`, fenced, tagged or bare)
    instead of through the tools API.

    A model that does this goes on with a result it imagines. The call is run, and the reply is
    cut where the call ends, so the model goes on from the real result (design/decisions.md,
    D10)."""
    for m in _CALL_START.finditer(text):
        try:
            obj, end = _DECODER.raw_decode(text, m.start())
        except ValueError:
            continue
        args = obj.get("arguments", obj.get("parameters"))
        if obj.get("name") in tools and isinstance(args, dict):
            fence = re.match(r"\s*(?:```|</tool_call>)", text[end:])
            return obj["name"], json.dumps(args), end + (fence.end() if fence else 0)
    return None


def flatten_tool_messages(messages: list[Message]) -> list[Message]:
    """The transcript with tool calls and results as plain text, so the final structured call
    needs no `tools` parameter (servers differ on tool history without tools, and on tools
    combined with a response schema)."""
    out: list[Message] = []
    for m in messages:
        if isinstance(m, AssistantMessage) and m.tool_calls:
            calls = "; ".join(f"{tc.name}({tc.arguments})" for tc in m.tool_calls)
            text = m.content.strip()
            out.append(AssistantMessage(content=f"{text}\n[called tools: {calls}]".strip()))
        elif isinstance(m, ToolMessage):
            out.append(UserMessage(content=f"Tool result: {m.content}"))
        else:
            out.append(m)
    return out


def uses_tool_api(model: Model, tools: ToolRegistry) -> bool:
    return bool(model.supports_tools and len(tools))


def react_protocol(model: Model, tools: ToolRegistry) -> str:
    """What the system prompt adds so a model without a tools API can still call tools."""
    if len(tools) and not uses_tool_api(model, tools):
        return prompts.EXECUTOR_REACT.format(tools=tools.describe())
    return ""


def brief(arguments: str, limit: int = 60) -> str:
    """A call's JSON arguments as `name='value'` pairs, each value cut to `limit` characters."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments[:limit]
    if not isinstance(value, dict):
        return arguments[:limit]
    cut = {
        k: v if not isinstance(v, str) or len(v) <= limit else v[:limit] + "…"
        for k, v in value.items()
    }
    return ", ".join(f"{k}={v!r}" for k, v in cut.items())


@dataclass
class LoopResult:
    messages: list[Message]  # the transcript, the last reply included
    text: str  # the last reply
    answered: bool  # False: the step limit, or a repeated tool call, ended the loop
    steps: int
    tool_calls: int


async def tool_loop(
    model: Model,
    tools: ToolRegistry,
    messages: list[Message],
    *,
    role: str,
    max_steps: int,
    settings: GenerationSettings | None = None,
    on_tool_call: OnToolCall | None = None,
    purpose: Purpose | None = None,
    opening: list[tuple[str, str]] | None = None,
) -> LoopResult:
    """Call the model until it replies without asking for a tool, `max_steps` replies, or a
    tool takes no more calls (`ToolsExhausted`: its message is the last thing the agent hears).
    `messages` grows with the transcript; `on_tool_call(tool, arguments, result, seconds)` hears
    every call (traces record them); `purpose` goes with every request. `opening`: (tool, JSON
    arguments) of calls made before the first request (`ToolRegistry.opening_calls`), their
    results given in one user turn after the first; they count as tool calls, not steps. The calls
    belong to one `transcript_scope`, for tools that answer by what this conversation was shown.
    Model and budget errors propagate; `model` is metered by whoever passes it (a run passes
    its `RunContext.model`)."""
    with transcript_scope():
        return await _loop(
            model, tools, messages, role, max_steps, settings, on_tool_call, purpose, opening or []
        )


async def _loop(
    model: Model,
    tools: ToolRegistry,
    messages: list[Message],
    role: str,
    max_steps: int,
    settings: GenerationSettings | None,
    on_tool_call: OnToolCall | None,
    purpose: Purpose | None,
    opening: list[tuple[str, str]],
) -> LoopResult:
    api = uses_tool_api(model, tools)
    steps = tool_calls = 0
    text = ""
    done: dict[tuple[str, str], str] = {}  # each call made so far, with its result

    async def call(name: str, arguments: str) -> tuple[str, bool]:
        """(result, whether the call is new). A repeated call is answered from `done`: a small
        model stuck on one call would otherwise spend every step on it (design/decisions.md,
        D11)."""
        nonlocal tool_calls
        if (name, arguments) in done:
            return done[name, arguments], False
        start = time.monotonic()
        try:
            result = done[name, arguments] = await tools.call(name, arguments)
        except ToolsExhausted as e:
            if on_tool_call is not None:
                on_tool_call(name, arguments, str(e), time.monotonic() - start)
            raise
        tool_calls += 1
        if on_tool_call is not None:
            on_tool_call(name, arguments, result, time.monotonic() - start)
        return result, True

    opened = []
    for name, arguments in opening:
        try:
            result, _ = await call(name, arguments)
        except ToolsExhausted as e:
            result = str(e)
        shown = prompts.OPENING_RESULT.format(tool=name, arguments=brief(arguments), result=result)
        opened.append(shown)
    if opened:
        messages.append(UserMessage(content="\n\n".join(opened)))

    while steps < max_steps:
        resp = await model.request(
            ModelRequest(
                messages=messages,
                tools=tools.openai_specs() if api else None,
                tool_choice="auto" if api else None,
                role=role,
                settings=settings or GenerationSettings(),
                purpose=purpose,
            )
        )
        steps += 1
        text = resp.content or ""
        if resp.tool_calls:
            messages.append(AssistantMessage(content=text, tool_calls=resp.tool_calls))
            new = False
            spent: str | None = None
            for tc in resp.tool_calls:
                if spent is None:
                    try:
                        result, fresh = await call(tc.name, tc.arguments)
                    except ToolsExhausted as e:
                        spent = str(e)
                if spent is not None:
                    result, fresh = spent, False
                new |= fresh
                messages.append(ToolMessage(tool_call_id=tc.id, content=result))
            if spent is not None:
                return LoopResult(messages, text, False, steps, tool_calls)
            if new:
                continue
            messages.append(UserMessage(content=prompts.REPEATED_TOOL_CALL))
            return LoopResult(messages, text, False, steps, tool_calls)
        action = None if api or not len(tools) else parse_react(text)
        inline = None if action is not None or not len(tools) else inline_tool_call(text, tools)
        if inline is not None:
            action, cut = inline[:2], inline[2]
            said, reply = text[:cut], prompts.INLINE_TOOL_RESULT
        else:
            said, reply = text, "Observation: {result}"
        if action is not None:
            try:
                result, fresh = await call(*action)
            except ToolsExhausted as e:
                messages.append(AssistantMessage(content=said))
                messages.append(UserMessage(content=str(e)))
                return LoopResult(messages, text, False, steps, tool_calls)
            messages.append(AssistantMessage(content=said))
            if not fresh:
                messages.append(UserMessage(content=prompts.REPEATED_TOOL_CALL))
                return LoopResult(messages, text, False, steps, tool_calls)
            messages.append(UserMessage(content=reply.format(tool=action[0], result=result)))
            continue
        messages.append(AssistantMessage(content=text))
        return LoopResult(messages, text, True, steps, tool_calls)
    messages.append(
        UserMessage(content=f"You reached the limit of {max_steps} steps; no more tool calls.")
    )
    return LoopResult(messages, text, False, steps, tool_calls)
