"""Eval runner throughput: 50 tasks on a fixed-latency model double, 16-way concurrent vs. sequential.

Both runs go through the real runner and coordinator (planning, execution, tool calls,
Python VFs in the sandbox, judge calls, scoring, fsynced result lines); only the model
is a double that sleeps a fixed latency per call, as a remote endpoint would.

    python benchmarks/eval_throughput.py [--latency 0.2] [--method verimap] [--sandbox process]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import warnings

from verimap.evals.benchmarks import get_benchmark
from verimap.evals.data import samples_dir
from verimap.evals.doubles import oracle_models
from verimap.evals.runner import run_eval
from verimap.sandbox import get_sandbox


async def timed(
    method: str, concurrency: int, latency: float, sandbox_kind: str
) -> tuple[float, int, int]:
    bench = get_benchmark("gsm8k", samples_dir())
    models = oracle_models(bench.tasks(), latency_s=latency)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sandbox = get_sandbox(sandbox_kind, shared=False)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        # 10 tasks x 5 runs = 50 task executions
        res = await run_eval(bench, method, models, sandbox, out, limit=10, runs=5,
                             max_concurrency=concurrency, progress=False)  # fmt: skip
        elapsed = time.perf_counter() - start
    await sandbox.aclose()
    calls = sum(m.calls for m in models.values())
    return elapsed, res.tally.done, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    ap.add_argument("--method", default="verimap")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--sandbox", default="process")
    a = ap.parse_args()
    seq, n1, calls = asyncio.run(timed(a.method, 1, a.latency, a.sandbox))
    par, n2, _ = asyncio.run(timed(a.method, a.concurrency, a.latency, a.sandbox))
    assert n1 == n2 == 50, (n1, n2)
    print(
        f"method={a.method} tasks=50 model_calls={calls} latency={a.latency}s/call sandbox={a.sandbox}"
    )
    print(f"sequential (1-way):   {seq:7.2f} s  ({50 / seq:6.2f} tasks/s)")
    print(f"concurrent ({a.concurrency}-way): {par:7.2f} s  ({50 / par:6.2f} tasks/s)")
    print(f"speed-up: {seq / par:.1f}x (goal >= 10x)")


if __name__ == "__main__":
    main()
