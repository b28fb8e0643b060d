"""The engine on the REAL local model server (0.5B): the structure of what comes back, and, where
a check makes the answer certain, the answer."""

import warnings

import pytest

import verimap
from verimap.base.accounting import Budget
from verimap.base.plan import Node
from verimap.base.run_context import RunContext
from verimap.config import Execution, Loop, RunConfig, Sampling
from verimap.core.executor import EXECUTOR_SETTINGS, Executor
from verimap.core.verifier import Verifier
from verimap.sandbox import get_sandbox
from verimap.tools.registry import default_tools

pytestmark = pytest.mark.localmodel


def process_sandbox():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_sandbox("process")


async def test_executor_returns_exactly_the_declared_outputs(local_model):
    node = Node(id="add", instruction="Add a and b.", inputs=["n1.a", "n1.b"], outputs=["total"])
    out = await Executor(
        local_model, default_tools(), max_steps=3, settings=EXECUTOR_SETTINGS.replace(temperature=0)
    ).execute(node, {"n1.a": 19, "n1.b": 23}, ctx=RunContext())
    assert out.error is None, out.error
    assert set(out.outputs) == {"total"}


async def test_the_judge_fails_a_wrong_answer_and_passes_the_right_one(default_local_model):
    """On the default 1.5B: the 0.5B passes "Berlin" for "city is Paris" whatever the prompt."""
    node = Node(
        id="cap",
        instruction="Give the capital of France.",
        inputs=["USER_TASK"],
        outputs=["city"],
        verification=[{"name": "is_paris", "type": "llm", "content": "city is Paris"}],
    )
    rep = await Verifier(None, default_local_model).verify(
        node, {"USER_TASK": "capital of France?"}, {"city": "Berlin"}, ctx=RunContext()
    )
    v = rep.verdicts[0]
    assert v.outcome == "FAIL" and v.type == "llm" and v.explanation.strip()
    right = await Verifier(None, default_local_model).verify(
        node, {"USER_TASK": "capital of France?"}, {"city": "Paris"}, ctx=RunContext()
    )
    assert right.verdicts[0].outcome == "PASS"


TYPED_PLAN = {
    "nodes": [
        {
            "id": "extract",
            "instruction": "Read the task and extract the price of one pen in dollars and the "
            "number of pens.",
            "inputs": ["USER_TASK"],
            "outputs": {"price": "number", "quantity": "integer"},
            "verification": [
                {
                    "name": "positive",
                    "type": "python",
                    "code": "assert outputs['price'] > 0 and outputs['quantity'] > 0",
                },
            ],
        },
        {
            "id": "total",
            "instruction": "Compute the total cost: price * quantity.",
            "inputs": ["extract.price", "extract.quantity"],
            "outputs": {"answer": "number"},
            "verification": [
                {
                    "name": "product",
                    "type": "python",
                    "code": "expected = inputs['extract.price'] * inputs['extract.quantity']\n"
                    "assert approx(outputs['answer'], expected), f'expected {expected}'",
                },
            ],
        },
    ]
}


async def test_a_typed_two_node_plan_gives_the_right_answer(local_models):
    """Typed outputs reach the VFs as numbers, and a failed check's message leads the retry to
    the right total: the run verifies and its answer is 391, a number."""
    from verimap.planning.fixed_planners import TemplatePlanner

    config = RunConfig(
        loop=Loop(max_retries=3, max_iterations=1),
        sampling=Sampling(temperature=0),
        execution=Execution(executor_max_steps=4),
        policies=[],
    )
    sandbox = process_sandbox()
    coord = verimap.build(local_models, sandbox, config=config, planner=TemplatePlanner(TYPED_PLAN))
    r = await coord.run("A shop sells pens at 17 dollars each. How much do 23 pens cost?")
    await sandbox.aclose()
    assert r.status == "success" and r.verified, r.error
    assert r.nodes["extract"].outputs == {"price": 17, "quantity": 23}
    assert r.answer == 391 and isinstance(r.answer, int | float)


async def test_full_run_terminates_with_a_complete_report(local_models, tmp_path):
    sandbox = process_sandbox()
    config = RunConfig(
        loop=Loop(max_retries=1, max_iterations=2),
        sampling=Sampling(temperature=0),
        budget=Budget(max_llm_calls=10, timeout_s=240),
        policies=[],  # the planner, not the small-model policy's one-node plan
    )
    coord = verimap.build(local_models, sandbox, config=config, trace_dir=tmp_path)
    r = await coord.run(
        "Tom has 3 boxes of 12 pencils and gives away 7 pencils. How many pencils are left?"
    )
    await sandbox.aclose()
    assert r.status in ("success", "failed", "partial", "budget_exhausted")
    assert r.usage.roles["planner"].calls >= 1 and r.usage.total.prompt_tokens > 0
    assert (tmp_path / f"{r.run_id}.jsonl").is_file()
    if r.plans:
        assert all(p.final_node() for p in r.plans)
    if r.status == "success":
        assert r.final_output is not None and r.nodes[r.final_node].status in ("verified", "reused")


async def test_the_independent_solution_is_a_program_the_sandbox_runs(local_model):
    """The mixed ballot's program path end to end (the default ballot draws no programs): the
    real model writes `solution()`, a real sandbox runs it, and the number it returns judges a
    wrong and a right total (a quorum of two: the attempt and one greedy program)."""
    from verimap.base.run_context import RunContext
    from verimap.base.verification import CheckTools, Submission
    from verimap.checks.answer_agreement import MIXED_BALLOT, AnswerAgreement
    from verimap.checks.programs import write_program

    task = "A shop sells pens at 17 dollars each. How much do 23 pens cost?"
    sandbox = process_sandbox()
    settings = EXECUTOR_SETTINGS.replace(temperature=0)
    tools = CheckTools(sandbox=sandbox, model=local_model, settings=settings)
    node = Node(
        id="solve", instruction="Solve.", inputs=["USER_TASK"], outputs={"answer": "number"}
    )
    check = AnswerAgreement(**{**MIXED_BALLOT, "quorum": 2, "max_programs": 1})
    try:
        run = await write_program(local_model, task, sandbox, settings)
        assert run.answer == 391, run.reply
        wrong = await check.check(Submission(task, node, {}, {"answer": 343}), tools, RunContext())
        right = await check.check(Submission(task, node, {}, {"answer": 391}), tools, RunContext())
    finally:
        await sandbox.aclose()
    assert wrong is not None and wrong.outcome == "FAIL"
    assert right is not None and right.outcome == "PASS" and right.strength == "strong"


async def test_the_default_local_path_answers_a_two_step_task_right_and_verified(
    local_models, tmp_path
):
    """`verimap.build` on the local model applies the small-model policy, as `verimap run` does:
    one node, greedy first attempt, and an answer verified only when replies sampled
    independently for the task agree with it (the default ballot: three of up to five, at most
    one against). The samples are drawn at temperature 0.7, so the sampler's seed is fixed, and
    the trace (kept under tmp_path) shows why when it fails."""
    sandbox = process_sandbox()
    config = RunConfig(sampling=Sampling(seed=7), budget=Budget(max_llm_calls=16, timeout_s=300))
    coord = verimap.build(local_models, sandbox, config=config, trace_dir=tmp_path)
    try:
        r = await coord.run(
            "A shop sells pens at 3 dollars each. Ana buys 4 pens and pays with a 20 dollar "
            "bill. How much change does she get?"
        )
    finally:
        await sandbox.aclose()
    checks = {v.name: v.outcome for v in r.nodes["solve"].verdicts}
    assert r.status == "success" and r.answer == 8, (r.status, r.answer, r.error, checks)
    assert r.verified, (r.unverified_reason, r.trace_path)
    assert checks["answer_agreement"] == "PASS"
    assert r.plan_rules == ["1: one-node plan (small-model policy)"] and not r.fallback_iterations
