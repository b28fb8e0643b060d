"""Coordinator benchmarks, measured side by side in one run on model doubles.

1. Parallel vs sequential wall time on a width-4 DAG with a fixed model latency,
   against the critical path (goal: parallel <= 1.15x the critical path).
2. Tokens spent by a one-node replan with reuse of verified nodes vs a restart
   from the top (goal: reuse <= 50% of restart).
3. Coordinator overhead per node on a 1,000-node DAG with zero latency and
   instant executor/verifier doubles (goal: <= 1 ms per node); the same DAG through
   the full engine stack (executor prompts, scripted model, Python VFs in-process)
   is printed for context.

Run: python benchmarks/coordinator.py
"""

from __future__ import annotations

import asyncio
import random
import time

import verimap
from verimap.base.execution import ExecutorOutput
from verimap.config import Loop, RunConfig
from verimap.core.coordinator import Coordinator
from verimap.core.verifier import Verifier
from verimap.planning.fixed_planners import TemplatePlanner
from verimap.testing import InProcessSandboxDouble, ScriptedWorld

LATENCY = 0.2


def node(id, inputs, vf=True):
    return {
        "id": id,
        "instruction": f"produce v for {id}",
        "inputs": inputs or ["USER_TASK"],
        "outputs": ["v"],
        "verification": [{"name": "ok", "type": "python", "code": "assert outputs['v'] == 'ok'"}]
        if vf
        else [],
    }


def ok(nid, k, inp, prompt):
    return {"v": "ok"}


async def parallel_vs_sequential() -> None:
    nodes = [node(f"a{i}", []) for i in range(4)]
    nodes += [node(f"b{i}", [f"a{i}.v"]) for i in range(4)]
    nodes.append(node("final", [f"b{i}.v" for i in range(4)]))
    plan = {"nodes": nodes}
    critical = 3 * LATENCY  # three layers, one model call per node
    times = {}
    for label, cfg in (
        ("parallel", RunConfig()),
        ("sequential", RunConfig(loop=Loop(sequential=True))),
    ):
        world = ScriptedWorld([plan], ok, latency_s=LATENCY)
        c = verimap.build(
            world.models(), InProcessSandboxDouble(), config=cfg, planner=TemplatePlanner(plan)
        )
        t = time.perf_counter()
        r = await c.run("bench")
        times[label] = time.perf_counter() - t
        assert r.status == "success"
    print("1. width-4 DAG (9 nodes, 3 layers), model latency %.0f ms per call" % (LATENCY * 1000))
    print(f"   critical path          {critical:6.3f} s")
    print(
        f"   parallel (max 4)       {times['parallel']:6.3f} s  = {times['parallel'] / critical:.3f}x critical path (goal <= 1.15x)"
    )
    print(
        f"   sequential             {times['sequential']:6.3f} s  = {times['sequential'] / critical:.3f}x critical path"
    )
    print(f"   sequential / parallel  {times['sequential'] / times['parallel']:.2f}x")


async def reuse_vs_restart() -> None:
    chain = [node("n0", [])] + [node(f"n{i}", [f"n{i - 1}.v"]) for i in range(1, 6)]
    first = {"nodes": chain}
    fixed_last = dict(chain[-1], instruction="produce v for n5 (fixed)")
    second = {"nodes": [*chain[:-1], fixed_last]}

    def outputs(nid, k, inp, prompt):
        return {"v": "bad" if nid == "n5" and "(fixed)" not in prompt else "ok"}

    tokens = {}
    for label, reuse in (("reuse", True), ("restart", False)):
        world = ScriptedWorld([first, second], outputs)
        cfg = RunConfig(loop=Loop(max_retries=1, reuse_verified=reuse))
        r = await verimap.build(world.models(), InProcessSandboxDouble(), config=cfg).run("bench")
        assert r.status == "success" and r.iterations == 2
        reqs = world.model.requests
        replan_at = [i for i, q in enumerate(reqs) if q.role == "planner"][1]
        after = world.model.responses[replan_at:]
        tokens[label] = sum(x.usage.total_tokens for x in after)
        tokens[label + "_exec"] = sum(x.usage.total_tokens for x in after[1:])
    print(
        "2. one-node replan on a 6-node chain (tokens from the replan on: planner + re-execution)"
    )
    print(
        f"   reuse verified nodes   {tokens['reuse']:6d} tokens ({tokens['reuse_exec']} in execution)"
    )
    print(
        f"   restart from the top   {tokens['restart']:6d} tokens ({tokens['restart_exec']} in execution)"
    )
    print(
        f"   reuse / restart        re-execution {tokens['reuse_exec'] / tokens['restart_exec']:.1%} "
        f"(goal <= 50%); with the replan's planner call {tokens['reuse'] / tokens['restart']:.1%}"
    )


class InstantExecutorDouble:
    """Answers every node at once, so only the coordinator's own work is timed."""

    async def execute(self, node, inputs, feedback=None, context=None, input_types=None, **_):
        return ExecutorOutput(outputs=dict.fromkeys(node.outputs, "ok"), steps=1)


def big_dag(n: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    nodes = []
    for i in range(n - 1):
        parents = (
            sorted(rng.sample(range(max(0, i - 20), i), k=min(i, rng.randint(0, 3)))) if i else []
        )
        nodes.append(node(f"n{i}", [f"n{p}.v" for p in parents]))
    with_children = {r.split(".")[0] for nd in nodes for r in nd["inputs"] if r != "USER_TASK"}
    nodes.append(node("final", [f"{nd['id']}.v" for nd in nodes if nd["id"] not in with_children]))
    return {"nodes": nodes}


async def overhead() -> None:
    n = 1000
    plan = verimap.parse_plan(big_dag(n))
    planner = TemplatePlanner(plan)
    c = Coordinator(
        planner,
        InstantExecutorDouble(),  # type: ignore[arg-type]
        Verifier(None, None, mode="none"),
        RunConfig(loop=Loop(max_parallel=8)),
    )
    t = time.perf_counter()
    r = await c.run("bench")
    bare = time.perf_counter() - t
    assert r.status == "success" and len(r.nodes) == n
    world = ScriptedWorld([plan], ok)
    full_c = verimap.build(
        world.models(),
        InProcessSandboxDouble(),
        config=RunConfig(loop=Loop(max_parallel=8)),
        planner=planner,
    )
    t = time.perf_counter()
    r = await full_c.run("bench")
    full = time.perf_counter() - t
    assert r.status == "success"
    print(f"3. {n}-node DAG, zero latency")
    print(f"   coordinator overhead   {bare / n * 1000:.3f} ms per node (goal <= 1 ms)")
    print(
        f"   full engine stack      {full / n * 1000:.3f} ms per node (executor prompts, scripted model, VFs in-process)"
    )


async def main() -> None:
    await parallel_vs_sequential()
    await reuse_vs_restart()
    await overhead()


if __name__ == "__main__":
    asyncio.run(main())
