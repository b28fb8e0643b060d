"""Per-VF latency of four ways to run a Python VF, measured side by side in one run.

1. a new container per VF (created, started, awaited and removed through the Docker SDK,
   with the pool's confinement),
2. `docker exec` of a fresh python3 in one warm container (same confinement),
3. the verimap pool (warm containers, a fresh forked process per VF),
4. in-process `exec` (the floor: no isolation at all).

Prints median and p90 latency for each, the ratios, and VFs/second (sequential,
and with concurrent asyncio tasks for the pool). Needs Docker and the image.

    python3 benchmarks/sandbox_latency.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import time

from verimap.sandbox import daemon
from verimap.sandbox.docker import DockerSandbox

VF = "assert outputs['y'] == inputs['x'] * 2, 'y must be twice x'"
INPUTS, OUTPUTS = {"x": 21}, {"y": 42}
STANDALONE = f"inputs = {INPUTS!r}\noutputs = {OUTPUTS!r}\n{VF}\n"


def stats(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s), s[min(len(s) - 1, int(0.9 * len(s)))]


def time_calls(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def container_config(sb: DockerSandbox, name: str) -> dict:
    """The pool's confinement for a container nobody attaches to (so: no stdin), which the
    benchmark removes itself once it has its exit status."""
    return {**sb.container_config(name), "stdin_open": False, "auto_remove": False}


def bench_docker_run(sb: DockerSandbox, n: int) -> list[float]:
    client = daemon.client()

    def once():
        name = f"verimap-bench-{os.getpid()}-{time.monotonic_ns()}"
        command = ["python3", "-I", "-c", STANDALONE]
        container = client.containers.create(sb.image, command, **container_config(sb, name))
        try:
            container.start()
            assert container.wait()["StatusCode"] == 0
        finally:
            container.remove(force=True)

    return time_calls(once, n)


def bench_docker_exec(sb: DockerSandbox, n: int) -> list[float]:
    docker = daemon.docker_cli()
    name = f"verimap-bench-exec-{os.getpid()}"
    config = container_config(sb, name)
    container = daemon.client().containers.create(sb.image, ["sleep", "infinity"], **config)
    container.start()
    try:
        return time_calls(
            lambda: subprocess.run(
                [docker, "exec", name, "python3", "-I", "-c", STANDALONE],
                check=True,
                capture_output=True,
            ),
            n,
        )
    finally:
        daemon.remove(container)


def bench_in_process(n: int) -> list[float]:
    def once():
        exec(compile(VF, "<vf>", "exec"), {"inputs": dict(INPUTS), "outputs": dict(OUTPUTS)})

    return time_calls(once, n)


async def bench_pool(sb: DockerSandbox, n: int, concurrent: int) -> tuple[list[float], float]:
    for _ in range(20):  # warm both containers
        await sb.run_vf(VF, INPUTS, OUTPUTS)
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        res = await sb.run_vf(VF, INPUTS, OUTPUTS)
        samples.append(time.perf_counter() - t)
        assert res.passed, res
    t = time.perf_counter()
    results = await asyncio.gather(*(sb.run_vf(VF, INPUTS, OUTPUTS) for _ in range(concurrent)))
    rate = concurrent / (time.perf_counter() - t)
    assert all(r.passed for r in results)
    return samples, rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples")
    args = ap.parse_args()
    n_run, n_exec, n_pool = (5, 10, 100) if args.quick else (15, 30, 400)

    sb = DockerSandbox(pool_size=2)
    load_before = os.getloadavg()[0]
    rows = {}
    rows["docker run (container per VF)"] = bench_docker_run(sb, n_run)
    rows["docker exec (warm container)"] = bench_docker_exec(sb, n_exec)
    pool_samples, pool_rate = asyncio.run(bench_pool(sb, n_pool, 4 * n_pool // 2))
    rows["verimap pool (fork per VF)"] = pool_samples
    rows["in-process exec (no isolation)"] = bench_in_process(2000)
    sb.pool.close()

    print(
        f"per-VF latency on {os.cpu_count()} cores (ms); transport {sb.transport}; "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(f"{'method':34s} {'median':>9s} {'p90':>9s} {'VFs/s':>9s}  n")
    for name, samples in rows.items():
        med, p90 = stats(samples)
        print(f"{name:34s} {med * 1e3:9.3f} {p90 * 1e3:9.3f} {1 / med:9.1f}  {len(samples)}")
    pool_med = stats(pool_samples)[0]
    run_med = stats(rows["docker run (container per VF)"])[0]
    exec_med = stats(rows["docker exec (warm container)"])[0]
    floor_med = stats(rows["in-process exec (no isolation)"])[0]
    print(f"pool vs container per VF: {run_med / pool_med:.0f}x faster")
    print(f"pool vs docker exec:      {exec_med / pool_med:.1f}x faster")
    print(f"pool vs in-process exec:  {pool_med / floor_med:.0f}x slower (the price of isolation)")
    print(f"pool throughput with {2 * n_pool} concurrent tasks: {pool_rate:.0f} VFs/s")


if __name__ == "__main__":
    main()
