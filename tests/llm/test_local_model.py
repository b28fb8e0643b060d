"""The LLM layer on the REAL local llama.cpp server (0.5B): structure and behaviour, not accuracy."""

from __future__ import annotations

import json

import jsonschema
import pytest

from verimap.base.messages import GenerationSettings, ModelRequest, SystemMessage, UserMessage
from verimap.base.plan import Plan, plan_json_schema
from verimap.llm.structured import request_structured
from verimap.planning.planner import LLMPlanner

pytestmark = pytest.mark.localmodel

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression and return the number.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
            "additionalProperties": False,
        },
    },
}


async def test_plan_request_returns_a_schema_valid_plan(local_model):
    task = "Tom has 3 boxes of 12 pencils and gives away 7 pencils. How many pencils are left?"
    planner = LLMPlanner(local_model)
    messages = planner.plan_messages(task)
    value, responses = await request_structured(
        local_model, messages, planner.schema, role="planner", max_repairs=1
    )
    jsonschema.validate(value, planner.schema)
    jsonschema.validate(value, plan_json_schema())
    # Structure, not quality: whether the 0.5B's references make a valid DAG is the planner's
    # repair loop's business (tested with the double); here every node must parse as a Node.
    plan = Plan.model_validate(value)
    assert plan.nodes and all(n.outputs and n.inputs and n.verification for n in plan.nodes)
    assert responses[0].usage.prompt_tokens > 500 and responses[0].usage.completion_tokens > 0


async def test_executor_call_returns_exactly_the_declared_outputs(local_model):
    schema = {
        "type": "object",
        "properties": {"total": {"type": "number"}, "unit": {"type": "string"}},
        "required": ["total", "unit"],
        "additionalProperties": False,
    }
    messages = [
        {"role": "system", "content": "You solve one subtask and report its outputs as JSON."},
        {
            "role": "user",
            "content": "Inputs: apples=3, pears=4 (both counted in fruits). Outputs: total (number of fruits), unit (the word 'fruits').",
        },
    ]
    value, _ = await request_structured(
        local_model, messages, schema, role="executor", max_repairs=1
    )
    assert set(value) == {"total", "unit"}
    assert isinstance(value["total"], int | float) and isinstance(value["unit"], str)


async def test_judge_call_returns_passed_and_explanation(local_model):
    schema = {
        "type": "object",
        "properties": {"passed": {"type": "boolean"}, "explanation": {"type": "string"}},
        "required": ["passed", "explanation"],
        "additionalProperties": False,
    }
    messages = [
        {"role": "system", "content": "You are a strict judge. Decide if the criterion holds."},
        {
            "role": "user",
            "content": 'Criterion: the answer is a positive integer.\nOutputs: {"answer": 29}\nReply with {"passed": ..., "explanation": ...}.',
        },
    ]
    value, responses = await request_structured(
        local_model, messages, schema, role="judge", max_repairs=1
    )
    assert isinstance(value["passed"], bool) and isinstance(value["explanation"], str)
    assert set(value) == {"passed", "explanation"}
    json.loads(
        responses[-1].content, strict=False
    )  # the raw reply itself is JSON (grammar-enforced)


async def test_forced_tool_call_round_trips(local_model):
    msgs = [{"role": "user", "content": "What is 1234 * 5678? Use the calculator."}]
    forced = {"type": "function", "function": {"name": "calculator"}}
    r = await local_model.request(
        ModelRequest(
            messages=msgs,
            tools=[CALCULATOR],
            tool_choice=forced,
            settings=GenerationSettings(temperature=0),
        )
    )
    assert len(r.tool_calls) == 1 and r.tool_calls[0].name == "calculator"
    args = json.loads(r.tool_calls[0].arguments)
    jsonschema.validate(args, CALCULATOR["function"]["parameters"])
    call = r.tool_calls[0]
    msgs += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "7006652"},
        {"role": "user", "content": "State the result."},
    ]
    final = await local_model.request(
        ModelRequest(
            messages=msgs,
            tools=[CALCULATOR],
            tool_choice="none",
            settings=GenerationSettings(temperature=0),
        )
    )
    assert final.tool_calls == [] and final.content.strip()
    assert final.usage.calls == 1 and final.usage.prompt_tokens > r.usage.prompt_tokens


async def test_auto_tool_choice_yields_a_parsed_tool_call(local_model):
    msgs = [{"role": "user", "content": "What is 1234 * 5678? Use the calculator tool."}]
    r = await local_model.request(
        ModelRequest(
            messages=msgs,
            tools=[CALCULATOR],
            tool_choice="auto",
            settings=GenerationSettings(temperature=0),
        )
    )
    assert [c.name for c in r.tool_calls] == ["calculator"]
    assert "expression" in json.loads(r.tool_calls[0].arguments)
    assert r.finish_reason == "tool_calls"


async def test_plain_chat_and_usage(local_model):
    r = await local_model.request(
        ModelRequest(
            messages=[UserMessage(content="Say hello.")],
            settings=GenerationSettings(max_tokens=16, temperature=0),
        )
    )
    assert r.content.strip()
    assert r.usage.calls == 1 and r.usage.failed_calls == 0
    assert r.usage.prompt_tokens > 0 and 0 < r.usage.completion_tokens <= 16
    assert r.usage.cost == 0.0  # local models have no price


async def test_a_stop_text_ends_the_reply_where_it_would_begin(local_model):
    ask = [{"role": "user", "content": "Write the numbers from 1 to 9, separated by commas."}]
    free = await local_model.request(
        ModelRequest(messages=ask, settings=GenerationSettings(max_tokens=40, temperature=0))
    )
    assert "5" in free.content
    cut = await local_model.request(
        ModelRequest(
            messages=ask, settings=GenerationSettings(max_tokens=40, temperature=0, stop=("5",))
        )
    )
    assert "4" in cut.content and "5" not in cut.content and cut.finish_reason == "stop"


async def test_a_repeated_prefix_is_served_from_the_cache_and_counted(local_model):
    """The fixed part of a prompt (system text, schema, demonstration) is processed once: the
    server says so in `usage`, and the ledger keeps it apart from the prompt it processed."""
    import asyncio

    from verimap.base.accounting import Ledger, MeteredModel

    prefix = "You are a careful assistant. " + " ".join(f"Rule {i}: be brief." for i in range(120))

    def ask(question: str) -> ModelRequest:
        return ModelRequest(
            messages=[SystemMessage(content=prefix), UserMessage(content=question)],
            settings=GenerationSettings(max_tokens=8, temperature=0),
            role="executor",
        )

    ledger = Ledger()
    model = MeteredModel(local_model, ledger)
    first = await model.request(ask("What is 2 + 3? Answer with the number."))
    second = await model.request(ask("What is 4 + 4? Answer with the number."))
    assert first.usage.prompt_tokens > 600
    assert second.usage.cached_tokens > 600
    assert second.usage.cached_tokens < second.usage.prompt_tokens
    assert ledger.usage.roles["executor"].cached_tokens >= second.usage.cached_tokens
    # Two requests at once both complete (the server queues them) and both are right.
    a, b = await asyncio.gather(
        model.request(ask("What is 2 + 3? Answer with the number.")),
        model.request(ask("What is 4 + 4? Answer with the number.")),
    )
    assert "5" in a.content and "8" in b.content


async def test_a_prefix_stays_cached_while_other_prompts_come_and_go(local_model):
    """A planner's prompt must still be cached for its replan after a node's many calls: the
    cache holds more than a handful of states (each used to carry 311 MB of unused logits)."""

    def ask(system: str, question: str) -> ModelRequest:
        return ModelRequest(
            messages=[SystemMessage(content=system), UserMessage(content=question)],
            settings=GenerationSettings(max_tokens=4, temperature=0),
        )

    planner = "You plan tasks. " + " ".join(
        f"Planning rule {i}: keep it short." for i in range(100)
    )
    first = await local_model.request(ask(planner, "Plan: add 2 and 3."))
    assert first.usage.prompt_tokens > 600
    for k in range(9):  # other prompts, none sharing more than the chat template's opening
        await local_model.request(ask(f"Executor {k}. " + f"Fact {k}: sky is blue. " * 5, "Hi"))
    again = await local_model.request(ask(planner, "Plan: multiply 4 by 5."))
    assert again.usage.cached_tokens > 600
