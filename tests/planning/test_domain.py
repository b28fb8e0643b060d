"""A task's kind when nobody names it: `verimap run` must never ask a question that is not about
a number for a number."""

import pytest

from verimap.base.run_context import RunContext
from verimap.planning.domain import infer_domain
from verimap.planning.fallback import whole_task_plan
from verimap.planning.planner import LLMPlanner, PlannerOptions
from verimap.testing import ScriptedModel


@pytest.mark.parametrize(
    ("task", "domain"),
    [
        (
            "Tom has 3 boxes of 12 pencils and gives away 7 pencils. How many pencils are left?",
            "math",
        ),
        ("A shop sells pens at 17 dollars each. How much do 23 pens cost?", "math"),
        ("What is 17 * 23?", "math"),
        ("What is six times seven?", "math"),
        ("Double the number 21.", "math"),
        ("Calculate the area of a circle of radius 2.", "math"),
        ("Who wrote Hamlet?", "qa"),
        ("What is the capital of France?", "qa"),
        ("How many moons does Mars have?", "qa"),
        (
            "Which company did TechCrunch report on 2023-10-31 as paying $26 billion for default search?",
            "qa",
        ),
        ("Did the Sporting News report come before the one published on October 7, 2023?", "qa"),
        ("Write a Python function is_prime(n) that says whether n is prime.", "programming"),
        ('def add(a, b):\n    """Add.\n    >>> add(1, 2)\n    3\n    """', "programming"),
    ],
)
def test_the_domain_is_read_from_the_task(task, domain):
    assert infer_domain(task) == domain


async def test_a_question_that_is_not_about_a_number_is_not_asked_for_one():
    """The planner of `verimap run` (no domain given) on the one-node rule: before, every task
    got the math node ("give the final numeric answer", a finite-number VF)."""
    planner = LLMPlanner(ScriptedModel([]), None, PlannerOptions(max_nodes=1))
    plan = await planner.plan("Who wrote Hamlet?", ctx=RunContext())
    node = plan.nodes[0]
    assert node.outputs == {"answer": "string"} and "numeric" not in node.instruction
    assert [v.name for v in node.verification] == ["answered"]
    math = await planner.plan("Tom has 3 boxes of 12 pencils. How many pencils?", ctx=RunContext())
    assert math.nodes[0].outputs == {"answer": "number"}
    assert whole_task_plan("Who wrote Hamlet?", "qa").nodes[0].outputs == {"answer": "string"}
