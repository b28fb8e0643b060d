"""A run's lifetime (`RunScope`): events, trace, usage and how each way of ending early is told."""

import asyncio

import pytest

from verimap.base import events as ev
from verimap.base.accounting import Budget, BudgetExceeded
from verimap.base.events import EventBus, read_trace
from verimap.base.messages import ModelRequest, UserMessage
from verimap.base.model import ModelError
from verimap.base.sandbox import SandboxUnavailable
from verimap.base.usage import EXECUTOR
from verimap.config import RunConfig
from verimap.core.result import RunResult
from verimap.core.run_scope import RunScope
from verimap.testing import ScriptedModel


def ending(scope: RunScope):
    def end(status, *, error=None, error_kind=None):
        return RunResult(
            run_id=scope.run_id, task=scope.task, status=status, error=error, error_kind=error_kind
        )

    return end


def scope_for(tmp_path, config=None, bus=None, **kw) -> tuple[RunScope, list]:
    bus = bus or EventBus()
    seen: list = []
    bus.subscribe(seen.append)
    scope = RunScope("task", config or RunConfig(), bus, trace_path=tmp_path / "t.jsonl", **kw)
    return scope, seen


async def test_a_body_result_gets_usage_wall_time_and_a_trace_of_its_events(tmp_path):
    scope, seen = scope_for(tmp_path)
    model = ScriptedModel(["hello"])

    async def body():
        req = ModelRequest(messages=[UserMessage(content="hi")], role=EXECUTOR)
        await scope.ctx.model(model).request(req)
        return ending(scope)("success")

    r = await scope.run(body, ending(scope), start={"method": "m", "parameters": {"k": 2}})
    assert r.status == "success" and r.usage.roles[EXECUTOR].calls == 1 and r.wall_time_s > 0
    assert r.trace_path == str(tmp_path / "t.jsonl")
    trace = read_trace(r.trace_path)
    assert [e.type for e in trace] == [ev.RUN_START, ev.MODEL_CALL, ev.FINISH]
    assert trace[0].data["method"] == "m" and trace[0].data["parameters"] == {"k": 2}
    assert trace[0].data["task"] == "task" and "budget" in trace[0].data["config"]
    assert trace[-1].data["usage"]["roles"]["executor"]["calls"] == 1
    assert [e.type for e in seen] == [e.type for e in trace]


async def test_a_trace_keeps_only_its_own_run_of_a_shared_bus(tmp_path):
    bus = EventBus()
    scope, _ = scope_for(tmp_path, bus=bus, run_id="mine")

    async def body():
        scope.ctx.emit(ev.Event(type="step"))
        bus.emit(ev.Event(type="step", run_id="someone-else"))
        return ending(scope)("success")

    r = await scope.run(body, ending(scope))
    trace = read_trace(r.trace_path)
    assert {e.run_id for e in trace} == {"mine"}
    scope.ctx.emit(ev.Event(type="late"))  # after the run: the writer is gone
    assert len(read_trace(r.trace_path)) == len(trace)


def test_a_trace_dir_names_the_trace_after_the_run(tmp_path):
    scope = RunScope("t", RunConfig(), EventBus(), run_id="r1", trace_dir=tmp_path)
    assert scope.trace_path == tmp_path / "r1.jsonl"
    assert RunScope("t", RunConfig(), EventBus()).trace_path is None


@pytest.mark.parametrize(
    ("raised", "status", "kind", "message"),
    [
        (
            BudgetExceeded("max_llm_calls", "LLM call budget exhausted"),
            "budget_exhausted",
            None,
            "LLM call budget exhausted",
        ),
        (
            ModelError("server went away"),
            "failed",
            "infrastructure",
            "model error: server went away",
        ),
        (
            SandboxUnavailable("no daemon"),
            "failed",
            "infrastructure",
            "sandbox unavailable: no daemon",
        ),
        (KeyError("bug"), "failed", None, "internal error: KeyError: 'bug'"),
        (ValueError("bad plan"), "failed", None, "planning failed: bad plan"),
    ],
)
async def test_each_way_of_ending_early_has_its_status_and_kind(
    tmp_path, raised, status, kind, message
):
    scope, seen = scope_for(tmp_path)

    async def body():
        raise raised

    r = await scope.run(body, ending(scope), failures={ValueError: "planning failed"})
    assert (r.status, r.error_kind, r.error) == (status, kind, message)
    types = [e.type for e in seen]
    assert types[-1] == ev.FINISH and seen[-1].data["status"] == status
    assert (ev.BUDGET in types) == (status == "budget_exhausted")
    errors = [e for e in seen if e.type == ev.ERROR]
    assert bool(errors) == message.startswith("internal error")
    assert all("Traceback" in e.data["traceback"] for e in errors)


async def test_the_wall_clock_budget_ends_a_run_and_a_timeout_inside_it_is_a_bug(tmp_path):
    scope, _ = scope_for(tmp_path, RunConfig(budget=Budget(timeout_s=0.05)))

    async def slow():
        await asyncio.sleep(5)
        raise AssertionError("not reached")

    r = await scope.run(slow, ending(scope))
    assert r.status == "budget_exhausted" and "wall-clock budget of 0.05s" in (r.error or "")

    scope, _ = scope_for(tmp_path)

    async def times_out():
        raise TimeoutError("a tool's own timeout")

    r = await scope.run(times_out, ending(scope))
    assert r.status == "failed" and r.error == "internal error: TimeoutError: a tool's own timeout"


async def test_faults_and_failed_model_calls_blame_a_failed_run_on_infrastructure(tmp_path):
    scope, _ = scope_for(tmp_path)

    async def fails():
        return ending(scope)("failed", error="no answer")

    r = await scope.run(fails, ending(scope), faults=lambda: ["sandbox error in VF 'x'"])
    assert r.error_kind == "infrastructure" and r.error.startswith("sandbox error in VF 'x'")

    scope, _ = scope_for(tmp_path)

    async def succeeds():
        return ending(scope)("success")

    r = await scope.run(succeeds, ending(scope), faults=lambda: ["sandbox error"])
    assert r.error_kind is None  # a run that succeeded anyway keeps its answer


async def test_the_runs_own_events_are_tagged_where_the_method_says(tmp_path):
    scope, seen = scope_for(tmp_path)

    async def body():
        return ending(scope)("success")

    await scope.run(body, ending(scope), at=lambda: scope.ctx.for_iteration(3))
    assert {e.iteration for e in seen} == {3}
