"""The run context: what keeps concurrent runs apart, and what carries rejected plans and
model calls to the trace."""

import asyncio
import dataclasses

import pytest

import verimap
from verimap.base.accounting import Budget, BudgetExceeded, MeteredModel
from verimap.base.events import MODEL_CALL, PLAN_INVALID, Event, EventBus, PlanInvalid, read_trace
from verimap.base.messages import ModelRequest
from verimap.base.model import ModelError
from verimap.base.run_context import MissingContext, RunContext, require_ctx
from verimap.config import Loop, RunConfig
from verimap.core.executor import Executor
from verimap.core.verifier import Verifier
from verimap.planning.plan import parse_plan
from verimap.testing import InProcessSandboxDouble, ScriptedModel, ScriptedWorld

PRESENT = {"name": "present", "type": "python", "code": "assert outputs"}
JUDGED = {"name": "judged", "type": "llm", "content": "y is the sum"}


def n(id, inputs=("USER_TASK",), outputs=("x",), vfs=(PRESENT,)):
    return {
        "id": id,
        "instruction": f"do {id}",
        "inputs": list(inputs),
        "outputs": list(outputs),
        "verification": list(vfs),
    }


def pos(var):
    return {"name": f"{var}_pos", "type": "python", "code": f"assert outputs['{var}'] > 0"}


# a and c run side by side; b needs both and is also judged.
PARALLEL = {
    "nodes": [
        n("a", vfs=[pos("x")]),
        n("c", outputs=["z"], vfs=[pos("z")]),
        n("b", inputs=["a.x", "c.z"], outputs=["y"], vfs=[pos("y"), JUDGED]),
    ]
}


def failing_first(node):
    """Outputs where `node`'s first attempt fails its VF and everything else passes."""

    def outputs(nid, k, inp, prompt):
        sign = -1 if nid == node and k == 0 else 1
        return {"a": {"x": sign * 2}, "c": {"z": sign * 3}, "b": {"y": 5}}[nid]

    return outputs


def build(world, bus, tmp_path, config=None):
    return verimap.build(
        world.models(),
        InProcessSandboxDouble(),
        config=config or RunConfig(),
        events=bus,
        trace_dir=tmp_path,
    )


async def test_concurrent_runs_keep_their_own_ledgers_and_attribution(tmp_path):
    bus = EventBus()  # one sink for both runs: attribution must come from each run's context
    worlds = {
        "a": ScriptedWorld([PARALLEL], failing_first("a"), latency_s=0.002),
        "c": ScriptedWorld([PARALLEL], failing_first("c"), latency_s=0.002),
    }
    ra, rc = await asyncio.gather(
        build(worlds["a"], bus, tmp_path).run("t", run_id="run-a"),
        build(worlds["c"], bus, tmp_path).run("t", run_id="run-c"),
    )
    for r, failed, world in ((ra, "a", worlds["a"]), (rc, "c", worlds["c"])):
        assert r.status == "success" and r.answer == 5
        trace = read_trace(r.trace_path)
        assert {e.run_id for e in trace} == {r.run_id}
        calls = [e for e in trace if e.type == MODEL_CALL]
        assert len(calls) == world.model.calls == r.usage.total.calls
        assert sum(e.data["prompt_tokens"] for e in calls) == r.usage.total.prompt_tokens
        executor = sorted((e.node_id, e.attempt) for e in calls if e.data["role"] == "executor")
        other = "c" if failed == "a" else "a"
        assert executor == sorted([(failed, 1), (failed, 2), (other, 1), ("b", 1)])
        judged = {(e.node_id, e.attempt) for e in calls if e.data["role"] == "judge"}
        assert judged == {("b", 1)}
        planner = [e for e in calls if e.data["role"] == "planner"]
        assert planner and all(e.node_id is None and e.iteration == 1 for e in planner)
        assert r.usage.roles["executor"].calls == 4


async def test_one_runs_budget_does_not_stop_another_run(tmp_path):
    bus = EventBus()
    # Sequential, so that no two of its calls pass the budget check at once.
    tight = RunConfig(loop=Loop(sequential=True), budget=Budget(max_llm_calls=2))
    poor = ScriptedWorld([PARALLEL], failing_first("a"), latency_s=0.002)
    rich = ScriptedWorld([PARALLEL], failing_first("c"), latency_s=0.002)
    r_poor, r_rich = await asyncio.gather(
        build(poor, bus, tmp_path, tight).run("t"), build(rich, bus, tmp_path).run("t")
    )
    assert r_poor.status == "budget_exhausted" and r_poor.usage.total.calls == 2
    assert r_rich.status == "success" and r_rich.usage.total.calls == rich.model.calls > 2


async def test_a_rejected_plan_reaches_the_trace_through_the_context(tmp_path):
    no_vfs = {"nodes": [n("a", vfs=[])]}
    chain = {"nodes": [n("a", vfs=[pos("x")])]}
    world = ScriptedWorld([no_vfs, chain], lambda nid, k, inp, p: {"x": 1})
    r = await build(world, EventBus(), tmp_path).run("t", run_id="rejected")
    assert r.status == "success"
    invalid = [e for e in read_trace(r.trace_path) if e.type == PLAN_INVALID]
    assert len(invalid) == 1
    assert (invalid[0].run_id, invalid[0].iteration, invalid[0].node_id) == ("rejected", 1, None)
    assert "no verification functions" in invalid[0].data["problems"][0]
    assert parse_plan(invalid[0].data["reply"]).nodes[0].id == "a"


async def test_a_custom_planner_with_a_context_reports_and_meters_through_it(tmp_path):
    model = ScriptedModel(lambda req: "thinking")
    plan = parse_plan({"nodes": [n("a", vfs=[pos("x")])]})

    class ContextPlanner:
        async def plan(self, task, *, ctx):
            await ctx.model(model).request(ModelRequest(messages=[], role="planner"))
            ctx.emit(PlanInvalid(problems=["my own check"], reply=""))
            return plan

        async def replan(self, task, previous, failure, *, ctx):
            return plan

    class OldPlanner:  # the protocol as it was: no ctx
        async def plan(self, task):
            return plan

        async def replan(self, task, previous, failure):
            return plan

    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"x": 1})
    executor, sandbox = {"executor": world.model}, InProcessSandboxDouble()
    r = await verimap.build(executor, sandbox, planner=ContextPlanner(), trace_dir=tmp_path).run(
        "t"
    )
    trace = read_trace(r.trace_path)
    assert [e.data["problems"] for e in trace if e.type == PLAN_INVALID] == [["my own check"]]
    assert r.usage.roles["planner"].calls == 1 and r.status == "success"
    with pytest.raises(MissingContext, match=r"planner OldPlanner\.plan takes no `ctx` keyword"):
        verimap.build(executor, sandbox, planner=OldPlanner())


async def test_the_context_charges_failed_calls_and_enforces_the_budget():
    events: list[Event] = []
    ctx = RunContext(run_id="r", sink=events.append).for_iteration(1)
    ctx = dataclasses.replace(ctx, ledger=type(ctx.ledger)(Budget(max_llm_calls=2)))
    model = ctx.for_attempt("a", 3).model(ScriptedModel([RuntimeError("down"), "ok", "never"]))
    assert isinstance(model, MeteredModel)
    with pytest.raises(ModelError):
        await model.request(ModelRequest(messages=[], role="executor"))
    await model.request(ModelRequest(messages=[], role="executor"))
    with pytest.raises(BudgetExceeded):
        await model.request(ModelRequest(messages=[], role="executor"))
    usage = ctx.ledger.usage.roles["executor"]
    assert (usage.calls, usage.failed_calls) == (2, 1)
    heard = [(e.type, e.run_id, e.iteration, e.node_id, e.attempt) for e in events]
    assert heard == [(MODEL_CALL, "r", 1, "a", 3)] * 2
    assert events[0].data["error_type"] == "ModelError" and events[1].data["error"] is None


def test_child_contexts_leave_their_parent_alone():
    run = RunContext(run_id="r")
    attempt = run.for_iteration(2).for_attempt("a", 1)
    assert (run.iteration, run.node_id, run.attempt) == (None, None, None)
    assert (attempt.iteration, attempt.node_id, attempt.attempt) == (2, "a", 1)
    assert attempt.ledger is run.ledger and attempt.memo is run.memo
    assert attempt.for_iteration(3).node_id is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        attempt.node_id = "b"  # type: ignore[misc]


def test_a_component_without_ctx_is_refused_when_the_coordinator_is_built():
    """Every method the coordinator calls takes `ctx`: one that does not is named with the fix,
    not left to fail mid-run with "unexpected keyword argument"."""
    model = ScriptedModel(["{}"])

    class Keywords:  # **kwargs takes ctx too
        async def execute(self, node, inputs, **kw):
            return kw["ctx"]

    class NoCtx:
        async def execute(self, node, inputs):
            return None

        async def plan(self, task):
            return None

    require_ctx("executor", Keywords())
    require_ctx("executor", Executor(model))
    require_ctx("verifier", Verifier(InProcessSandboxDouble(), model))
    require_ctx("planner", verimap.TemplatePlanner.single_node())
    with pytest.raises(MissingContext, match=r"executor NoCtx\.execute takes no `ctx` keyword"):
        require_ctx("executor", NoCtx())
    with pytest.raises(MissingContext, match=r"add `\*, ctx` to its signature"):
        verimap.Coordinator(NoCtx(), Executor(model), Verifier(InProcessSandboxDouble(), model))
    with pytest.raises(TypeError):  # MissingContext is a TypeError, as the call would have been
        require_ctx("planner", NoCtx())
