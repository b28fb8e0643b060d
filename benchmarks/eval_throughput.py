"""Eval runner throughput on a fixed-latency model double: concurrency, and Ray.

Every run goes through the real runner and coordinator (planning, execution, tool calls,
Python VFs in the sandbox, judge calls, scoring, fsynced result lines); only the model
is a double that sleeps a fixed latency per call, as a remote endpoint would.

Default: 50 task executions, 16-way concurrent vs. sequential.

--ray: 200 task executions (the 20 GSM8K sample problems x 10 runs), twice:
  1. one machine: the asyncio runner vs. `--ray` on a private single-node Ray instance, at
     the same concurrency (what Ray's dispatch costs);
  2. simulated nodes: a local cluster (a head that runs no worker, plus 1, 2, ... worker
     nodes on 127.0.0.1), each node's endpoint serving `--node-limit` calls at once, as one
     model server per node would (how the run scales with the nodes).
Throughput is counted over the span of the tasks (first start to last finish, from the
result lines), so the one-off start of the workers is reported apart.

    python benchmarks/eval_throughput.py [--latency 0.2] [--method verimap] [--sandbox process]
    python benchmarks/eval_throughput.py --ray [--nodes 1,2,4] [--node-limit 4]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from verimap.evals.data import samples_dir
from verimap.evals.runner import run_eval
from verimap.evals.tasksets import get_benchmark
from verimap.sandbox import get_sandbox
from verimap.testing import oracle_factory, oracle_models


def _sandbox(kind: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return get_sandbox(kind, shared=False)


async def timed(
    method: str, concurrency: int, latency: float, sandbox_kind: str
) -> tuple[float, int, int]:
    bench = get_benchmark("gsm8k", samples_dir())
    models = oracle_models(bench.tasks(), latency_s=latency)
    sandbox = _sandbox(sandbox_kind)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        # 10 tasks x 5 runs = 50 task executions
        res = await run_eval(
            bench,
            method,
            models,
            sandbox,
            out,
            limit=10,
            runs=5,
            max_concurrency=concurrency,
            progress=False,
        )
        elapsed = time.perf_counter() - start
    await sandbox.aclose()
    calls = sum(m.calls for m in models.values())
    return elapsed, res.tally.done, calls


def concurrency_main(a: argparse.Namespace) -> None:
    seq, n1, calls = asyncio.run(timed(a.method, 1, a.latency, a.sandbox))
    par, n2, _ = asyncio.run(timed(a.method, a.concurrency, a.latency, a.sandbox))
    assert n1 == n2 == 50, (n1, n2)
    print(
        f"method={a.method} tasks=50 model_calls={calls} latency={a.latency}s/call sandbox={a.sandbox}"
    )
    print(f"sequential (1-way):   {seq:7.2f} s  ({50 / seq:6.2f} tasks/s)")
    print(f"concurrent ({a.concurrency}-way): {par:7.2f} s  ({50 / par:6.2f} tasks/s)")
    print(f"speed-up: {seq / par:.1f}x (goal >= 10x)")


def _span(out: Path) -> tuple[int, float]:
    """Tasks finished and the seconds from the first task's start to the last one's end."""
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    first = min(r["finished_at"] - r["wall_time_s"] for r in recs)
    return len(recs), max(r["finished_at"] for r in recs) - first


async def _run(a: argparse.Namespace, out: Path, *, ray: bool, per_node: int, limit: Any = None):
    """One 200-task run, locally or through `eval_on_ray`: (tasks, span s, wall s)."""
    from verimap.evals.cluster import eval_on_ray

    bench = get_benchmark("gsm8k", samples_dir())
    kw: dict[str, Any] = dict(runs=a.runs, progress=False)
    start = time.perf_counter()
    if ray:
        models = functools.partial(oracle_factory, latency_s=a.latency, max_in_flight=limit)
        await eval_on_ray(
            bench,
            a.method,
            out,
            models_factory=models,
            data_dir=str(samples_dir()),
            sandbox_kind=a.sandbox,
            max_concurrency=per_node,
            **kw,
        )
    else:
        sandbox = _sandbox(a.sandbox)
        models_ = oracle_factory(
            "gsm8k", str(samples_dir()), latency_s=a.latency, max_in_flight=limit
        )
        async with sandbox:
            await run_eval(bench, a.method, models_, sandbox, out, max_concurrency=per_node, **kw)
    wall = time.perf_counter() - start
    done, span = _span(out)
    assert done == 20 * a.runs, done
    return done, span, wall


def _row(label: str, done: int, span: float, wall: float) -> str:
    return f"| {label} | {span:6.2f} | {done / span:6.2f} | {wall:6.2f} |"


def ray_main(a: argparse.Namespace) -> None:
    # Every node and client on 127.0.0.1 (Ray's single-machine mode), never the network address.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray
    from ray.cluster_utils import Cluster

    tasks = 20 * a.runs
    print(f"method={a.method} tasks={tasks} latency={a.latency}s/call sandbox={a.sandbox}")
    print("\n| run | task span s | tasks/s | wall s (with start) |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        local = asyncio.run(_run(a, Path(tmp) / "local", ray=False, per_node=a.concurrency))
        print(_row(f"asyncio runner, {a.concurrency}-way", *local), flush=True)
        ray.init(
            num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 * 2**20
        )
        try:
            one = asyncio.run(_run(a, Path(tmp) / "ray1", ray=True, per_node=a.concurrency))
        finally:
            ray.shutdown()
        print(_row(f"Ray, one machine, {a.concurrency}-way", *one), flush=True)
        ratio = (one[0] / one[1]) / (local[0] / local[1])
        print(f"\nRay on one machine: {ratio:.0%} of the asyncio runner's throughput (goal >= 80%)")

        counts = [int(n) for n in a.nodes.split(",")]
        node: dict[str, Any] = {
            "num_cpus": 1,
            "object_store_memory": 80 * 2**20,
            "node_ip_address": "127.0.0.1",
        }
        cluster = Cluster(
            initialize_head=True, head_node_args={**node, "num_cpus": 0, "include_dashboard": False}
        )
        rates: dict[int, float] = {}
        print(
            f"\nsimulated nodes, each {a.per_node}-way with an endpoint of {a.node_limit} "
            "calls at once\n\n| nodes | task span s | tasks/s | wall s (with start) |\n|---|---|---|---|"
        )
        try:
            ray.init(address=cluster.address, log_to_driver=False)
            added = 0
            for k in counts:
                while added < k:
                    cluster.add_node(**node)
                    added += 1
                cluster.wait_for_nodes()
                run = asyncio.run(
                    _run(
                        a,
                        Path(tmp) / f"nodes{k}",
                        ray=True,
                        per_node=a.per_node,
                        limit=a.node_limit,
                    )
                )
                rates[k] = run[0] / run[1]
                print(_row(str(k), *run), flush=True)
        finally:
            ray.shutdown()
            cluster.shutdown()
        base = counts[0]
        for k in counts[1:]:
            eff = rates[k] / (rates[base] * k / base)
            print(
                f"{k} nodes: {rates[k] / rates[base]:.2f}x the throughput of {base}, "
                f"{eff:.0%} of linear (goal >= 80%)"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    ap.add_argument("--method", default="verimap")
    ap.add_argument(
        "--max-tasks",
        "--concurrency",
        dest="concurrency",
        type=int,
        default=16,
        help="tasks in flight (--concurrency: the old name)",
    )
    ap.add_argument("--sandbox", default="process")
    ap.add_argument("--ray", action="store_true", help="the Ray runs (see above)")
    ap.add_argument(
        "--epochs",
        "--runs",
        dest="runs",
        type=int,
        default=10,
        help="--ray: epochs of the 20 sample problems (--runs: the old name)",
    )
    ap.add_argument("--nodes", default="1,2,4", help="--ray: worker node counts to run")
    ap.add_argument("--node-limit", type=int, default=4, help="--ray: calls at once per node")
    ap.add_argument("--per-node", type=int, default=8, help="--ray: tasks in flight per node")
    a = ap.parse_args()
    ray_main(a) if a.ray else concurrency_main(a)


if __name__ == "__main__":
    main()
