"""The rewrites of raw plan JSON: each fixes one slip small models make, and only when its
meaning is unambiguous."""

import copy

from verimap.planning.plan import parse_plan
from verimap.planning.plan_fixes import (
    drop_checker_tail,
    fix_raw_plan,
    give_vfs_the_task,
    join_extra_sinks,
    number_repeated_node_ids,
    number_repeated_vf_names,
    resolve_misattributed_outputs,
    resolve_near_miss_outputs,
    resolve_vf_keys,
    type_code_answer,
)


def node(id, inputs, outputs, code=None):
    out = {"id": id, "instruction": id, "inputs": inputs, "outputs": {o: "number" for o in outputs}}
    out["verification"] = [
        {"name": "v", "type": "python", "code": code or f"assert outputs['{outputs[0]}'] > 0"}
    ]
    return out


# The shape seen on GSM8K with the 1.5B: siblings compute parts, the last node forgets them.
SIBLINGS = {
    "nodes": [
        node("extract", ["USER_TASK"], ["hours", "rate"]),
        node("regular", ["USER_TASK", "extract.hours", "extract.rate"], ["regular_pay"]),
        node("overtime", ["USER_TASK", "extract.hours", "extract.rate"], ["overtime_pay"]),
        node("final", ["USER_TASK", "extract.hours"], ["answer"]),
    ]
}


def test_extra_sinks_feed_the_last_one_which_becomes_the_final_node():
    raw = join_extra_sinks(copy.deepcopy(SIBLINGS))
    plan = parse_plan(raw)
    assert plan.final_node().id == "final"
    assert plan.node("final").inputs == [
        "USER_TASK",
        "extract.hours",
        "regular.regular_pay",
        "overtime.overtime_pay",
    ]
    assert plan.node("regular").inputs == SIBLINGS["nodes"][1]["inputs"]


def test_plans_with_one_sink_a_final_flag_or_explicit_edges_are_left_alone():
    one = {"nodes": SIBLINGS["nodes"][:2]}
    assert join_extra_sinks(copy.deepcopy(one)) == one
    flagged = copy.deepcopy(SIBLINGS)
    flagged["nodes"][2]["final"] = True
    assert join_extra_sinks(copy.deepcopy(flagged)) == flagged
    edged = {**copy.deepcopy(SIBLINGS), "edges": [["regular", "final"]]}
    assert join_extra_sinks(copy.deepcopy(edged)) == edged
    assert join_extra_sinks(["not", "a", "plan"]) == ["not", "a", "plan"]


def test_a_near_miss_output_name_is_resolved_only_when_one_output_fits():
    raw = {
        "nodes": [
            node("calc", ["USER_TASK"], ["total_distance"]),
            node("two", ["USER_TASK"], ["total_cost", "total_weight"]),
            node(
                "end",
                ["calc.total_meters", "two.total_costs", "two.total", "nowhere.x"],
                ["answer"],
            ),
        ]
    }
    got = resolve_near_miss_outputs(raw)["nodes"][2]["inputs"]
    assert got == ["calc.total_distance", "two.total_cost", "two.total", "nowhere.x"]


def test_an_input_under_the_wrong_node_is_rewired_to_the_one_node_that_outputs_it():
    """Seen on GSM8K (r35): every input named `extract.`, also for later nodes' outputs."""
    raw = {
        "nodes": [
            node("extract", ["USER_TASK"], ["run_speed", "skip_speed"]),
            node("run_distance", ["extract.run_speed"], ["run_distance"]),
            node("skip_distance", ["extract.skip_speed"], ["skip_distance"]),
            node(
                "total",
                ["extract.run_distance", "nowhere.skip_distance", "extract.total_time"],
                ["answer"],
            ),
            node("echo", ["extract.answer"], ["copy"]),
        ]
    }
    got = resolve_misattributed_outputs(copy.deepcopy(raw))
    assert got["nodes"][3]["inputs"] == [
        "run_distance.run_distance",
        "skip_distance.skip_distance",
        "extract.total_time",
    ]
    assert got["nodes"][4]["inputs"] == ["total.answer"]
    # two other nodes output `run_distance`: ambiguous, left for the validator to report
    twice = copy.deepcopy(raw)
    twice["nodes"][4]["outputs"] = {"run_distance": "number"}
    assert resolve_misattributed_outputs(copy.deepcopy(twice))["nodes"][3]["inputs"][0] == (
        "extract.run_distance"
    )
    # and it comes before the near-miss rewrite, which would have taken `extract.run_speed`
    fixed = fix_raw_plan(copy.deepcopy(raw))
    assert fixed["nodes"][3]["inputs"][0] == "run_distance.run_distance"


def test_a_vf_naming_the_answer_after_the_task_reads_the_only_output():
    raw = {
        "nodes": [
            node("final", ["a.hours"], ["answer"], "assert outputs['total_pay'] > outputs['hours']")
        ]
    }
    code = resolve_vf_keys(raw)["nodes"][0]["verification"][0]["code"]
    assert code == "assert outputs['answer'] > inputs['a.hours']"
    two = {"nodes": [node("n", [], ["x", "y"], "assert outputs['z'] > 0")]}
    assert resolve_vf_keys(two)["nodes"][0]["verification"][0]["code"] == "assert outputs['z'] > 0"


def test_a_vf_reading_an_input_as_an_output_is_rewritten_when_unambiguous():
    raw = {
        "nodes": [
            {
                "id": "c",
                "inputs": ["ex.first", "ex.second", "ey.second"],
                "outputs": {"total": "number"},
                "verification": [
                    {
                        "name": "v",
                        "type": "python",
                        "code": "assert outputs['total'] == outputs['first'] + outputs.get(\"second\")",
                    }
                ],
            }
        ]
    }
    code = resolve_vf_keys(raw)["nodes"][0]["verification"][0]["code"]
    assert code == "assert outputs['total'] == inputs['ex.first'] + outputs.get(\"second\")"


def test_a_repeated_vf_name_is_numbered():
    vfs = [
        {"name": "positive", "code": "a"},
        {"name": "positive", "code": "b"},
        {"name": "positive_2", "code": "c"},
        {"name": "positive", "code": "d"},
    ]
    raw = number_repeated_vf_names({"nodes": [{"id": "a", "verification": vfs}]})
    names = [vf["name"] for vf in raw["nodes"][0]["verification"]]
    assert names == ["positive", "positive_3", "positive_2", "positive_4"]
    assert number_repeated_vf_names({"nodes": "x"}) == {"nodes": "x"}


def test_a_repeated_node_id_is_numbered_and_inputs_follow_the_output_they_name():
    # r39/gsm8k/50: two steps named after their verb; the second reads the first's output.
    raw = {
        "nodes": [
            node("extract", ["USER_TASK"], ["eggs", "days"]),
            node("calculate", ["extract.eggs"], ["per_day"]),
            node("calculate", ["calculate.per_day", "extract.days"], ["answer"]),
        ]
    }
    fixed = number_repeated_node_ids(copy.deepcopy(raw))
    assert [n["id"] for n in fixed["nodes"]] == ["extract", "calculate", "calculate_2"]
    assert fixed["nodes"][2]["inputs"] == ["calculate.per_day", "extract.days"]
    assert parse_plan(fix_raw_plan(copy.deepcopy(raw))).final_node().id == "calculate_2"
    both = copy.deepcopy(raw)
    both["nodes"][1]["outputs"] = {"answer": "number"}
    both["nodes"].append(node("last", ["calculate.answer"], ["total"]))
    assert number_repeated_node_ids(both)["nodes"][3]["inputs"] == ["calculate.answer"]
    plain = {"nodes": [node("a", ["USER_TASK"], ["x"])]}
    assert number_repeated_node_ids(copy.deepcopy(plain)) == plain


def test_all_fixes_together_turn_a_typical_small_model_plan_valid():
    raw = copy.deepcopy(SIBLINGS)
    raw["nodes"][3]["inputs"] = ["USER_TASK", "hours", "regular.regular"]
    raw["nodes"][3]["verification"][0]["code"] = "assert outputs['total_pay'] > 0"
    plan = parse_plan(fix_raw_plan(raw))
    final = plan.final_node()
    assert (
        final.id == "final" and final.verification[0].code.strip() == "assert outputs['answer'] > 0"
    )
    assert final.inputs == [
        "USER_TASK",
        "extract.hours",
        "regular.regular_pay",
        "overtime.overtime_pay",
    ]


def test_a_trailing_checker_node_is_dropped_when_the_node_it_reads_gives_the_answer():
    """Seen on HumanEval: the answer would be the checker's `True`, not the code."""
    raw = {
        "nodes": [
            {**node("implement", ["USER_TASK"], ["code"]), "outputs": {"code": "code"}},
            {
                **node("verify", ["implement.code", "USER_TASK"], ["result"]),
                "outputs": {"result": "boolean"},
            },
        ]
    }
    assert drop_checker_tail(copy.deepcopy(raw), ()) == raw
    assert [n["id"] for n in drop_checker_tail(copy.deepcopy(raw), ("code",))["nodes"]] == [
        "implement"
    ]
    assert drop_checker_tail(copy.deepcopy(raw), ("number",)) == raw
    two_parents = copy.deepcopy(raw)
    two_parents["nodes"].insert(0, node("other", ["USER_TASK"], ["x"]))
    two_parents["nodes"][2]["inputs"].append("other.x")
    assert drop_checker_tail(copy.deepcopy(two_parents), ("code",)) == two_parents


def test_a_checker_reading_the_answer_and_its_sources_is_dropped():
    """Seen on GSM8K (r35): `verify` reads the result and the quantities it came from."""
    raw = {
        "nodes": [
            node("extract", ["USER_TASK"], ["miles", "days"]),
            node("work_out", ["extract.miles", "extract.days"], ["total"]),
            {
                **node("verify", ["USER_TASK", "extract.miles", "work_out.total"], ["ok"]),
                "outputs": {"ok": "boolean"},
            },
        ]
    }
    got = drop_checker_tail(copy.deepcopy(raw), ("number",))
    assert [n["id"] for n in got["nodes"]] == ["extract", "work_out"]
    parse_plan(got)
    # the checker is the only node reading `work_out`: two sinks would be left, so it stays
    raw["nodes"][2]["inputs"] = ["extract.miles"]
    assert drop_checker_tail(copy.deepcopy(raw), ("number",)) == raw


def test_a_node_whose_vf_reads_the_task_gets_the_task_as_input():
    raw = {
        "nodes": [
            node("a", ["USER_TASK"], ["x"]),
            node(
                "b", ["a.x"], ["code"], code="run_examples(outputs['code'], inputs[\"USER_TASK\"])"
            ),
            node("c", ["b.code"], ["y"], code="assert inputs.get('USER_TASKS') or outputs['y']"),
        ]
    }
    got = give_vfs_the_task(copy.deepcopy(raw))
    assert got["nodes"][1]["inputs"] == ["a.x", "USER_TASK"]
    assert got["nodes"][0]["inputs"] == ["USER_TASK"] and got["nodes"][2]["inputs"] == ["b.code"]


def test_a_code_tasks_final_output_named_like_code_is_typed_code():
    def plan(**outs):
        return {
            "nodes": [
                node("a", ["USER_TASK"], ["x"]),
                {"id": "b", "instruction": "b", "inputs": ["a.x"], "outputs": outs},
            ]
        }

    got = type_code_answer(plan(final_code="string", note="string"), ("code",))
    assert got["nodes"][1]["outputs"] == {"final_code": "code", "note": "string"}
    # Not when it is ambiguous, already typed, or the answer is not code.
    for outs, types in [
        ({"code": "string", "solution": "string"}, ("code",)),
        ({"code": "code", "source": "string"}, ("code",)),
        ({"code": "string"}, ("number", "string")),
    ]:
        assert type_code_answer(plan(**outs), types)["nodes"][1]["outputs"] == outs
