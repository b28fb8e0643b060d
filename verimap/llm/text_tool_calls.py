"""Tool calls a model wrote as text, not in the API's `tool_calls` field."""

from __future__ import annotations

import json
import re
from typing import Any

from verimap.base.messages import ToolCall


def parse_text_tool_calls(content: str, tool_names: set[str]) -> list[ToolCall]:
    """Tool calls a model wrote as text (Qwen's `<tool_call>{...}</tool_call>` format).

    llama.cpp's default chat handler renders the tools into the prompt for
    `tool_choice="auto"` but returns the model's call as plain content; this
    recovers it, so `auto` works without a special `--chat_format`.
    """
    text = content.strip()
    if not text or not tool_names:
        return []
    chunks = re.findall(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", text, re.S) or [text]
    calls: list[ToolCall] = []
    for chunk in chunks:
        chunk = re.sub(r"^```(?:json)?\s*|\s*```$", "", chunk.strip())
        objs: list[Any] = []
        try:
            objs = [json.loads(chunk, strict=False)]
        except json.JSONDecodeError:
            lines = [ln for ln in chunk.splitlines() if ln.strip()]
            try:
                objs = [json.loads(ln, strict=False) for ln in lines]
            except json.JSONDecodeError:
                return []
        for obj in objs:
            if not (isinstance(obj, dict) and obj.get("name") in tool_names):
                return []
            args = obj.get("arguments", obj.get("parameters", {}))
            if not isinstance(args, (dict, str)):
                return []
            arguments = args if isinstance(args, str) else json.dumps(args)
            calls.append(
                ToolCall(
                    id=f"call_{len(calls)}_{obj['name']}", name=obj["name"], arguments=arguments
                )
            )
    return calls
