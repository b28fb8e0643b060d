"""How the training exports label the plans of eval runs: a plan the fallback or a rule made is
flagged, from the trace or, without one, by its shape."""

from verimap.base import events as ev
from verimap.evals.run_plans import one_node_plan, trace_labels
from verimap.planning.fallback import fallback_plan, whole_task_plan
from verimap.planning.plan import parse_plan

TASK = "Write a function to add two numbers.\nassert add(1, 2) == 3"


def test_a_rule_plan_is_flagged_like_a_fallback():
    plan = ev.Plan(plan={})
    events = [
        ev.PlanRule(rule="one-node plan (small-model policy)"),
        plan,
        ev.NodeFinish(status="failed"),
        ev.Replan(failed_node="solve", failure={}),
        plan,
        ev.Finish(status="success"),
    ]
    assert trace_labels(events) == (["failed", "verified"], [True, False])


def test_the_whole_task_as_one_node_is_known_by_its_shape():
    for domain in ("math", "programming", "qa"):
        assert one_node_plan(whole_task_plan(TASK, domain), TASK, domain, with_vfs=True)
        assert one_node_plan(fallback_plan(TASK, domain), TASK, domain, with_vfs=True)
    bare = whole_task_plan(TASK, "math", with_vfs=False)
    assert one_node_plan(bare, TASK, "math", with_vfs=False)
    assert not one_node_plan(bare, TASK, "math", with_vfs=True)
    other = whole_task_plan(TASK, "math").model_dump(by_alias=True)
    other["nodes"][0]["instruction"] = "Solve it your own way."
    assert not one_node_plan(parse_plan(other), TASK, "math", with_vfs=True)
