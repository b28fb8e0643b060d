"""Property tests of the coordinator over random DAGs and random scripted pass/fail patterns."""

import asyncio
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

import verimap
from verimap.config import Loop, RunConfig
from verimap.testing import InProcessSandboxDouble, ScriptedWorld


@st.composite
def scenarios(draw):
    size = draw(st.integers(1, 7))
    nodes = []
    for i in range(size):
        parents = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        nodes.append(
            {
                "id": f"n{i}",
                "instruction": f"produce v for n{i}",
                "inputs": [f"n{p}.v" for p in sorted(parents)] or ["USER_TASK"],
                "outputs": ["v"],
                "verification": [
                    {
                        "name": "ok",
                        "type": "python",
                        "code": f"assert outputs['v'] == 'ok', 'node n{i} not ok'",
                    }
                ],
            }
        )
    with_children = {r.split(".")[0] for nd in nodes for r in nd["inputs"] if r != "USER_TASK"}
    sinks = [nd["id"] for nd in nodes if nd["id"] not in with_children]
    if len(sinks) > 1:
        nodes.append(
            {
                "id": "final",
                "instruction": "produce v for final",
                "inputs": [f"{s}.v" for s in sinks],
                "outputs": ["v"],
                "verification": [
                    {
                        "name": "ok",
                        "type": "python",
                        "code": "assert outputs['v'] == 'ok', 'node final not ok'",
                    }
                ],
            }
        )
    config = RunConfig(
        loop=Loop(
            max_retries=draw(st.integers(1, 3)),
            max_iterations=draw(st.integers(1, 3)),
            max_parallel=draw(st.integers(1, 4)),
            sequential=draw(st.booleans()),
            reuse_verified=draw(st.booleans()),
            max_plan_repeats=draw(st.sampled_from([None, 0, 1, 2])),
        )
    )
    budget = config.loop.max_retries * config.loop.max_iterations
    fails = {nd["id"]: draw(st.integers(0, budget + 1)) for nd in nodes}
    return {"nodes": nodes}, config, fails


def run_scenario(plan, config, fails):
    world = ScriptedWorld(
        [plan], lambda nid, k, inp, prompt: {"v": "ok" if k >= fails[nid] else "bad"}
    )
    events = []
    bus = verimap.EventBus()
    bus.subscribe(events.append)
    coord = verimap.build(world.models(), InProcessSandboxDouble(), config=config, events=bus)
    result = asyncio.run(asyncio.wait_for(coord.run("task"), timeout=30))  # every run terminates
    return world, events, result


@settings(max_examples=80, deadline=None)
@given(scenarios())
def test_coordinator_invariants(scenario):
    plan, config, fails = scenario
    world, events, r = run_scenario(plan, config, fails)
    parsed = verimap.parse_plan(plan)
    parents = {n.id: set(parsed.parents(n.id)) for n in parsed.nodes}

    # A node runs only after all its parents passed (in the same iteration).
    passed: dict[int, set[str]] = defaultdict(set)
    attempts: dict[tuple[int, str], int] = defaultdict(int)
    verified_before: dict[str, int] = {}
    for e in events:
        if e.type == "node_start":
            assert parents[e.node_id] <= passed[e.iteration], (
                f"{e.node_id} started before its parents passed"
            )
            # With reuse on, no verified unchanged node is re-run after a replan.
            if config.loop.reuse_verified:
                assert e.node_id not in verified_before, (
                    f"{e.node_id} re-run although verified and unchanged"
                )
        if e.type == "attempt":
            attempts[(e.iteration, e.node_id)] += 1
        if e.type == "node_reused":
            assert parents[e.node_id] <= passed[e.iteration]
            passed[e.iteration].add(e.node_id)
        if e.type == "node_finish" and e.data["status"] == "verified":
            passed[e.iteration].add(e.node_id)
            verified_before.setdefault(e.node_id, e.iteration)

    # Attempts <= max_retries per node per iteration; iterations <= max_iterations.
    assert all(a <= config.loop.max_retries for a in attempts.values())
    assert 1 <= r.iterations <= config.loop.max_iterations

    # The result is the final node's verified output.
    final = parsed.final_node().id
    assert r.status in ("success", "failed")
    if r.status == "success":
        assert r.final_output == {"v": "ok"}
        assert (
            r.nodes[final].status in ("verified", "reused")
            and r.final_output == r.nodes[final].outputs
        )
    else:
        # A failed run keeps its best answer, unverified: here every attempt of the final node
        # answered "bad", so it is both the most frequent and the last.
        assert not r.verified
        # The scripted planner always returns the same plan: the run ends at the iteration cap,
        # or as soon as the failed node's unchanged work would run more than `max_plan_repeats`
        # times again.
        limit = config.loop.max_plan_repeats
        if "max_plan_repeats" in r.error:
            assert limit is not None and limit + 1 <= r.iterations < config.loop.max_iterations
        else:
            assert r.iterations == config.loop.max_iterations
        rep = r.nodes.get(final)
        ran = rep is not None and rep.iteration == r.iterations and rep.outputs
        assert r.final_output == (rep.outputs if ran else r.final_output)
        if ran:
            assert r.final_output == {"v": "bad"}

    # Every retry prompt holds the failing VF's traceback.
    retries = [e for e in events if e.type == "retry"]
    assert len(retries) == r.retries
    for nid, prompts in world.executor_prompts.items():
        for p in prompts:
            if "This is a retry" in p:
                assert f"AssertionError: node {nid} not ok" in p and '{"v": "bad"}' in p
    assert (
        sum("This is a retry" in p for ps in world.executor_prompts.values() for p in ps)
        == r.retries
    )

    # Reported usage equals the sum over calls.
    total, summed = r.usage.total, world.model.total_usage()
    assert (total.calls, total.prompt_tokens, total.completion_tokens) == (
        summed.calls,
        summed.prompt_tokens,
        summed.completion_tokens,
    )
    assert total.calls == world.model.calls
