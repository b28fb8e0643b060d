"""How a run ends: pure functions of what the run knows."""

from verimap.base.plan import Node, Plan
from verimap.config import Loop, RunConfig, Verify
from verimap.core.result import AttemptReport, NodeReport
from verimap.core.run_end import (
    best_unverified,
    plurality,
    repeated_work_error,
    unconfirmed_error,
    why_unverified,
)


def test_work_handed_back_ends_the_run_only_past_the_limit():
    config = RunConfig(loop=Loop(max_plan_repeats=1))
    assert repeated_work_error(config, "n1", 1) is None
    error = repeated_work_error(config, "n1", 2)
    assert error is not None and "after 2 failed runs" in error and "max_plan_repeats=1" in error
    assert repeated_work_error(RunConfig(loop=Loop(max_plan_repeats=None)), "n1", 9) is None


def test_an_unconfirmed_end_names_the_disputing_checks_once_each_and_the_votes():
    report = NodeReport(node_id="n1", status="unconfirmed", unconfirmed="votes: 2 for 7")
    error = unconfirmed_error(RunConfig(), "n1", report, ["b", "a", "b"])
    assert error == (
        "node 'n1' passed its VFs, but a and b did not confirm any of its answers; the answer "
        "most solutions gave is kept, unverified (votes: 2 for 7)"
    )
    plain = unconfirmed_error(
        RunConfig(verify=Verify(agreement=2), loop=Loop(max_retries=3)),
        "n1",
        NodeReport(node_id="n1"),
        [],
    )
    assert "its answers did not agree 2 times in 4 attempts" in plain


def test_a_run_is_verified_only_when_it_succeeded_and_its_final_node_is_confirmed():
    reports = {"f": NodeReport(node_id="f", status="verified")}
    assert why_unverified(RunConfig(), "success", "f", reports) is None
    assert why_unverified(RunConfig(), "failed", "f", reports) == "the run ended failed"
    assert why_unverified(RunConfig(), "success", "g", reports) == "the final node did not run"
    none = RunConfig(verify=Verify(verification="none"))
    assert why_unverified(none, "success", "f", reports) == "the method runs no verification"


def test_the_plurality_counts_equal_numbers_alike_and_keeps_the_earliest_on_a_tie():
    assert plurality([{"x": 1}, {"x": 2.0}, {"x": 2}]) == ({"x": 2.0}, 2)
    assert plurality([{"x": [1]}, {"x": (1.0,)}, {"x": 3}]) == ({"x": [1]}, 2)
    assert plurality([{"x": 1}, {"x": 2}]) == ({"x": 1}, 1)


def test_the_best_unverified_answer_is_the_final_nodes_plurality_else_a_done_ancestors():
    shape = Plan(
        nodes=[
            Node(id=n, instruction=n, inputs=inputs, outputs={"v": "number"})
            for n, inputs in [("a", ["USER_TASK"]), ("b", ["a.v"]), ("f", ["b.v"])]
        ]
    ).shape()
    tried = [
        AttemptReport(iteration=2, attempt=i, outputs={"v": v}) for i, v in enumerate([7, 7, 5])
    ]
    final = NodeReport(node_id="f", iteration=2, attempts=tried)
    assert best_unverified(shape, {"f": final}, 2) == {"v": 7}
    assert best_unverified(shape, {"f": final}, 2, "last") == {"v": 5}
    done = {n: NodeReport(node_id=n, status="verified", outputs={"v": n}) for n in "ab"}
    assert best_unverified(shape, {**done, "f": final}, 3) == {"v": "b"}
    assert best_unverified(shape, {"a": done["a"]}, 3) == {"v": "a"}
    assert best_unverified(shape, {}, 3) is None
