"""Structured output that survives small models.

The schema goes to the backend in `ModelRequest.response_schema` (which enforces it
as well as the server allows); the reply is then parsed leniently (raw newlines in
strings, JSON wrapped in fences or prose), validated, and on failure re-asked with
the validation errors, a bounded number of times.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import jsonschema
from pydantic import BaseModel, ValidationError

from verimap.base.errors import VerimapError
from verimap.base.messages import (
    AssistantMessage,
    GenerationSettings,
    Message,
    ModelRequest,
    ModelResponse,
    UserMessage,
    as_messages,
)
from verimap.base.protocols import Model
from verimap.base.purpose import Purpose

T = TypeVar("T", bound=BaseModel)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)


class StructuredOutputError(VerimapError, ValueError):
    """The model did not produce a valid object within the allowed repairs."""

    def __init__(
        self, message: str, responses: list[ModelResponse], last_value: Any = None, errors=None
    ):
        super().__init__(message)
        self.responses = responses
        self.last_value = last_value
        self.errors: list[str] = list(errors or [])


def extract_json(text: str) -> Any:
    """The JSON value in `text`: the whole text, a fenced block, or the first decodable object."""
    text = text.strip()
    try:
        return json.loads(text, strict=False)
    except json.JSONDecodeError:
        pass
    for block in _FENCE.findall(text):
        try:
            return json.loads(block.strip(), strict=False)
        except json.JSONDecodeError:
            continue
    dec = json.JSONDecoder(strict=False)
    for i, ch in enumerate(text):
        if ch == "{":
            try:
                value, _ = dec.raw_decode(text, i)
                return value
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON object found in the reply")


def _schema_of(output: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    return output.model_json_schema() if isinstance(output, type) else output


def validate(value: Any, output: type[BaseModel] | dict[str, Any]) -> tuple[Any, list[str]]:
    """(validated value, []) or (None, error messages)."""
    if isinstance(output, type):
        try:
            return output.model_validate(value), []
        except ValidationError as e:
            return None, [
                f"{'.'.join(str(x) for x in err['loc']) or '(root)'}: {err['msg']}"
                for err in e.errors()
            ]
    validator = jsonschema.Draft202012Validator(output)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    if errors:
        return None, [
            f"{'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors
        ]
    return value, []


async def request_structured(
    model: Model,
    messages: list[Message],
    output: type[T] | dict[str, Any],
    *,
    role: str = "executor",
    max_repairs: int = 2,
    schema_name: str = "output",
    settings: GenerationSettings | None = None,
    tools: list[dict[str, Any]] | None = None,
    purpose: Purpose | None = None,
) -> tuple[T | Any, list[ModelResponse]]:
    """Ask for an object matching `output` (a pydantic model or a JSON Schema dict).

    Returns the validated value and every response it took. Raises
    `StructuredOutputError` after `max_repairs` failed re-asks.
    `tools`: the tool specs the conversation so far was sent with. They go along again, not to
    be called (`tool_choice="none"`), so that the prompt renders as before and the server's
    prompt cache (or the provider's) serves the whole shared prefix. `purpose` goes with every
    request, the re-asks included: a repair is still the call it repairs.
    """
    schema = _schema_of(output)
    msgs = as_messages(messages)
    responses: list[ModelResponse] = []
    last_value: Any = None
    errors: list[str] = []
    for _ in range(max_repairs + 1):
        req = ModelRequest(
            messages=msgs,
            response_schema=schema,
            schema_name=schema_name,
            role=role,
            settings=settings or GenerationSettings(),
            tools=tools or None,
            tool_choice="none" if tools else None,
            purpose=purpose,
        )
        resp = await model.request(req)
        responses.append(resp)
        try:
            last_value = extract_json(resp.content)
        except ValueError as e:
            errors = [f"{e}; reply with the JSON object only"]
        else:
            value, errors = validate(last_value, output)
            if not errors:
                return value, responses
        msgs = [
            *msgs,
            AssistantMessage(content=resp.content or ""),
            UserMessage(
                content="That reply is not valid:\n"
                + "\n".join(f"- {e}" for e in errors)
                + "\nReply with only the corrected JSON object that matches this schema:\n"
                + json.dumps(schema)
            ),
        ]
    raise StructuredOutputError(
        f"no valid {schema_name} after {max_repairs} repair(s): " + "; ".join(errors),
        responses,
        last_value,
        errors,
    )
