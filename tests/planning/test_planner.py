import json

import pytest

from verimap.base.events import PLAN_INVALID, Event
from verimap.base.failure import FailureContext
from verimap.base.messages import AssistantMessage, to_openai
from verimap.base.plan import Plan, PlanningError, plan_json_schema
from verimap.base.purpose import PlanCall
from verimap.base.roles import Planner
from verimap.base.run_context import RunContext
from verimap.base.verdicts import VFVerdict
from verimap.core.verifier import Verifier
from verimap.planning import prompts
from verimap.planning.fixed_planners import AddVFsPlanner, TemplatePlanner
from verimap.planning.plan import parse_plan
from verimap.planning.planner import PLANNER_SETTINGS, LLMPlanner, PlannerOptions
from verimap.testing import InProcessSandboxDouble, ScriptedModel
from verimap.tools.registry import default_tools

GOOD = {
    "nodes": [
        {
            "id": "a",
            "instruction": "extract",
            "inputs": ["USER_TASK"],
            "outputs": ["x"],
            "verification": [
                {"name": "num", "type": "python", "code": "assert isinstance(outputs['x'], int)"}
            ],
        },
        {
            "id": "b",
            "instruction": "double",
            "inputs": ["a.x"],
            "outputs": ["y"],
            "verification": [
                {"name": "dbl", "type": "python", "code": "assert outputs['y'] == 2 * inputs['x']"}
            ],
        },
    ]
}
BAD = {"nodes": [{"id": "a", "instruction": "i", "inputs": ["zz.q"], "outputs": ["x"]}]}


def changed(plan: dict, node_id: str, **fields) -> dict:
    out = json.loads(json.dumps(plan))
    next(n for n in out["nodes"] if n["id"] == node_id).update(fields)
    return out


def failed_at(node_id: str) -> FailureContext:
    return FailureContext(
        node_id=node_id,
        attempts=3,
        verdicts=[VFVerdict(name="dbl", type="python", outcome="FAIL", message="", traceback="")],
    )


async def test_plan_prompt_has_tools_task_demo_and_schema():
    m = ScriptedModel([GOOD])
    plan = await LLMPlanner(m, default_tools()).plan("Double the number 21.", ctx=RunContext())
    assert isinstance(plan, Plan) and plan.final_node().id == "b"
    req = m.requests[0]
    assert req.role == "planner" and req.response_schema is not None
    assert req.settings.stop == ("\n" * 6,)  # a blank-line loop ends instead of running on
    text = json.dumps(to_openai(req.messages))
    assert "calculator" in text and "Double the number 21." in text and "bakery" in text
    assert req.response_schema == LLMPlanner(m).schema and "JSON Schema of the plan" not in text
    shown = LLMPlanner(m, None, PlannerOptions(show_schema=True)).plan_messages("t")[-1].content
    assert "JSON Schema of the plan" in shown and '"Node"' in shown


async def test_invalid_plan_is_sent_back_with_messages():
    m = ScriptedModel(["not a plan", BAD, GOOD])
    plan = await LLMPlanner(m, None, PlannerOptions(max_repairs=3)).plan("t", ctx=RunContext())
    assert len(plan.nodes) == 2
    assert "not a JSON plan" in m.requests[1].messages[-1].content
    assert "unknown node 'zz'" in m.requests[2].messages[-1].content


async def test_repair_loop_is_bounded():
    m = ScriptedModel([BAD] * 5)
    with pytest.raises(PlanningError) as ei:
        await LLMPlanner(m, None, PlannerOptions(max_repairs=2, fallback=False)).plan(
            "t", ctx=RunContext()
        )
    assert m.calls == 3 and any("unknown node" in p for p in ei.value.problems)


async def test_replan_prompt_has_previous_plan_and_failure_context():
    m = ScriptedModel([changed(GOOD, "b", instruction="double x, as an integer")])
    failure = FailureContext(
        node_id="b",
        instruction="double",
        inputs={"a.x": 3},
        outputs={"y": 7},
        attempts=3,
        verdicts=[
            VFVerdict(
                name="dbl",
                type="python",
                outcome="FAIL",
                message="",
                traceback="AssertionError at line 1",
            )
        ],
        ancestors=[
            {"node_id": "a", "instruction": "extract", "outputs": {"x": 3}, "status": "verified"}
        ],
    )
    await LLMPlanner(m).replan("task T", parse_plan(GOOD), failure, ctx=RunContext())
    text = m.requests[0].messages[-1].content
    previous = text.split("Previous plan:")[1].split("What failed:")[0]
    shown = json.loads(previous)
    assert set(shown) == {"nodes"} and all("final" not in n for n in shown["nodes"])
    assert all("weight" not in vf for n in shown["nodes"] for vf in n["verification"])
    for needle in (
        "task T",
        '"id": "a"',
        "AssertionError at line 1",
        '{"y": 7}',
        "a [verified]: extract",
    ):
        assert needle in text


async def test_a_replan_repeating_the_failed_node_goes_back_once_sampled_more_freely():
    fixed = changed(GOOD, "b", instruction="double x, as an integer")
    m = ScriptedModel([GOOD, fixed])
    planner = LLMPlanner(
        m,
        None,
        PlannerOptions(settings=PLANNER_SETTINGS.replace(temperature=0.0), repeat_temperature=0.7),
    )
    plan = await planner.replan("t", parse_plan(GOOD), failed_at("b"), ctx=RunContext())
    assert plan.node("b").instruction == "double x, as an integer"
    assert [r.settings.temperature for r in m.requests] == [0.0, 0.7]
    repair = m.requests[1].messages[-1].content
    assert "node 'b' and every node it depends on are exactly as in the plan that failed" in repair


async def test_a_replan_counts_as_a_repeat_only_if_the_failed_node_and_its_ancestors_are_unchanged():
    previous = parse_plan(GOOD)
    for reply in (
        changed(GOOD, "a", instruction="extract the number, as an integer"),  # an ancestor
        changed(GOOD, "b", verification=[]),  # the failed node's VFs
        changed(GOOD, "b", outputs=["y", "z"]),
    ):
        m = ScriptedModel([reply])
        await LLMPlanner(m, None, PlannerOptions(quality_checks=False)).replan(
            "t", previous, failed_at("b"), ctx=RunContext()
        )
        assert m.calls == 1
    # a new display name is no change; a changed node downstream of the failure is none either
    for reply, failed in (
        (changed(GOOD, "b", name="Double it"), "b"),
        (changed(GOOD, "b", instruction="x2"), "a"),
    ):
        events: list[Event] = []
        m = ScriptedModel([reply, GOOD])
        ctx = RunContext(sink=events.append)
        await LLMPlanner(m).replan("t", previous, failed_at(failed), ctx=ctx)
        assert m.calls == 2
        problems = [e.data["problems"] for e in events if e.type == PLAN_INVALID]
        assert problems[0][0].startswith(f"node {failed!r} and every node it depends on")


async def test_a_repeated_plan_is_used_when_asking_once_brings_nothing_better():
    previous = parse_plan(GOOD)
    for script, repairs in (
        ([GOOD, GOOD], 3),
        ([GOOD, BAD], 3),
        ([BAD, GOOD, BAD], 3),
        ([GOOD], 0),
    ):
        m = ScriptedModel(script)
        plan = await LLMPlanner(m, None, PlannerOptions(max_repairs=repairs)).replan(
            "t", previous, failed_at("b"), ctx=RunContext()
        )
        assert plan.model_dump() == previous.model_dump() and m.calls == len(script)
    with pytest.raises(PlanningError):  # invalid plans alone still fail
        await LLMPlanner(
            ScriptedModel([BAD] * 2), None, PlannerOptions(max_repairs=1, fallback=False)
        ).replan("t", previous, failed_at("b"), ctx=RunContext())


async def test_a_replan_may_keep_the_plan_when_no_vf_failed_or_when_told_to():
    previous = parse_plan(GOOD)
    no_verdicts = FailureContext(node_id="b", attempts=3, error="executor gave no valid outputs")
    for planner, failure in (
        (LLMPlanner(ScriptedModel([GOOD])), no_verdicts),
        (
            LLMPlanner(ScriptedModel([GOOD]), None, PlannerOptions(challenge_repeats=False)),
            failed_at("b"),
        ),
    ):
        assert (
            await planner.replan("t", previous, failure, ctx=RunContext())
        ).model_dump() == previous.model_dump()
        assert planner.model.calls == 1


async def test_template_planner_single_node_is_react():
    tp = TemplatePlanner.single_node(outputs=["answer"])
    assert isinstance(tp, Planner)
    p = await tp.plan("anything", ctx=RunContext())
    assert [n.inputs for n in p.nodes] == [["USER_TASK"]] and p.nodes[0].outputs == {
        "answer": "any"
    }
    assert (await tp.replan("t", p, FailureContext(node_id="solve"), ctx=RunContext())).nodes[
        0
    ].id == "solve"


async def test_add_vfs_planner_adds_deterministic_checks():
    planner = AddVFsPlanner(TemplatePlanner(GOOD))
    p = await planner.plan("t", ctx=RunContext())
    assert all("outputs_nonempty" in [v.name for v in n.verification] for n in p.nodes)
    v = Verifier(InProcessSandboxDouble())
    empty = await v.verify(p.node("a"), {}, {"x": ""}, ctx=RunContext())
    assert [d.outcome for d in empty.verdicts if d.name == "outputs_nonempty"] == ["FAIL"]


def test_demo_plans_are_valid():
    assert parse_plan(prompts.DEMO_PLAN).final_node().id == "solve"
    assert parse_plan(prompts.CODE_DEMO_PLAN).final_node().id == "implement"


async def test_programming_demo_is_shown_and_its_function_name_counts_as_copying():
    """The code demo's plan is generic (the task's own examples check the code), so taking it
    as it is is fine; naming the demo's function is copying."""
    generic = json.loads(json.dumps(prompts.CODE_DEMO_PLAN))
    m = ScriptedModel([generic])
    planner = LLMPlanner(m, None, PlannerOptions(domain="programming"))
    await planner.plan("write is_prime", ctx=RunContext())
    assert "running_max" in m.requests[0].messages[-1].content and m.calls == 1
    copied = json.loads(json.dumps(generic))
    copied["nodes"][0]["instruction"] += " Name it running_max."
    m = ScriptedModel([copied, generic])
    await LLMPlanner(m, None, PlannerOptions(domain="programming")).plan(
        "write is_prime", ctx=RunContext()
    )
    assert "node 'implement' copies the example plan" in m.requests[1].messages[-1].content


async def test_quality_checks_reject_useless_valid_plans():
    copied = json.loads(json.dumps(prompts.DEMO_PLAN))
    copied["nodes"][0]["inputs"] = []
    copied["nodes"][1]["inputs"] = ["extract.monday"]
    copied["nodes"][1]["verification"] = []
    copied["nodes"][0]["verification"] = [{"name": "noop", "type": "python", "code": "assert True"}]
    m = ScriptedModel([copied, GOOD])
    plan = await LLMPlanner(m).plan("t", ctx=RunContext())
    assert plan.final_node().id == "b"
    feedback = m.requests[1].messages[-1].content
    for needle in (
        "no node takes 'USER_TASK'",
        "node 'extract' has no inputs",
        "node 'extract' copies the example plan",
        "node 'solve' has no verification functions",
        "python VF 'noop' never reads `outputs`",
    ):
        assert needle in feedback


async def test_a_plan_over_the_node_cap_goes_back_and_falls_back_when_no_repair_is_left():
    three = json.loads(json.dumps(GOOD))
    three["nodes"].append(
        {
            "id": "c",
            "instruction": "add one",
            "inputs": ["b.y"],
            "outputs": ["z"],
            "verification": [
                {"name": "more", "type": "python", "code": "assert outputs['z'] > inputs['y']"}
            ],
        }
    )
    system = LLMPlanner(ScriptedModel([]), None, PlannerOptions(max_nodes=2)).system_prompt()
    assert "Use at most 2 nodes" in system and "Prefer few nodes" not in system
    assert "Prefer few nodes (1-4)" in LLMPlanner(ScriptedModel([])).system_prompt()

    m = ScriptedModel([three, GOOD])
    plan = await LLMPlanner(m, None, PlannerOptions(max_nodes=2, max_repairs=1)).plan(
        "t", ctx=RunContext()
    )
    assert [n.id for n in plan.nodes] == ["a", "b"] and plan.fallback_reason is None
    assert "the plan has 3 nodes, more than the 2 allowed" in m.requests[1].messages[-1].content
    assert "at most 2 nodes" in m.requests[0].messages[0].content

    m = ScriptedModel([three])
    plan = await LLMPlanner(
        m, None, PlannerOptions(max_nodes=2, max_repairs=0, quality_checks=False)
    ).plan("t", ctx=RunContext())
    assert plan.fallback_reason is not None and "more than the 2 allowed" in plan.fallback_reason
    assert m.calls == 1
    assert (
        len(
            (
                await LLMPlanner(ScriptedModel([three]), None, PlannerOptions(max_nodes=3)).plan(
                    "t", ctx=RunContext()
                )
            ).nodes
        )
        == 3
    )


async def test_quality_checks_can_be_turned_off():
    no_vfs = {"nodes": [{"id": "a", "instruction": "i", "inputs": ["USER_TASK"], "outputs": ["x"]}]}
    m = ScriptedModel([no_vfs])
    assert (
        await LLMPlanner(m, None, PlannerOptions(quality_checks=False)).plan("t", ctx=RunContext())
    ).nodes[0].id == "a"


async def test_a_repeated_rejected_plan_raises_the_temperature():
    m = ScriptedModel([BAD, BAD, GOOD])
    await LLMPlanner(
        m,
        None,
        PlannerOptions(settings=PLANNER_SETTINGS.replace(temperature=0.0), repeat_temperature=0.7),
    ).plan("t", ctx=RunContext())
    assert [r.settings.temperature for r in m.requests] == [0.0, 0.0, 0.7]


async def test_invalid_and_useless_problems_are_reported_together():
    copied = json.loads(json.dumps(prompts.DEMO_PLAN))
    copied["nodes"].insert(
        0, {"id": "extra", "instruction": "verify", "inputs": [], "outputs": ["ok"]}
    )
    copied["nodes"][1]["inputs"].append("nowhere.no_such_output")
    m = ScriptedModel([copied, GOOD])
    await LLMPlanner(m).plan("t", ctx=RunContext())
    feedback = m.requests[1].messages[-1].content
    assert (
        "names unknown node 'nowhere'" in feedback
        and "copies the example" in feedback
        and "'extra' has no inputs" in feedback
    )


def test_planning_schema_leaves_out_what_small_models_get_wrong_and_admits_only_parsable_plans():
    import jsonschema

    from verimap.planning.plan_checks import planning_schema

    schema = planning_schema()
    assert "edges" not in schema["properties"]
    node = schema["$defs"]["Node"]
    assert "final" not in node["properties"] and node["properties"]["inputs"]["minItems"] == 1
    assert set(node["required"]) == {
        "id",
        "name",
        "instruction",
        "inputs",
        "outputs",
        "verification",
    }
    for demo in (prompts.DEMO_PLAN, prompts.CODE_DEMO_PLAN, prompts.QA_DEMO_PLAN):
        jsonschema.validate(demo, schema)
        jsonschema.validate(demo, plan_json_schema())
        parse_plan(demo)
    no_inputs = json.loads(json.dumps(prompts.CODE_DEMO_PLAN))
    no_inputs["nodes"][0]["inputs"] = []
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(no_inputs, schema)
    assert (
        planning_schema(require_vfs=False)["$defs"]["Node"]["properties"]["verification"].get(
            "minItems"
        )
        is None
    )


def test_the_planning_schema_admits_a_check_only_with_the_arguments_it_takes():
    import jsonschema

    from verimap.planning.plan_checks import planning_schema

    schema = planning_schema()
    plan = json.loads(json.dumps(prompts.DEMO_PLAN))
    node = plan["nodes"][0]

    def with_check(vf: dict) -> dict:
        node["verification"] = [{"name": "c", "type": "check", **vf}]
        return plan

    jsonschema.validate(with_check({"check": "run_examples"}), schema)
    parse_plan(plan)
    for bad in (
        {"check": "run_examples", "args": {"outputs": "solve.answer"}},
        {"check": "number_in_range", "args": {"output": "x"}},
        {"check": "number_in_range", "args": {"output": "x", "min": "0", "max": 9}},
        {"check": "yes_no", "args": {"output": "x", "extra": "y"}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(with_check(bad), schema)


async def test_a_reply_cut_at_the_length_limit_is_named_as_such():
    from verimap.base.messages import ModelResponse
    from verimap.base.usage import Usage

    cut = ModelResponse(
        content='{"nodes": [{"id": "a", "verification": [{"name": "v"}]',
        finish_reason="length",
        usage=Usage(calls=1, completion_tokens=300),
    )
    m = ScriptedModel([cut, GOOD])
    await LLMPlanner(
        m, None, PlannerOptions(settings=PLANNER_SETTINGS.replace(max_tokens=2048))
    ).plan("t", ctx=RunContext())
    feedback = m.requests[1].messages[-1].content
    assert "cut off at the length limit (300 tokens)" in feedback and "empty plan" not in feedback


async def test_repairs_show_only_the_latest_rejected_reply():
    m = ScriptedModel(["not a plan", BAD, GOOD])
    await LLMPlanner(m, None, PlannerOptions(max_repairs=3)).plan("t", ctx=RunContext())
    first, third = m.requests[0].messages, m.requests[2].messages
    assert len(third) == len(first) + 2
    assert third[-2] == AssistantMessage(content=json.dumps(BAD))
    assert "not a plan" not in json.dumps(to_openai(third))


async def test_unambiguous_bare_input_names_are_resolved_and_ambiguous_ones_reported():
    from verimap.planning.plan_fixes import resolve_bare_inputs

    def n(id, inputs, outputs):
        return {
            "id": id,
            "instruction": id,
            "inputs": inputs,
            "outputs": outputs,
            "verification": [
                {"name": "v", "type": "python", "code": f"assert outputs['{outputs[0]}']"}
            ],
        }

    bare = {"nodes": [n("a", ["USER_TASK"], ["g"]), n("b", ["g", "USER_TASK"], ["z"])]}
    plan = await LLMPlanner(ScriptedModel([bare])).plan("t", ctx=RunContext())
    assert plan.node("b").inputs == ["a.g", "USER_TASK"] and plan.final_node().id == "b"
    twice = {
        "nodes": [n("a", ["USER_TASK"], ["g"]), n("c", ["USER_TASK"], ["g"]), n("b", ["g"], ["z"])]
    }
    assert resolve_bare_inputs(twice)["nodes"][2]["inputs"] == ["g"]
    assert resolve_bare_inputs(["not", "a", "plan"]) == ["not", "a", "plan"]
    by_node = {"nodes": [n("a", ["USER_TASK"], ["g"]), n("b", ["a"], ["z"])]}
    assert resolve_bare_inputs(by_node)["nodes"][1]["inputs"] == ["a.g"]
    two_outputs = {"nodes": [n("a", ["USER_TASK"], ["g", "h"]), n("b", ["a"], ["z"])]}
    assert resolve_bare_inputs(two_outputs)["nodes"][1]["inputs"] == ["a"]


async def test_a_repair_that_brings_back_the_same_problems_is_sampled_once_then_given_up():
    """Four rounds of the same invalid plan cost the 1.5B six minutes before the fallback."""
    bad_ref = json.loads(json.dumps(GOOD))
    bad_ref["nodes"][-1]["inputs"] = ["USER_TASK", "nowhere.no_such_output"]
    variants = []
    for i in range(4):
        v = json.loads(json.dumps(bad_ref))
        v["nodes"][0]["name"] = f"try {i}"  # different text, the same problems
        variants.append(v)
    m = ScriptedModel([*variants, GOOD])
    planner = LLMPlanner(
        m,
        None,
        PlannerOptions(
            settings=PLANNER_SETTINGS.replace(temperature=0.0),
            repeat_temperature=0.7,
            max_repairs=4,
        ),
    )
    plan = await planner.plan("t", ctx=RunContext())
    assert [r.settings.temperature for r in m.requests] == [0.0, 0.0, 0.7]
    assert "same problems came back" in plan.fallback_reason and "nowhere" in plan.fallback_reason
    strict = LLMPlanner(
        ScriptedModel(variants),
        None,
        PlannerOptions(
            settings=PLANNER_SETTINGS.replace(temperature=0.0), max_repairs=4, fallback=False
        ),
    )
    with pytest.raises(PlanningError, match="same problems came back"):
        await strict.plan("t", ctx=RunContext())


async def test_a_planner_without_vfs_neither_asks_for_nor_keeps_them():
    """The paper's MAP and MAP-V plan without verification functions."""
    import jsonschema

    from verimap.planning.plan_checks import planning_schema

    m = ScriptedModel([GOOD, GOOD])
    planner = LLMPlanner(m, default_tools(), PlannerOptions(write_vfs=False))
    plan = await planner.plan("Double the number 21.", ctx=RunContext())
    assert [n.verification for n in plan.nodes] == [[], []]
    text = json.dumps(to_openai(m.requests[0].messages))
    assert "bakery" in text and "calculator" in text
    assert "verification" not in text and "VF" not in text
    schema = m.requests[0].response_schema
    assert "verification" not in schema["$defs"]["Node"]["properties"]
    stripped = {"nodes": [prompts.without_vfs(n) for n in prompts.DEMO_PLAN["nodes"]]}
    jsonschema.validate(stripped, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(stripped, planning_schema())
    failure = FailureContext(node_id="b", instruction="double", inputs={}, outputs={}, attempts=3)
    await planner.replan("task T", plan, failure, ctx=RunContext())
    assert "verification functions" not in m.requests[1].messages[-1].content
    with_vfs = "\n".join(x.content for x in LLMPlanner(m, default_tools()).plan_messages("t"))
    assert "verification functions (VFs)" in with_vfs and '"verification"' in with_vfs


def test_the_planning_schema_types_every_output():
    from verimap.planning.plan_checks import planning_schema

    outputs = planning_schema()["$defs"]["Node"]["properties"]["outputs"]
    assert outputs["type"] == "object" and "number" in outputs["additionalProperties"]["enum"]
    assert "any" not in outputs["additionalProperties"]["enum"]


def test_the_replan_context_shows_only_what_failed():
    ok = VFVerdict(name="fine", type="python", outcome="PASS")
    bad = VFVerdict(
        name="sum", type="python", outcome="FAIL", message="expected 12", traceback="x" * 9000
    )
    text = FailureContext(node_id="b", verdicts=[ok, bad], attempts=3).render()
    assert "'sum'" in text and "'fine'" not in text and "(1 other(s) passed)" in text
    assert len(text) <= 4000 and "characters cut" in text
    assert FailureContext(node_id="b", verdicts=[bad]).kind == "verification"
    assert (
        FailureContext(
            node_id="b", verdicts=[VFVerdict(name="e", type="python", outcome="ERROR")]
        ).kind
        == "vf_error"
    )
    assert FailureContext(node_id="b", error="price: expected number").kind == "executor"


async def test_a_failed_replan_falls_back_and_a_failed_fallback_runs_again():
    from verimap.planning.fallback import fallback_plan

    previous = parse_plan(GOOD)
    plan = await LLMPlanner(ScriptedModel([BAD] * 2), None, PlannerOptions(max_repairs=1)).replan(
        "t", previous, failed_at("b"), ctx=RunContext()
    )
    assert plan.fallback_reason and "no valid plan" in plan.fallback_reason
    fb = fallback_plan("What is 6 * 7?")
    again = await LLMPlanner(ScriptedModel([BAD] * 2), None, PlannerOptions(max_repairs=1)).replan(
        "t", fb, failed_at("solve"), ctx=RunContext()
    )
    assert again is fb


def test_fallback_plans_follow_the_task_kind():
    from verimap.planning.fallback import fallback_plan

    code_task = 'def add(a, b):\n    """Add.\n    >>> add(1, 2)\n    3\n    """\n'
    code = fallback_plan(code_task, "programming")
    assert code.nodes[0].outputs == {"code": "code"}
    assert code.nodes[0].verification[0].check == "run_examples"
    num = fallback_plan("How many apples?", "math")
    assert num.nodes[0].outputs == {"answer": "number"} and num.nodes[0].inputs == ["USER_TASK"]
    assert fallback_plan("Who won?", "qa").nodes[0].outputs == {"answer": "string"}
    assert fallback_plan("How many?", with_vfs=False).nodes[0].verification == []


async def test_vfs_that_check_nothing_are_dropped_at_once_rather_than_repaired():
    """A repair round costs a whole plan; on the local 1.5B none ever fixed a plan."""
    plan = json.loads(json.dumps(GOOD))
    plan["nodes"][1]["verification"].append({"name": "noop", "type": "python", "code": "x = 1"})
    m = ScriptedModel([plan] * 3)
    got = await LLMPlanner(m, None, PlannerOptions(max_repairs=2)).plan("t", ctx=RunContext())
    assert m.calls == 1 and got.fallback_reason is None
    assert [v.name for v in got.node("b").verification] == [
        v["name"] for v in GOOD["nodes"][1]["verification"]
    ]
    assert got.dropped_vfs and got.dropped_vfs[0].startswith("b.noop (checks nothing")


async def test_a_node_whose_only_vf_is_dropped_keeps_a_deterministic_check():
    plan = json.loads(json.dumps(GOOD))
    plan["nodes"][0]["verification"] = [{"name": "noop", "type": "python", "code": "x = 1"}]
    got = await LLMPlanner(ScriptedModel([plan])).plan("t", ctx=RunContext())
    assert [v.name for v in got.node("a").verification] == ["outputs_nonempty"]
    assert got.dropped_vfs == ["a.noop (checks nothing)"] or got.dropped_vfs[0].startswith("a.noop")


async def test_a_final_node_whose_vfs_check_an_answer_it_lacks_is_not_salvaged():
    # r39/gsm8k/51: the answer node fell into a VF string; the extraction node became final.
    plan = json.loads(json.dumps(GOOD))
    for n in plan["nodes"]:
        n["outputs"].append("w")  # with one output, `outputs['answer']` would be read as it
    plan["nodes"][1]["verification"] = [
        {"name": "ans", "type": "python", "code": "assert outputs['answer'] > 0"}
    ]
    got = await LLMPlanner(ScriptedModel([plan]), None, PlannerOptions(max_repairs=0)).plan(
        "t", ctx=RunContext()
    )
    assert got.fallback_reason is not None and got.dropped_vfs == []
    assert [n.id for n in got.nodes] == ["solve"]
    plan["nodes"][0]["verification"] = plan["nodes"][1]["verification"]
    plan["nodes"][1]["verification"] = [{"name": "noop", "type": "python", "code": "x = 1"}]
    got = await LLMPlanner(ScriptedModel([plan]), None, PlannerOptions(max_repairs=0)).plan(
        "t", ctx=RunContext()
    )
    assert got.fallback_reason is None and [n.id for n in got.nodes] == ["a", "b"]
    assert sorted(got.dropped_vfs)[0].startswith("a.ans (line 1: outputs['answer'] is not an")


async def test_a_plan_with_other_problems_is_repaired_not_salvaged():
    plan = json.loads(json.dumps(GOOD))
    plan["nodes"][1]["verification"].append({"name": "noop", "type": "python", "code": "x = 1"})
    plan["nodes"][1]["inputs"].append("nowhere.no_such_output")
    m = ScriptedModel([plan, GOOD])
    got = await LLMPlanner(m).plan("t", ctx=RunContext())
    assert m.calls == 2 and got.dropped_vfs == [] and "noop" in m.requests[1].messages[-1].content


async def test_two_replies_in_a_row_cut_at_the_limit_end_the_repairs():
    from verimap.base.messages import ModelResponse
    from verimap.base.usage import Usage

    cut = ModelResponse(
        content='{"nodes": [{"id": "a"',
        finish_reason="length",
        usage=Usage(calls=1, completion_tokens=1024),
    )
    m = ScriptedModel([cut, cut, GOOD])
    plan = await LLMPlanner(m, None, PlannerOptions(max_repairs=3)).plan("t", ctx=RunContext())
    assert m.calls == 2 and plan.fallback_reason and "cut off" in plan.fallback_reason


async def test_the_planner_works_the_task_out_before_the_plan():
    m = ScriptedModel(["Price 17, quantity 23, so 17 * 23 = 391.", GOOD])
    plan = await LLMPlanner(
        m,
        None,
        PlannerOptions(settings=PLANNER_SETTINGS.replace(temperature=0.0), think_first=True),
    ).plan("How much do 23 pens at $17 cost?", ctx=RunContext())
    assert plan.nodes[0].id == "a"
    think, write = m.requests
    assert think.response_schema is None and write.response_schema is not None
    assert think.messages[-1].content.endswith(prompts.PLAN_THINK)
    assert write.messages[: len(think.messages)] == think.messages  # one cached prefix
    assert write.messages[-2] == AssistantMessage(
        content="Price 17, quantity 23, so 17 * 23 = 391."
    )
    assert write.messages[-1].content == prompts.PLAN_AFTER_THINKING
    assert think.settings.max_tokens == 512 and {r.role for r in m.requests} == {"planner"}


async def test_a_replan_is_thought_out_too_and_thinking_can_be_turned_off():
    m = ScriptedModel(
        ["The doubling node failed; y must be 2 * x.", changed(GOOD, "b", instruction="y = 2x")]
    )
    await LLMPlanner(m, None, PlannerOptions(think_first=True)).replan(
        "t", parse_plan(GOOD), failed_at("b"), ctx=RunContext()
    )
    assert [r.response_schema is None for r in m.requests] == [True, False]
    assert [r.purpose for r in m.requests] == [
        PlanCall(kind="think", task="t"),
        PlanCall(kind="replan", task="t"),
    ]
    assert "What failed" in m.requests[0].messages[-1].content
    m = ScriptedModel([GOOD])
    await LLMPlanner(m).plan("t", ctx=RunContext())
    assert len(m.requests) == 1


async def test_a_final_node_without_an_answer_of_the_tasks_type_is_sent_back():
    typed = changed(GOOD, "b", outputs={"y": "boolean"})
    m = ScriptedModel([typed, typed])
    plan = await LLMPlanner(
        m, None, PlannerOptions(answer_types=("code",), max_repairs=1, domain="math")
    ).plan("t", ctx=RunContext())
    assert "must have an output of type code" in m.requests[1].messages[-1].content
    assert [r.purpose.label for r in m.requests] == ["plan", "plan:repair"]
    assert plan.fallback_reason and plan.nodes[0].outputs == {"answer": "number"}
    assert not (
        await LLMPlanner(ScriptedModel([GOOD]), None, PlannerOptions(answer_types=("code",))).plan(
            "t", ctx=RunContext()
        )
    ).fallback_reason


async def test_a_rejected_plan_is_reported_to_the_context_with_its_reply_and_metered():
    m = ScriptedModel([BAD, GOOD])
    events: list[Event] = []
    ctx = RunContext(run_id="r1", iteration=2, sink=events.append)
    plan = await LLMPlanner(m).plan("t", ctx=ctx)
    assert plan.node("b").instruction == "double"
    invalid = [e for e in events if e.type == PLAN_INVALID]
    assert len(invalid) == 1 and invalid[0].data["problems"]
    assert json.loads(invalid[0].data["reply"]) == BAD
    assert (invalid[0].run_id, invalid[0].iteration, invalid[0].node_id) == ("r1", 2, None)
    calls = [e for e in events if e.type == "model_call"]
    assert [c.data["role"] for c in calls] == ["planner", "planner"]
    assert ctx.ledger.usage.roles["planner"].calls == 2


async def test_a_planner_tried_outside_a_run_takes_a_fresh_context():
    plan = await LLMPlanner(ScriptedModel([BAD, GOOD])).plan("t", ctx=RunContext())
    assert [n.id for n in plan.nodes] == ["a", "b"]


async def test_add_vfs_planner_passes_the_context_on():
    class Inner:
        async def plan(self, task, *, ctx):
            return parse_plan(GOOD)

        async def replan(self, task, previous, failure, *, ctx):
            return parse_plan(GOOD)

    events: list[Event] = []
    ctx = RunContext(sink=events.append)
    assert (await AddVFsPlanner(Inner()).plan("t", ctx=ctx)).node("a").verification
    await AddVFsPlanner(LLMPlanner(ScriptedModel([BAD, GOOD]))).plan("t", ctx=ctx)
    assert [e.type for e in events].count(PLAN_INVALID) == 1


CODE_TASK = '''Complete the function.
```python
def double(x: int) -> int:
    """Twice x.
    >>> double(2)
    4
    """
```'''

# The shape the 1.5B wrote for HumanEval/1 in `make demo`: string nodes whose VFs misuse
# run_examples (one reads a task the node does not take), a final `code` output typed string.
STRING_PIPELINE = {
    "nodes": [
        {
            "id": "parse",
            "instruction": "read the input",
            "inputs": ["USER_TASK"],
            "outputs": {"text": "string"},
            "verification": [
                {
                    "name": "task_examples",
                    "type": "python",
                    "code": "run_examples(outputs['text'], inputs['USER_TASK'])",
                }
            ],
        },
        {
            "id": "implement",
            "instruction": "write it",
            "inputs": ["parse.text"],
            "outputs": {"code": "string"},
            "verification": [
                {
                    "name": "task_examples",
                    "type": "python",
                    "code": "run_examples(outputs['code'], inputs['USER_TASK'])",
                }
            ],
        },
    ]
}


async def test_a_code_tasks_final_node_is_typed_code_and_checked_against_the_tasks_examples():
    planner = LLMPlanner(
        ScriptedModel([STRING_PIPELINE]),
        None,
        PlannerOptions(domain="programming", answer_types=("code", "string")),
    )
    got = await planner.plan(CODE_TASK, ctx=RunContext())
    final = got.node("implement")
    assert got.fallback_reason is None and final.outputs["code"] == "code"
    assert "USER_TASK" in final.inputs
    assert [v.name for v in final.verification] == ["task_examples"]
    # The intermediate node's broken VF is still dropped, not kept.
    assert [v.name for v in got.node("parse").verification] == ["outputs_nonempty"]


async def test_a_final_code_node_without_an_examples_vf_gets_one():
    plan = json.loads(json.dumps(STRING_PIPELINE))
    plan["nodes"][1]["verification"] = [
        {"name": "has_def", "type": "python", "code": "assert 'def ' in outputs['code']"}
    ]
    planner = LLMPlanner(
        ScriptedModel([plan]),
        None,
        PlannerOptions(domain="programming", answer_types=("code", "string")),
    )
    final = (await planner.plan(CODE_TASK, ctx=RunContext())).node("implement")
    assert [v.name for v in final.verification] == ["has_def", "task_examples"]
    assert final.verification[1].check == "run_examples"  # the check reads the run's task
    # Not on math plans, nor on code tasks without examples.
    math = await LLMPlanner(
        ScriptedModel([plan]), None, PlannerOptions(answer_types=("number", "string"))
    ).plan(CODE_TASK, ctx=RunContext())
    assert [v.name for v in math.node("implement").verification] == ["has_def"]
    bare = await LLMPlanner(
        ScriptedModel([plan]),
        None,
        PlannerOptions(domain="programming", answer_types=("code", "string")),
    ).plan("Write double(x).", ctx=RunContext())
    assert [v.name for v in bare.node("implement").verification] == ["has_def"]
    off = await LLMPlanner(
        ScriptedModel([plan]),
        None,
        PlannerOptions(domain="programming", task_examples=False, answer_types=("code", "string")),
    ).plan(CODE_TASK, ctx=RunContext())
    assert [v.name for v in off.node("implement").verification] == ["has_def"]
    assert off.node("implement").outputs == {"code": "code"}  # typed all the same


async def test_an_examples_vf_on_other_examples_does_not_stand_in_for_the_tasks():
    """The 1.5B on HumanEval/72: `run_examples(outputs['code'], inputs['parse.inputs'])`."""
    plan = json.loads(json.dumps(STRING_PIPELINE))
    plan["nodes"][1]["verification"] = [
        {
            "name": "examples",
            "type": "python",
            "code": "run_examples(outputs['code'], inputs['parse.text'])",
        }
    ]
    planner = LLMPlanner(
        ScriptedModel([plan]), None, PlannerOptions(domain="programming", answer_types=("code",))
    )
    final = (await planner.plan(CODE_TASK, ctx=RunContext())).node("implement")
    assert [v.name for v in final.verification] == ["examples", "task_examples"]


async def test_a_code_tasks_plan_whose_answer_is_not_code_goes_back():
    """The 1.5B on HumanEval/30: a last node "combining the parts into a plan" (a string)."""
    plan = json.loads(json.dumps(STRING_PIPELINE))
    plan["nodes"].append(
        {
            "id": "final",
            "instruction": "combine the parts into a plan",
            "outputs": {"plan": "string"},
            "inputs": ["implement.code"],
            "verification": [
                {"name": "n", "type": "python", "code": "assert outputs['plan'].strip()"}
            ],
        }
    )
    m = ScriptedModel([plan, STRING_PIPELINE])
    got = await LLMPlanner(
        m, None, PlannerOptions(domain="programming", answer_types=("code",))
    ).plan(CODE_TASK, ctx=RunContext())
    assert m.calls == 2 and "must have an output of type code" in m.requests[1].messages[-1].content
    assert got.final_node().id == "implement" and got.final_node().outputs == {"code": "code"}


@pytest.mark.parametrize(
    ("domain", "task", "output"),
    [
        ("math", "Double 21.", "answer"),
        ("programming", 'def f(x):\n    """Double x.\n    >>> f(1)\n    2\n    """\n', "code"),
    ],
)
async def test_a_one_node_cap_runs_the_whole_task_as_one_node_without_a_model_call(
    domain, task, output
):
    m = ScriptedModel([])
    planner = LLMPlanner(m, None, PlannerOptions(max_nodes=1, domain=domain))
    plan = await planner.plan(task, ctx=RunContext())
    assert [n.id for n in plan.nodes] == ["solve"] and list(plan.nodes[0].outputs) == [output]
    assert plan.rule == "one-node plan (max_nodes=1)" and plan.fallback_reason is None
    assert plan.nodes[0].verification
    failure = FailureContext(node_id="solve")
    assert (await planner.replan("t", plan, failure, ctx=RunContext())).nodes[0].id == "solve"
    assert m.calls == 0
