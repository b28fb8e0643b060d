"""The executor: a tool-using agent that solves one node.

It sees the node's named inputs (text as written, other values as JSON), then its
instruction; never the global task unless the node takes `USER_TASK`. It thinks in free
text (calling tools through the OpenAI tools API, or a ReAct text protocol for servers
without tool calls), then gives its outputs in a separate schema-constrained call, unless its
last free-text reply already is a JSON object with exactly the declared outputs.

With `structured_io=False` (the paper's MAP) there are no named values at all: the
executor sees the task (when the node takes it) and its ancestors' instructions and
replies as written, and its own reply, as written, is its one output `text`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from verimap.base import iotypes
from verimap.base.execution import TEXT_OUTPUT, ExecutorOutput, Feedback, OnToolCall
from verimap.base.messages import (
    AssistantMessage,
    GenerationSettings,
    Message,
    ModelRequest,
    SystemMessage,
    UserMessage,
)
from verimap.base.plan import USER_TASK, Node, output_type, single_code_output
from verimap.base.protocols import Model
from verimap.base.purpose import ExecuteCall
from verimap.base.usage import EXECUTOR
from verimap.core import prompts
from verimap.core.agent import flatten_tool_messages, react_protocol, tool_loop, uses_tool_api
from verimap.llm.structured import StructuredOutputError, request_structured
from verimap.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

_FINAL_ANSWER_TEXT = re.compile(r"Final Answer\s*:\s*", re.I)


def relation(generation: int) -> str:
    """How a text-only executor's prompt names an ancestor `generation` levels up."""
    return {1: "parent", 2: "grandparent"}.get(generation, f"{generation} generations back")


def outputs_schema(node: Node) -> dict[str, Any]:
    """What the final call is constrained to: exactly the declared outputs, each of its type."""
    return {
        "type": "object",
        "properties": {o: iotypes.json_schema(output_type(node, o)) for o in node.outputs},
        "required": list(node.outputs),
        "additionalProperties": False,
    }


def coerce_outputs(node: Node, value: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Each output in its declared type, and one precise message per output that does not fit
    (`price: expected number, got object {"value": 17}`): what the retry is told."""
    out, problems = dict(value), []
    for name in node.outputs:
        if name not in value:
            continue
        try:
            out[name] = iotypes.coerce(output_type(node, name), value[name])
        except iotypes.TypeMismatch as e:
            problems.append(f"{name}: {e}")
    return out, problems


# Inputs shown as plain text rather than as a JSON string: a word problem or a function's source
# escaped into JSON (`\"`, `\n`) is harder for a small model to read than the text itself.
_TEXT_TYPES = (iotypes.CODE, "string")


def shown_as_text(ref: str, value: Any, spec: iotypes.TypeSpec) -> bool:
    return isinstance(value, str) and (ref == USER_TASK or iotypes.canonical(spec) in _TEXT_TYPES)


def render_inputs(values: Mapping[str, Any], types: Mapping[str, iotypes.TypeSpec] | None) -> str:
    """One block per input, headed by its reference and the producer's type: text as written,
    every other value as JSON."""
    blocks = []
    for ref, value in values.items():
        spec = (types or {}).get(ref, iotypes.ANY)
        head = ref if spec == iotypes.ANY else f"{ref} ({iotypes.label(spec)})"
        body = (
            value.strip("\n")
            if shown_as_text(ref, value, spec)
            else json.dumps(value, indent=2, ensure_ascii=False, default=str)
        )
        blocks.append(f"Input {head}:\n{body}")
    return "\n\n".join(blocks) or "(no inputs)"


def given_text(node: Node, inputs: Mapping[str, Any]) -> str:
    """The text a node is given beside its instruction, as its tools' opening calls read it:
    each input that is text, in the node's order."""
    return "\n".join(v for k in node.inputs if isinstance(v := inputs.get(k), str) and v.strip())


def describe_outputs(node: Node) -> str:
    """`price (number), quantity (integer)`: names with their types, for prompts."""
    return ", ".join(
        o if (t := output_type(node, o)) == iotypes.ANY else f"{o} ({iotypes.label(t)})"
        for o in node.outputs
    )


def last_outputs_object(node: Node, text: str) -> dict[str, Any] | None:
    """The last JSON object in `text` whose keys are exactly the node's outputs: the answer a
    reply ends with, not an object quoted in its reasoning (a tool's arguments, an input)."""
    dec = json.JSONDecoder(strict=False)
    for i in range(len(text) - 1, -1, -1):
        if text[i] != "{":
            continue
        try:
            value, _ = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            continue
        if check_output_keys(node, value) is None:
            return value
    return None


def check_output_keys(node: Node, value: Any) -> str | None:
    """A precise message when `value` is not an object with exactly the declared outputs."""
    if not isinstance(value, dict):
        return f"outputs must be a JSON object with keys {node.outputs}, got {type(value).__name__}"
    missing = [o for o in node.outputs if o not in value]
    extra = [k for k in value if k not in node.outputs]
    if not missing and not extra:
        return None
    parts = []
    if missing:
        parts.append(f"missing output(s): {', '.join(missing)}")
    if extra:
        parts.append(f"unexpected output(s): {', '.join(extra)}")
    return "; ".join(parts) + f" (declared outputs: {', '.join(node.outputs)})"


# An attempt's reply limit unless a run's config says otherwise.
EXECUTOR_SETTINGS = GenerationSettings(max_tokens=2048)


class Executor:
    def __init__(
        self,
        model: Model,
        tools: ToolRegistry | None = None,
        max_steps: int = 20,
        *,
        settings: GenerationSettings = EXECUTOR_SETTINGS,
        max_repairs: int = 1,
        retry_temperature: float | None = None,
        structured_io: bool = True,
        opening_calls: bool = True,
    ):
        """`retry_temperature`: the temperature of an attempt that carries feedback (None: the
        same as `settings.temperature`). `structured_io=False`: text-only hand-offs (module
        docstring). `opening_calls`: the tools' opening calls (`ToolRegistry.opening_calls`)
        are made for each attempt before its first reply; False: the agent makes every call."""
        self.model = model
        self.structured_io = structured_io
        self.retry_temperature = retry_temperature
        self.tools = tools or ToolRegistry()
        self.max_steps = max_steps
        self.settings = settings
        self.max_repairs = max_repairs
        self.opening_calls = opening_calls

    def build_messages(
        self,
        node: Node,
        inputs: dict[str, Any],
        feedback: Feedback | None = None,
        context: dict[str, Any] | None = None,
        input_types: Mapping[str, iotypes.TypeSpec] | None = None,
        final: bool = True,
    ) -> list[Message]:
        """Structured: the inputs first and the instruction and guidance last, in one user turn
        (a system turn only carries the text tool protocol, for servers without a tools API);
        see `prompts.EXECUTOR_SYSTEM` for why (design/decisions.md, D05)."""
        protocol = react_protocol(self.model, self.tools)
        if not self.structured_io:
            user = self._text_prompt(node, inputs, feedback, context)
            return [
                SystemMessage(content=prompts.EXECUTOR_SYSTEM + protocol),
                UserMessage(content=user),
            ]
        user = prompts.EXECUTOR_USER.format(
            instruction=node.instruction,
            inputs=render_inputs({k: inputs[k] for k in node.inputs if k in inputs}, input_types),
            context=prompts.EXECUTOR_CONTEXT.format(
                context=json.dumps(context, indent=2, ensure_ascii=False, default=str)
            )
            if context
            else "",
            outputs=describe_outputs(node),
            feedback=feedback.render() if feedback else "",
            scope="" if final else prompts.EXECUTOR_PART,
            closing=self._closing(node, feedback),
        )
        system = [SystemMessage(content=protocol.lstrip("\n"))] if protocol else []
        return [*system, UserMessage(content=user)]

    def _closing(self, node: Node, feedback: Feedback | None) -> str:
        """What the prompt ends with: the request for code, the tools' own guidance, or the
        general one (think step by step, a tool for hard calculations)."""
        if single_code_output(node):
            retry = feedback is not None and not feedback.fresh
            return prompts.EXECUTOR_CODE_RETRY_CLOSING if retry else prompts.EXECUTOR_CODE_CLOSING
        if self.tools.guidance:
            return prompts.EXECUTOR_GUIDED_CLOSING.format(guidance=self.tools.guidance)
        hint = prompts.EXECUTOR_TOOL_HINT if len(self.tools) else ""
        return prompts.EXECUTOR_CLOSING.format(tool_hint=hint)

    @staticmethod
    def _text_prompt(
        node: Node,
        inputs: dict[str, Any],
        feedback: Feedback | None,
        context: dict[str, Any] | None,
    ) -> str:
        """Named input values are left out on purpose: what reaches a text-only executor from
        other agents is their instructions and replies (`context`, keyed by node id, each with
        `generation`, `instruction` and `text`), nothing a planner named or typed."""
        task = inputs.get(USER_TASK) if USER_TASK in node.inputs else None
        entries = [
            prompts.EXECUTOR_TEXT_ENTRY.format(
                relation=relation(int(a.get("generation", 1))),
                instruction=a.get("instruction", ""),
                text=(a.get("text") or "(no reply)").strip(),
            )
            for a in (context or {}).values()
        ]
        return prompts.EXECUTOR_TEXT_USER.format(
            instruction=node.instruction,
            task=prompts.EXECUTOR_TEXT_TASK.format(task=task) if task is not None else "",
            earlier=prompts.EXECUTOR_TEXT_EARLIER.format(entries="\n\n".join(entries))
            if entries
            else "",
            outputs=prompts.EXECUTOR_TEXT_OUTPUTS.format(names=", ".join(node.outputs))
            if node.outputs
            else "",
            feedback=feedback.render() if feedback else "",
        )

    def purpose(self, node: Node, inputs: Mapping[str, Any], attempt: int | None) -> ExecuteCall:
        """What the attempt's requests are for: the node, with the inputs its prompt shows and
        the outputs its reply must name (none when the reply as written is the output)."""
        return ExecuteCall(
            node_id=node.id,
            attempt=attempt,
            inputs={k: inputs[k] for k in node.inputs if k in inputs},
            outputs={o: output_type(node, o) for o in node.outputs} if self.structured_io else {},
        )

    def _settings(self, retry: bool) -> GenerationSettings:
        if retry and self.retry_temperature is not None:
            return self.settings.replace(temperature=self.retry_temperature)
        return self.settings

    async def execute(
        self,
        node: Node,
        inputs: dict[str, Any],
        feedback: Feedback | None = None,
        context: dict[str, Any] | None = None,
        input_types: Mapping[str, iotypes.TypeSpec] | None = None,
        on_tool_call: OnToolCall | None = None,
        sample: bool = False,
        *,
        ctx: RunContext,
        final: bool = True,
    ) -> ExecutorOutput:
        """One attempt. Model and budget errors propagate; a bad final object is a failed attempt.
        `input_types`: the producer's type of each input, shown beside the inputs;
        `on_tool_call(tool, arguments, result, seconds)` hears each tool call; `sample`: an
        independent attempt at the retry temperature, without feedback; `ctx`: the run and
        attempt this is, whose ledger the model calls are charged to; `final`: the
        node gives the plan's answer (one that does not is told to do only its part)."""
        model = ctx.model(self.model)
        messages = self.build_messages(node, inputs, feedback, context, input_types, final)
        settings = self._settings(feedback is not None or sample)
        purpose = self.purpose(node, inputs, ctx.attempt)
        opening = (
            self.tools.opening_calls(node.instruction, given_text(node, inputs))
            if self.opening_calls
            else []
        )
        loop = await tool_loop(
            model,
            self.tools,
            messages,
            role=EXECUTOR,
            max_steps=self.max_steps,
            settings=settings,
            on_tool_call=on_tool_call,
            purpose=purpose,
            opening=opening,
        )
        last_text, answered, steps, tool_calls = (
            loop.text,
            loop.answered,
            loop.steps,
            loop.tool_calls,
        )

        final_call = purpose.model_copy(update={"final_call": True})
        if not self.structured_io:
            return await self._text_output(
                model, messages, last_text, answered, steps, tool_calls, settings, final_call
            )

        # The free-text answer may already be the object, or hold the one code output in a
        # fenced block (cheap paths, no extra call; a small model copying code into a JSON
        # string often returns the task's stub or breaks the quoting).
        code = iotypes.code_from_reply(last_text) if single_code_output(node) else None
        if code is not None:
            return self._typed(node, {next(iter(node.outputs)): code}, steps, tool_calls, messages)
        direct = last_outputs_object(node, last_text)
        if direct is not None:
            return self._typed(node, direct, steps, tool_calls, messages)

        final_msgs = [
            *flatten_tool_messages(messages),
            UserMessage(content=prompts.EXECUTOR_FINAL.format(outputs=describe_outputs(node))),
        ]
        try:
            value, _ = await request_structured(
                model,
                final_msgs,
                outputs_schema(node),
                role=EXECUTOR,
                max_repairs=self.max_repairs,
                schema_name="outputs",
                settings=settings,
                purpose=final_call,
                tools=self.tools.openai_specs() if uses_tool_api(self.model, self.tools) else None,
            )
        except StructuredOutputError as e:
            msg = check_output_keys(node, e.last_value) if e.last_value is not None else None
            partial = e.last_value if isinstance(e.last_value, dict) else None
            return ExecutorOutput(
                outputs=partial,
                error=msg or str(e),
                steps=steps,
                tool_calls=tool_calls,
                messages=final_msgs,
            )
        return self._typed(node, value, steps, tool_calls, final_msgs)

    async def _text_output(
        self,
        model: Model,
        messages: list[Message],
        last_text: str,
        answered: bool,
        steps: int,
        tool_calls: int,
        settings: GenerationSettings,
        purpose: ExecuteCall,
    ) -> ExecutorOutput:
        """The reply as written is the output; only a run cut off by the step limit costs one
        more call (without tools) for an answer."""
        if not answered:
            messages = [
                *flatten_tool_messages(messages),
                UserMessage(content=prompts.EXECUTOR_TEXT_FINAL),
            ]
            req = ModelRequest(messages=messages, role=EXECUTOR, settings=settings, purpose=purpose)
            last_text = (await model.request(req)).content or ""
            messages.append(AssistantMessage(content=last_text))
        if react_protocol(self.model, self.tools):
            # The ReAct protocol's answer is what follows its last "Final Answer:".
            last_text = _FINAL_ANSWER_TEXT.split(last_text)[-1]
        text = last_text.strip()
        return ExecutorOutput(
            outputs={TEXT_OUTPUT: text} if text else None,
            error=None if text else "the executor gave an empty reply",
            steps=steps,
            tool_calls=tool_calls,
            messages=messages,
        )

    @staticmethod
    def _typed(
        node: Node, value: dict[str, Any], steps: int, tool_calls: int, messages: list[Message]
    ) -> ExecutorOutput:
        """A value that does not fit its type fails the attempt before any VF sees it."""
        outputs, problems = coerce_outputs(node, value)
        return ExecutorOutput(
            outputs=outputs,
            error="; ".join(problems) or None,
            steps=steps,
            tool_calls=tool_calls,
            messages=messages,
        )
