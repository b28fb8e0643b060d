import json

import pytest

from verimap.base.execution import Feedback
from verimap.base.messages import AssistantMessage, ModelResponse, to_openai
from verimap.base.plan import Node
from verimap.base.purpose import ExecuteCall
from verimap.base.run_context import RunContext
from verimap.base.verdicts import VFVerdict
from verimap.config import Execution, RunConfig, Verify
from verimap.core import prompts
from verimap.core.agent import parse_react
from verimap.core.executor import Executor, check_output_keys, render_inputs
from verimap.testing import ScriptedModel, tool_call_reply
from verimap.tools.registry import default_tools

NODE = Node(
    id="c", instruction="Multiply a by b.", inputs=["n1.a", "n1.b"], outputs={"product": "any"}
)
INPUTS = {"n1.a": 6, "n1.b": 7, "a": 6, "b": 7}


async def test_tool_api_loop_then_structured_final_call():
    replies = [
        tool_call_reply("calculator", {"expression": "6*7"}),
        "The product is 42.",
        '{"product": 42}',
    ]
    m = ScriptedModel(replies)
    out = await Executor(m, default_tools()).execute(NODE, INPUTS, ctx=RunContext())
    assert out.ok and out.outputs == {"product": 42} and out.tool_calls == 1
    first, second, final = m.requests
    assert first.tools and first.tools[0]["function"]["name"] == "calculator"
    tool_msgs = [x for x in second.messages if x.role == "tool"]
    assert tool_msgs[0].content == "42"
    assistant = next(x for x in second.messages if x.role == "assistant")
    assert assistant.content == ""  # never None
    assert (
        final.response_schema["required"] == ["product"]
        and final.response_schema["additionalProperties"] is False
    )
    # the final structured call carries the tool history as plain text, and the same tool specs
    # (not to be called), so the prompt up to the first reply renders as before: cacheable
    assert final.tools == first.tools and final.tool_choice == "none"
    assert final.messages[:1] == first.messages[:1]
    assert not any(
        m.role == "tool" or (isinstance(m, AssistantMessage) and m.tool_calls)
        for m in final.messages
    )
    assert "Tool result: 42" in json.dumps(to_openai(final.messages))


async def test_sees_only_instruction_and_named_inputs():
    m = ScriptedModel(['{"product": 42}'])
    await Executor(m).execute(NODE, {**INPUTS, "USER_TASK": "SECRET GLOBAL TASK"}, ctx=RunContext())
    prompt = json.dumps(to_openai(m.requests[0].messages))
    assert (
        "SECRET GLOBAL TASK" not in prompt
        and "Multiply a by b." in prompt
        and "Input n1.a:\\n6" in prompt
    )


def test_text_inputs_are_shown_as_written_and_other_values_as_json():
    shown = render_inputs(
        {
            "USER_TASK": 'Pens cost "17" dollars.\nHow much?',
            "ex.price": 17,
            "w.code": "def f():\n    return 1\n",
            "x.items": [1, 2],
        },
        {"ex.price": "number", "w.code": "code", "x.items": "list[number]"},
    )
    assert shown == (
        'Input USER_TASK:\nPens cost "17" dollars.\nHow much?\n\n'
        "Input ex.price (number):\n17\n\n"
        "Input w.code (code):\ndef f():\n    return 1\n\n"
        "Input x.items (list[number]):\n[\n  1,\n  2\n]"
    )
    assert render_inputs({"a.s": "17"}, {}) == 'Input a.s:\n"17"'  # untyped: JSON keeps it a string


def test_the_prompt_puts_the_inputs_first_and_has_no_system_persona():
    msgs = Executor(ScriptedModel([]), default_tools()).build_messages(NODE, INPUTS)
    assert [m.role for m in msgs] == ["user"]
    user = msgs[0].content
    assert (
        user.index("Input n1.a:")
        < user.index("Subtask: Multiply a by b.")
        < user.index("Required outputs: product")
    )
    assert (
        user.endswith("End by stating the final value of every required output.")
        and "Use a tool" in user
    )
    text_protocol = Executor(
        ScriptedModel([], supports_tools=False), default_tools()
    ).build_messages(NODE, INPUTS)
    assert [m.role for m in text_protocol] == ["system", "user"] and text_protocol[
        0
    ].content.startswith("You can use tools")
    assert "Use a tool" not in Executor(ScriptedModel([])).build_messages(NODE, INPUTS)[0].content


def test_a_code_node_is_asked_for_one_code_block_and_others_to_reason():
    code_node = Node(id="w", instruction="Write f.", inputs=["USER_TASK"], outputs={"code": "code"})
    ex = Executor(ScriptedModel([]), default_tools())
    code_prompt = ex.build_messages(code_node, {"USER_TASK": "def f(): ..."})[0].content
    assert code_prompt.endswith(prompts.EXECUTOR_CODE_CLOSING) and "step by step" not in code_prompt
    failed = Feedback(
        previous_outputs={"code": "def f(): return 1"},
        failures=[
            VFVerdict(
                name="task_examples", type="python", outcome="FAIL", message="f() is 1, expected 2"
            )
        ],
    )
    retry = ex.build_messages(code_node, {"USER_TASK": "def f(): ..."}, failed)[0].content
    assert retry.endswith(prompts.EXECUTOR_CODE_RETRY_CLOSING) and "expected 2" in retry
    fresh = failed.model_copy(update={"previous_outputs": None, "fresh": True})
    anew = ex.build_messages(code_node, {"USER_TASK": "def f(): ..."}, fresh)[0].content
    assert anew.endswith(prompts.EXECUTOR_CODE_CLOSING) and "expected 2" in anew
    assert "return 1" not in anew and "This is a new attempt" in anew
    assert "Think step by step." in ex.build_messages(NODE, INPUTS)[0].content


async def test_only_a_node_that_is_not_the_plans_answer_is_told_to_do_just_its_part():
    m = ScriptedModel(['{"product": 42}', '{"product": 42}'])
    await Executor(m).execute(NODE, INPUTS, ctx=RunContext())
    await Executor(m).execute(NODE, INPUTS, final=False, ctx=RunContext())
    final, part = (r.messages[0].content for r in m.requests)
    assert "nothing more" not in final
    assert "Do exactly this subtask, nothing more" in part
    assert part.replace(prompts.EXECUTOR_PART, "") == final


async def test_every_executor_request_carries_its_node_inputs_and_outputs_as_its_purpose():
    """The doubles answer on the purpose: it names the node and the attempt, holds the inputs
    the prompt shows (not the extra ones the executor was handed) and the declared outputs, and
    marks the call that asks for the outputs."""
    m = ScriptedModel(
        [tool_call_reply("calculator", {"expression": "6*7"}), "42.", '{"product": 42}']
    )
    ctx = RunContext(node_id="c", attempt=2)
    await Executor(m, tools=default_tools()).execute(NODE, INPUTS, ctx=ctx)
    purposes = [r.purpose for r in m.requests]
    assert all(isinstance(p, ExecuteCall) for p in purposes)
    assert [(p.node_id, p.attempt, p.final_call) for p in purposes] == [
        ("c", 2, False),
        ("c", 2, False),
        ("c", 2, True),
    ]
    assert purposes[0].inputs == {"n1.a": 6, "n1.b": 7} and purposes[0].outputs == {
        "product": "any"
    }
    assert purposes[-1].label == "execute:c:final"


async def test_a_text_only_executor_asks_for_no_named_outputs():
    m = ScriptedModel(["The product is 42."])
    await Executor(m, structured_io=False).execute(NODE, INPUTS, ctx=RunContext())
    assert m.requests[0].purpose == ExecuteCall(node_id="c", inputs={"n1.a": 6, "n1.b": 7})


async def test_user_task_is_shown_when_taken():
    node = Node(id="s", instruction="solve", inputs=["USER_TASK"], outputs=["answer"])
    m = ScriptedModel(['{"answer": 1}'])
    await Executor(m).execute(node, {"USER_TASK": "THE TASK"}, ctx=RunContext())
    assert "THE TASK" in m.requests[0].messages[-1].content


async def test_missing_and_extra_keys_fail_with_precise_message():
    m = ScriptedModel(["thinking...", '{"prod": 42}', '{"prod": 42, "note": "x"}'])
    out = await Executor(m, max_repairs=1).execute(NODE, INPUTS, ctx=RunContext())
    assert not out.ok
    assert (
        out.error
        == "missing output(s): product; unexpected output(s): prod, note (declared outputs: product)"
    )
    assert check_output_keys(NODE, [1]).startswith("outputs must be a JSON object")


async def test_react_fallback_for_models_without_tools():
    replies = [
        'Thought: compute\nAction: calculator\nAction Input: {"expression": "6*7"}',
        "Thought: done\nFinal Answer: 42",
        '{"product": 42}',
    ]
    m = ScriptedModel(replies, supports_tools=False)
    out = await Executor(m, default_tools()).execute(NODE, INPUTS, ctx=RunContext())
    assert out.outputs == {"product": 42} and out.tool_calls == 1
    assert m.requests[0].tools is None and "Action Input" in m.requests[0].messages[0].content
    assert m.requests[1].messages[-1].content == "Observation: 42"


def test_parse_react():
    assert parse_react('Action: calculator\nAction Input: {"expression": "1+1"}') == (
        "calculator",
        '{"expression": "1+1"}',
    )
    assert parse_react("Final Answer: 3") is None
    assert parse_react("Final Answer: 3\nAction: x\nAction Input: {}") is None


async def test_step_cap_stops_tool_loop():
    m = ScriptedModel(
        lambda r: (
            '{"product": 1}'
            if r.response_schema
            else tool_call_reply("calculator", {"expression": f"{len(r.messages)}"})
        )
    )
    out = await Executor(m, default_tools(), max_steps=3).execute(NODE, INPUTS, ctx=RunContext())
    assert out.steps == 3 and out.tool_calls == 3 and out.outputs == {"product": 1}
    assert "limit of 3 steps" in m.requests[-1].messages[-2].content


async def test_retry_prompt_holds_previous_output_and_tracebacks():
    fb = Feedback(
        previous_outputs={"product": 41},
        failures=[
            VFVerdict(
                name="exact",
                type="python",
                outcome="FAIL",
                message="wrong",
                traceback="Traceback: AssertionError: wrong",
            ),
            VFVerdict(
                name="judge",
                type="llm",
                outcome="FAIL",
                message="off by one",
                explanation="41 is off by one",
            ),
        ],
    )
    m = ScriptedModel(['{"product": 42}'])
    await Executor(m).execute(NODE, INPUTS, fb, ctx=RunContext())
    user = m.requests[0].messages[-1].content
    assert (
        '{"product": 41}' in user
        and "Traceback: AssertionError: wrong" in user
        and "41 is off by one" in user
    )


async def test_context_of_ancestors_is_shown():
    m = ScriptedModel(['{"product": 42}'])
    await Executor(m).execute(
        NODE, INPUTS, context={"n0.raw": "grandparent value"}, ctx=RunContext()
    )
    assert "grandparent value" in m.requests[0].messages[-1].content


async def test_empty_reply_content_never_none():
    m = ScriptedModel([ModelResponse(content="", tool_calls=[]), '{"product": 3}'])
    out = await Executor(m).execute(NODE, INPUTS, ctx=RunContext())
    assert out.outputs == {"product": 3}
    assert all(msg.content is not None for msg in m.requests[-1].messages)


def test_outputs_named_as_source_code_must_be_strings():
    from verimap.core.executor import outputs_schema
    from verimap.planning.plan import parse_plan

    node = parse_plan(
        {
            "nodes": [
                {
                    "id": "a",
                    "instruction": "i",
                    "inputs": ["USER_TASK"],
                    "outputs": ["code", "python_source", "total", "encode"],
                }
            ]
        }
    ).nodes[0]
    props = outputs_schema(node)["properties"]
    assert props == {
        "code": {"type": "string"},
        "python_source": {"type": "string"},
        "total": {},
        "encode": {},
    }


async def test_text_only_executor_replies_as_written_without_a_structured_call():
    m = ScriptedModel([tool_call_reply("calculator", {"expression": "6*7"}), "6 times 7 is 42."])
    ex = Executor(m, default_tools(), structured_io=False)
    out = await ex.execute(
        NODE,
        INPUTS,
        context={"n1": {"generation": 1, "instruction": "Find a and b.", "text": "a is 6, b is 7"}},
        ctx=RunContext(),
    )
    assert out.ok and out.outputs == {"text": "6 times 7 is 42."} and out.tool_calls == 1
    assert m.calls == 2 and all(r.response_schema is None for r in m.requests)
    user = m.requests[0].messages[1].content
    assert "[parent] Subtask: Find a and b.\nReply:\na is 6, b is 7" in user
    assert "{" not in user and "n1.a" not in user and "Required outputs" not in user


async def test_text_only_executor_takes_the_react_final_answer_and_asks_after_the_step_limit():
    m = ScriptedModel(["Thought: easy\nFinal Answer: 42"], supports_tools=False)
    out = await Executor(m, default_tools(), structured_io=False).execute(
        NODE, INPUTS, ctx=RunContext()
    )
    assert out.outputs == {"text": "42"}
    m = ScriptedModel(
        lambda r: (
            "It is 1." if r.tools is None else tool_call_reply("calculator", {"expression": "1"})
        )
    )
    out = await Executor(m, default_tools(), max_steps=2, structured_io=False).execute(
        NODE, INPUTS, ctx=RunContext()
    )
    assert out.outputs == {"text": "It is 1."} and m.calls == 3 and m.requests[-1].tools is None
    empty = await Executor(ScriptedModel(["  "]), structured_io=False).execute(
        NODE, INPUTS, ctx=RunContext()
    )
    assert not empty.ok and empty.error == "the executor gave an empty reply"


def test_text_only_io_cannot_carry_python_vfs():
    with pytest.raises(ValueError, match="no named outputs"):
        RunConfig(execution=Execution(structured_io=False))
    assert (
        RunConfig(
            execution=Execution(structured_io=False), verify=Verify(verification="none")
        ).execution.context_generations
        == 1
    )


CODE_NODE = Node(id="impl", instruction="Write f.", inputs=["USER_TASK"], outputs={"code": "code"})


async def test_a_code_output_is_taken_from_the_replys_fenced_block_without_another_call():
    reply = (
        'Here is f:\n```python\ndef f(x):\n    """Add one."""\n```\nDone, with a body:\n'
        '```python\ndef f(x):\n    """Add one."""\n    return x + 1\n```\n'
        "```python\nprint(f(1))\n```"
    )
    m = ScriptedModel([reply])
    out = await Executor(m).execute(CODE_NODE, {"USER_TASK": "t"}, ctx=RunContext())
    assert out.ok and m.calls == 1
    assert out.outputs == {"code": 'def f(x):\n    """Add one."""\n    return x + 1\n'}


def test_a_docstring_copied_with_json_escapes_still_gives_the_code():
    """The 1.5B on HumanEval/72 (eval r0, 2026-11-26): the task came in JSON, and the block
    opened with the docstring, its escapes and the first comment on one line."""
    from verimap.base.iotypes import code_from_reply

    copied = (
        "```python\ndef will_it_fly(q, w):\n"
        "    '''\\n    Return True if q is balanced.\\n    '''\\n    # palindromic?\n"
        "    if q != q[::-1]:\n        return False\n"
        "    return sum(q) <= w and '\\\\n' not in str(q)\n```"
    )
    code = code_from_reply(copied)
    assert code is not None
    ns: dict = {}
    exec(code, ns)
    fly = ns["will_it_fly"]
    assert fly([3, 2, 3], 9) and not fly([1, 2], 5)
    assert "Return True if q is balanced." in fly.__doc__ and "'\\\\n'" in code
    # A `\n` inside a one-line string cannot be a line break: such code stays unparsed.
    assert code_from_reply("```python\ndef f(s:\n    return s.split('\\n')\n```") is None


async def test_a_stub_or_broken_block_is_no_code_answer_and_the_final_call_asks_for_it():
    reply = '```python\ndef f(x):\n    """Add one."""\n    ...\n```\n```python\ndef f(x:\n```'
    m = ScriptedModel([reply, {"code": "def f(x):\n    return x + 1\n"}])
    out = await Executor(m).execute(CODE_NODE, {"USER_TASK": "t"}, ctx=RunContext())
    assert out.ok and m.calls == 2 and "return x + 1" in out.outputs["code"]
    assert m.requests[1].response_schema["required"] == ["code"]


async def test_a_reply_ending_with_the_outputs_object_takes_one_call():
    reply = (
        'The inputs are {"n1.a": 6, "n1.b": 7}, so I multiply: 6 * 7 = 42.\n'
        'A wrong guess would be {"product": 13} but checking again:\n{"product": 42}'
    )
    m = ScriptedModel([reply])
    out = await Executor(m).execute(NODE, INPUTS, ctx=RunContext())
    assert out.ok and out.outputs == {"product": 42} and m.calls == 1


def test_last_outputs_object_skips_objects_that_are_not_the_outputs():
    from verimap.core.executor import last_outputs_object

    node = Node(
        id="n", instruction="i", inputs=["USER_TASK"], outputs={"a": "object", "b": "number"}
    )
    assert last_outputs_object(node, 'x {"a": {"k": 1}, "b": 2} y {"k": 3}') == {
        "a": {"k": 1},
        "b": 2,
    }
    assert last_outputs_object(node, "no object here {") is None


async def test_the_node_request_opens_the_tools_conversation():
    """The opening reads the instruction and the node's text inputs, and the first request
    already holds its result."""
    asked = []

    def opening(instruction: str, given: str) -> list:
        asked.append((instruction, given))
        return [("calculator", {"expression": "6*7"})]

    tools = default_tools()
    tools.opening = opening
    node = Node(id="s", instruction="Find it.", inputs=["USER_TASK", "n1.a"], outputs=["answer"])
    m = ScriptedModel(['{"answer": 42}'])
    out = await Executor(m, tools).execute(
        node, {"USER_TASK": "THE TASK", "n1.a": 6}, ctx=RunContext()
    )
    assert asked == [("Find it.", "THE TASK")]
    assert out.outputs == {"answer": 42} and out.tool_calls == 1
    assert any("42" in (msg.content or "") for msg in m.requests[0].messages[1:])


async def test_an_executor_without_opening_calls_makes_every_call_itself():
    tools = default_tools()
    tools.opening = lambda instruction, given: [("calculator", {"expression": "6*7"})]
    node = Node(id="s", instruction="Find it.", inputs=["USER_TASK"], outputs=["answer"])
    m = ScriptedModel(['{"answer": 42}'])
    out = await Executor(m, tools, opening_calls=False).execute(
        node, {"USER_TASK": "THE TASK"}, ctx=RunContext()
    )
    assert out.tool_calls == 0 and len(m.requests[0].messages) == 1
