import json
import warnings
from dataclasses import dataclass

import pytest

from verimap.base.messages import GenerationSettings, to_openai
from verimap.base.plan import Node
from verimap.base.purpose import JudgeCall
from verimap.base.run_context import RunContext
from verimap.config import RunConfig, Verify
from verimap.core.verifier import Verifier
from verimap.sandbox import get_sandbox
from verimap.testing import InProcessSandboxDouble, ScriptedModel
from verimap.tools.registry import Tool, ToolRegistry, default_tools


def mk(vfs, instruction="double x"):
    return Node(id="n", instruction=instruction, inputs=["a.x"], outputs=["y"], verification=vfs)


PY_OK = {
    "name": "ok",
    "type": "python",
    "code": "assert outputs['y'] == 2 * inputs['x'], 'y must be 2x'",
}
PY_FN = {
    "name": "fn",
    "type": "python",
    "code": "def verify(inputs, outputs):\n    return outputs['y'] > 0",
}
PY_ERR = {"name": "err", "type": "python", "code": "outputs['missing']"}
LLM = {"name": "judge", "type": "llm", "content": "y is the double of x"}


def judge(passed: bool, explanation: str = "because"):
    def fn(req):
        if req.response_schema is None:
            return "Thinking: let me check the arithmetic."
        return {"passed": passed, "explanation": explanation}

    return ScriptedModel(fn, name="judge")


async def test_python_verdicts_pass_fail_error():
    v = Verifier(InProcessSandboxDouble())
    rep = await v.verify(mk([PY_OK, PY_FN, PY_ERR]), {"x": 2, "a.x": 2}, {"y": 5}, ctx=RunContext())
    out = {d.name: d for d in rep.verdicts}
    assert (
        out["ok"].outcome == "FAIL"
        and out["ok"].message == "y must be 2x"
        and "AssertionError" in out["ok"].traceback
    )
    assert out["fn"].outcome == "PASS"
    assert out["err"].outcome == "ERROR" and "KeyError" in out["err"].message
    assert not rep.passed


async def test_verify_returning_false_fails():
    v = Verifier(InProcessSandboxDouble())
    rep = await v.verify(mk([PY_FN]), {}, {"y": -1}, ctx=RunContext())
    assert (
        rep.verdicts[0].outcome == "FAIL" and "verify() returned False" in rep.verdicts[0].message
    )


async def test_judge_reasons_in_free_text_then_structured_verdict():
    m = judge(False, "y should be 4, not 5")
    rep = await Verifier(None, m).verify(mk([LLM]), {"x": 2}, {"y": 5}, ctx=RunContext())
    assert [r.response_schema is not None for r in m.requests] == [False, True]
    assert m.requests[1].messages[-2].content.startswith("Thinking")
    assert all(r.role == "judge" for r in m.requests)
    assert (
        rep.verdicts[0].outcome == "FAIL" and rep.verdicts[0].explanation == "y should be 4, not 5"
    )
    assert "y is the double of x" in m.requests[0].messages[1].content


async def test_judge_fail_without_explanation_is_repaired():
    replies = iter(
        [
            "thinking",
            {"passed": False, "explanation": ""},
            {"passed": False, "explanation": "wrong"},
        ]
    )
    m = ScriptedModel(lambda r: next(replies))
    rep = await Verifier(None, m).verify(mk([LLM]), {}, {"y": 1}, ctx=RunContext())
    assert rep.verdicts[0].explanation == "wrong"
    assert "explanation is required" in m.requests[2].messages[-1].content


async def test_judge_model_error_is_an_error_verdict():
    m = ScriptedModel([RuntimeError("server down")])
    rep = await Verifier(None, m).verify(mk([LLM]), {}, {"y": 1}, ctx=RunContext())
    assert (
        rep.verdicts[0].outcome == "ERROR"
        and "server down" in rep.verdicts[0].message
        and not rep.passed
    )


async def test_modes_none_and_instruction():
    assert (
        await Verifier(None, None, mode="none").verify(mk([PY_ERR]), {}, {"y": 1}, ctx=RunContext())
    ).verdicts == []
    m = judge(True)
    rep = await Verifier(None, m, mode="instruction").verify(
        mk([PY_ERR], "add the numbers"), {}, {"y": 1}, ctx=RunContext()
    )
    assert [d.name for d in rep.verdicts] == ["instruction"] and rep.passed
    assert "add the numbers" in m.requests[0].messages[1].content


async def test_weights_and_threshold():
    heavy = {**PY_FN, "weight": 3.0}
    failing = {**PY_OK, "weight": 1.0}
    node = mk([heavy, failing])
    strict = await Verifier(InProcessSandboxDouble()).verify(
        node, {"x": 1}, {"y": 5}, ctx=RunContext()
    )
    lenient = await Verifier(InProcessSandboxDouble(), threshold=0.7).verify(
        node, {"x": 1}, {"y": 5}, ctx=RunContext()
    )
    assert not strict.passed and lenient.passed and lenient.score == pytest.approx(0.75)
    with pytest.raises(ValueError):
        Verifier(None, threshold=1.5)


async def test_missing_sandbox_or_judge_is_explicit():
    rep = await Verifier(None, None, full_feedback=True).verify(
        mk([PY_OK, LLM]), {}, {"y": 1}, ctx=RunContext()
    )
    assert {d.outcome for d in rep.verdicts} == {"SANDBOX_ERROR", "ERROR"}


async def test_process_sandbox_semantics_match_the_double():
    """The real (process) backend and the test double agree on every outcome."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sb = get_sandbox("process")
    node = mk(
        [PY_OK, PY_FN, PY_ERR, {"name": "slow", "type": "python", "code": "while True: pass"}]
    )
    real = await Verifier(sb, vf_timeout_s=1.0).verify(node, {"x": 2}, {"y": 5}, ctx=RunContext())
    double = await Verifier(InProcessSandboxDouble()).verify(
        mk([PY_OK, PY_FN, PY_ERR]), {"x": 2}, {"y": 5}, ctx=RunContext()
    )
    assert [d.outcome for d in real.verdicts] == ["FAIL", "PASS", "ERROR", "TIMEOUT"]
    assert [d.outcome for d in double.verdicts] == ["FAIL", "PASS", "ERROR"]
    await sb.aclose()


async def test_judge_calls_are_bounded_in_length():
    m = judge(True)
    await Verifier(None, m, settings=GenerationSettings(max_tokens=300)).verify(
        mk([LLM]), {}, {"y": 1}, ctx=RunContext()
    )
    assert [r.settings.max_tokens for r in m.requests] == [300, 300]


LLM2 = {"name": "positive", "type": "llm", "content": "y is positive"}


async def test_a_nodes_criteria_are_judged_in_one_exchange_each_with_its_own_verdict():
    def fn(req):
        if req.response_schema is None:
            return "Checking each criterion in turn."
        assert req.response_schema["required"] == ["judge", "positive"]
        return {
            "judge": {"passed": False, "explanation": "y should be 4"},
            "positive": {"passed": True, "explanation": ""},
        }

    m = ScriptedModel(fn, name="judge")
    rep = await Verifier(None, m).verify(mk([LLM, LLM2]), {"x": 2}, {"y": 5}, ctx=RunContext())
    assert len(m.requests) == 2
    asked = JudgeCall(
        node_id="n",
        criteria={"judge": LLM["content"], "positive": LLM2["content"]},
        outputs={"y": 5},
    )
    assert [r.purpose for r in m.requests] == [asked, asked.model_copy(update={"final_call": True})]
    prompt = m.requests[0].messages[1].content
    assert "y is the double of x" in prompt and "y is positive" in prompt
    out = {d.name: d for d in rep.verdicts}
    assert out["judge"].outcome == "FAIL" and out["judge"].message == "y should be 4"
    assert out["positive"].outcome == "PASS" and not rep.passed


async def test_per_criterion_judging_stays_available():
    m = judge(True)
    rep = await Verifier(None, m, batch_judge=False).verify(
        mk([LLM, LLM2]), {}, {"y": 1}, ctx=RunContext()
    )
    assert rep.passed and len(m.requests) == 4


async def test_a_batched_judge_failure_is_an_error_verdict_for_every_criterion():
    m = ScriptedModel([RuntimeError("server down")])
    rep = await Verifier(None, m).verify(mk([LLM, LLM2]), {}, {"y": 1}, ctx=RunContext())
    assert [d.outcome for d in rep.verdicts] == ["ERROR", "ERROR"] and not rep.passed


async def test_the_judge_samples_as_the_run_config_says():
    from verimap.config import RunConfig, Sampling, Verify

    m = judge(True)
    cfg = RunConfig(
        sampling=Sampling(temperature=1.0), verify=Verify(batch_judge=False, full_feedback=True)
    )
    v = Verifier.from_config(None, m, cfg)
    assert (v.batch_judge, v.full_feedback) == (False, True)
    await v.verify(mk([LLM]), {}, {"y": 1}, ctx=RunContext())
    assert {r.settings.temperature for r in m.requests} == {1.0}


async def test_the_judge_checks_with_the_executors_tools_before_its_verdict():
    """The paper's verifier is a ReAct agent: it may compute before it decides."""
    from verimap.config import RunConfig, Verify
    from verimap.testing import tool_call_reply
    from verimap.tools.registry import default_tools

    def fn(req):
        if req.response_schema is not None:
            return {"passed": False, "explanation": "17 * 23 is 391, not 381"}
        if not any(m.role == "tool" for m in req.messages):
            return tool_call_reply("calculator", {"expression": "17 * 23"})
        return "The calculator says 391."

    m = ScriptedModel(fn, name="judge")
    v = Verifier.from_config(None, m, RunConfig(), tools=default_tools())
    rep = await v.verify(mk([LLM]), {"x": 2}, {"y": 381}, ctx=RunContext())
    assert rep.verdicts[0].outcome == "FAIL" and "391" in rep.verdicts[0].explanation
    first, second, final = m.requests
    assert [r.purpose.label for r in m.requests] == ["judge:n:judge"] * 2 + ["judge:n:judge:final"]
    assert first.tools and "calculator" in json.dumps(first.tools)
    assert any(msg.role == "tool" and msg.content == "391" for msg in second.messages)
    # The verdict call gets the transcript as plain text, and the tool specs only so that its
    # prompt prefix renders as the loop's did (cacheable); it may not call them.
    assert final.tools == first.tools and final.tool_choice == "none"
    assert final.messages[0] == first.messages[0] and "Tool result: 391" in json.dumps(
        to_openai(final.messages)
    )

    m = judge(True)
    plain = Verifier.from_config(
        None, m, RunConfig(verify=Verify(judge_tools=False)), tools=default_tools()
    )
    await plain.verify(mk([LLM]), {}, {"y": 1}, ctx=RunContext())
    assert [r.tools for r in m.requests] == [None, None]


async def test_a_judge_without_a_tools_api_uses_the_text_protocol():
    from verimap.tools.registry import default_tools

    def fn(req):
        if req.response_schema is not None:
            return {"passed": True, "explanation": "right"}
        if "Observation:" not in json.dumps(to_openai(req.messages)):
            return 'Thought: check it\nAction: calculator\nAction Input: {"expression": "2 * 2"}'
        return "It is 4."

    m = ScriptedModel(fn, name="judge", supports_tools=False)
    rep = await Verifier(None, m, tools=default_tools()).verify(
        mk([LLM]), {"x": 2}, {"y": 4}, ctx=RunContext()
    )
    assert rep.passed and "Action Input" in m.requests[0].messages[0].content
    assert "Observation: 4" in json.dumps(to_openai(m.requests[-1].messages))


def test_checks_learn_the_corpus_sources_from_the_runs_tools_even_when_the_judge_has_none():
    @dataclass
    class Search(Tool):
        def holds_source(self, name: str) -> bool | None:
            return name == "TechCrunch"

    search = Search("search", "Search.", {}, lambda: "")
    config = RunConfig(verify=Verify(judge_tools=False))
    found = Verifier.from_config(None, None, config, tools=ToolRegistry([search]))
    assert found.check_tools.sources is search and len(found.tools) == 0
    assert (
        Verifier.from_config(None, None, config, tools=default_tools()).check_tools.sources is None
    )
