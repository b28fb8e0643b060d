import json

import pytest

from verimap.base.messages import UserMessage
from verimap.core import prompts
from verimap.core.agent import brief, inline_tool_call, tool_loop
from verimap.testing import ScriptedModel, tool_call_reply
from verimap.tools.registry import (
    Tool,
    ToolRegistry,
    ToolsExhausted,
    current_transcript,
    default_tools,
)

TOOLS = default_tools()
PENS = (
    "5. Call the calculator:\n   ```json\n"
    '   {"name": "calculator", "arguments": {"expression": "17 * 23"}}\n'
    "   ```\n\n6. The calculator returns $401."
)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (PENS, ("calculator", {"expression": "17 * 23"}, "   ```")),
        (
            '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n</tool_call> 5',
            ("calculator", {"expression": "2+2"}, "</tool_call>"),
        ),
        (
            'I compute {"name": "calculator", "parameters": {"expression": "1+1"}} = 3',
            ("calculator", {"expression": "1+1"}, "}}"),
        ),
        ('{"name": "search", "arguments": {"q": "x"}}', None),  # not a tool it has
        ('{"name": "calculator", "arguments": "17 * 23"}', None),  # arguments not an object
        ('{"name": "calculator", "arguments": {"expression": "1+', None),  # cut off
        ('```json\n{"answer": 401}\n```', None),  # an answer, not a call
    ],
)
def test_a_tool_call_written_as_text_is_found_and_the_reply_cut_after_it(text, found):
    got = inline_tool_call(text, TOOLS)
    if found is None:
        assert got is None
        return
    tool, args, end = got
    assert (tool, json.loads(args)) == found[:2] and text[:end].endswith(found[2])
    assert "401" not in text[:end] and "= 3" not in text[:end]


async def test_the_loop_runs_a_call_written_as_text_and_the_model_goes_on_from_the_real_result():
    heard = []
    model = ScriptedModel([PENS, "So 23 pens cost 391 dollars."], supports_tools=True)
    messages = [UserMessage(content="How much do 23 pens at $17 cost?")]
    done = await tool_loop(
        model,
        TOOLS,
        messages,
        role="executor",
        max_steps=4,
        on_tool_call=lambda tool, args, result, s: heard.append((tool, json.loads(args), result)),
    )
    assert done.answered and done.tool_calls == 1 and done.text.endswith("391 dollars.")
    assert heard == [("calculator", {"expression": "17 * 23"}, "391")]
    second = [m.content for m in model.requests[1].messages]
    assert "401" not in second[1] and second[1].rstrip().endswith("```")
    assert second[2].startswith("Result of calculator: 391")


async def test_without_tools_nothing_is_run():
    model = ScriptedModel([PENS])
    done = await tool_loop(
        model, ToolRegistry(), [UserMessage(content="t")], role="executor", max_steps=3
    )
    assert done.tool_calls == 0 and done.steps == 1 and "401" in done.text


@pytest.mark.parametrize("api", [True, False])
async def test_a_repeated_tool_call_is_not_run_again_and_ends_the_loop(api):
    """A small model stuck on one call would spend every step on it."""
    heard = []
    same = {"expression": "2 + 1"}
    reply = tool_call_reply("calculator", same) if api else PENS.replace("17 * 23", "2 + 1")
    model = ScriptedModel([reply] * 5, supports_tools=api)
    messages = [UserMessage(content="t")]
    done = await tool_loop(
        model,
        TOOLS,
        messages,
        role="executor",
        max_steps=10,
        on_tool_call=lambda *call: heard.append(call[:3]),
    )
    assert (done.steps, done.tool_calls, done.answered) == (2, 1, False)
    assert heard == [("calculator", json.dumps(same), "3")]
    assert messages[-1].content == prompts.REPEATED_TOOL_CALL


def _budget_tool(budget: int) -> tuple[ToolRegistry, list]:
    """A tool that takes `budget` calls per conversation and records which one each call was in."""
    seen: list = []

    def lookup(word: str) -> str:
        t = current_transcript()
        seen.append(t)
        if sum(x is t for x in seen) > budget:
            raise ToolsExhausted("No lookups left: answer now.")
        return f"{word} means {len(word)}"

    tool = Tool(
        "lookup",
        "Look a word up.",
        {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
        lookup,
    )
    return ToolRegistry([tool]), seen


@pytest.mark.parametrize("api", [True, False])
async def test_a_tool_that_takes_no_more_calls_ends_the_loop(api):
    """A spent budget stops the agent at once, whatever it asks next: the caller then asks it for
    the answer (the executor's final call)."""
    tools, _ = _budget_tool(2)
    words = ["a", "bb", "ccc", "dddd", "eeeee"]
    if api:
        script = [tool_call_reply("lookup", {"word": w}) for w in words]
    else:
        script = [f'Action: lookup\nAction Input: {{"word": "{w}"}}' for w in words]
    heard = []
    messages = [UserMessage(content="t")]
    done = await tool_loop(
        ScriptedModel(script, supports_tools=api),
        tools,
        messages,
        role="executor",
        max_steps=10,
        on_tool_call=lambda *call: heard.append(call[2]),
    )
    assert (done.steps, done.tool_calls, done.answered) == (3, 2, False)
    assert heard == ["a means 1", "bb means 2", "No lookups left: answer now."]
    assert messages[-1].content == "No lookups left: answer now."


async def test_each_loop_is_its_own_conversation_for_the_tools():
    tools, seen = _budget_tool(5)
    for _ in range(2):
        reply = tool_call_reply("lookup", {"word": "a"})
        await tool_loop(
            ScriptedModel([reply, "done"], supports_tools=True),
            tools,
            [UserMessage(content="t")],
            role="executor",
            max_steps=3,
        )
    assert len(seen) == 2 and seen[0] is not None and seen[1] is not None
    assert seen[0] is not seen[1] and current_transcript() is None


def _opening_tools() -> tuple[ToolRegistry, list]:
    """A lookup tool whose opening looks up the instruction's last word."""
    tools, seen = _budget_tool(5)
    opening = lambda instruction, given: [("lookup", {"word": instruction.split()[-1]})]  # noqa: E731
    return ToolRegistry([tools.get("lookup")], opening=opening), seen


@pytest.mark.parametrize("api", [True, False])
async def test_the_opening_calls_results_are_read_before_the_first_reply(api):
    """The agent's first reply already reads what the opening calls returned, in one user turn
    after its task (where the evidence checks read tool results too)."""
    tools, seen = _opening_tools()
    model = ScriptedModel(["It means 5."], supports_tools=api)
    heard = []
    done = await tool_loop(
        model,
        tools,
        [UserMessage(content="look up apple")],
        role="executor",
        max_steps=3,
        on_tool_call=lambda *call: heard.append(call[:3]),
        opening=tools.opening_calls("look up apple"),
    )
    first = model.requests[0].messages
    assert len(first) == 2 and isinstance(first[1], UserMessage)
    assert first[1].content == "Called for you: lookup(word='apple'). Result:\napple means 5"
    assert heard == [("lookup", json.dumps({"word": "apple"}), "apple means 5")]
    assert (done.steps, done.tool_calls, done.answered) == (1, 1, True)
    assert len(seen) == 1 and seen[0] is not None  # made inside the loop's conversation


def test_a_registry_opens_with_no_call_unless_it_has_an_opening_and_the_tool():
    assert TOOLS.opening_calls("anything") == []
    only_unknown = ToolRegistry(opening=lambda instruction, given: [("lookup", {"word": "x"})])
    assert only_unknown.opening_calls("x") == []


def test_a_long_argument_is_cut_where_the_opening_is_shown():
    assert brief(json.dumps({"query": "q" * 70, "page": 2}), 5) == "query='qqqqq…', page=2"
    assert brief("not json", 3) == "not"
