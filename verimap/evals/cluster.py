"""`verimap eval --ray`: the same eval, its tasks solved on the nodes of a Ray cluster.

The driver (this process) does what a local run does: reads the data, takes the run
directory's lock, skips finished tasks, shows the progress and writes every line of
`results.jsonl` and `errors.jsonl` (`run_eval`). Only the solving moves: one worker per
node (`EvalWorker`, a Ray actor with the node's own sandbox pool and models) takes up to
`max_concurrency` tasks at once and returns each task's attempt and trace. Since nothing
but the driver writes, the local runner's guarantees hold unchanged: a task's line is
written once, when its attempt comes back; a killed driver loses only the tasks in flight
(its workers die with it, Ray ends a dead driver's actors) and `--resume` runs them again.

A worker that dies mid-task (its process or its node) costs that task nothing but time:
the task goes to another worker. Ray restarts a worker whose process died, and it rejoins
once it answers again; one whose node is gone is dropped. A task that loses `MAX_TRIES`
workers is an infrastructure error, logged and retried by `--resume` like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verimap.base.errors import VerimapError
from verimap.evals.attempt import Attempt, error_line, task_key, trace_rel
from verimap.evals.cluster_worker import EvalWorker, WorkerSpec, check_per_node, forwarded_env
from verimap.evals.runner import EvalOutcome, preflight, run_eval
from verimap.evals.tasksets import Benchmark, EvalTask
from verimap.wiring import resolve

log = logging.getLogger(__name__)

MAX_TRIES = 3  # workers a task may lose before it is an error (that --resume retries)
START_TIMEOUT_S = 300.0  # a worker's first start may launch a local model server
RESTARTS = 3  # Ray restarts of a worker whose process died
PROBE_EVERY_S = 1.0


class ClusterError(VerimapError, RuntimeError):
    """The cluster cannot run the eval: Ray missing, no cluster at the address, no node
    whose worker could start."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ClusterError(
            "--ray needs Ray on every node: pip install 'verimap[cluster]'"
        ) from None
    return ray


def ray_address(value: Any) -> str | None:
    """`--ray` as given (True means auto): the address of a cluster this process joins, and
    which can then run code in it (Ray unpickles what workers return), so only ever the
    command line's."""
    if value is None or value is False or str(value).strip().lower() in ("", "false", "no", "off"):
        return None
    if value is True or str(value).strip().lower() in ("true", "yes", "on"):
        return "auto"
    return str(value).strip()


def _connect(ray: Any, address: str) -> bool:
    """Connect this process to the cluster; False when it already was (the caller's)."""
    if ray.is_initialized():
        return False
    try:
        # Workers' output stays in the nodes' Ray logs: the driver shows one progress display.
        ray.init(address=address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ClusterError(f"cannot join the Ray cluster at {address!r}: {e}") from None
    return True


def worker_nodes(ray: Any) -> list[dict[str, Any]]:
    """The live nodes that offer CPUs: a head started with `--num-cpus 0` runs no worker."""
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
    if not nodes:
        raise ClusterError("the Ray cluster has no live node with CPUs to run workers on")
    return sorted(nodes, key=lambda n: n["NodeID"])


@dataclass
class _Worker:
    index: int
    handle: Any
    state: str = "ok"  # ok | probing (lost a task; waiting for it to answer again) | dead
    busy: int = 0
    info: dict[str, Any] | None = None


class WorkerPool:
    """The dispatch of a cluster run: each task to the least busy live worker, and a task
    whose worker died to another one."""

    def __init__(self, ray: Any, spec: WorkerSpec, nodes: list[dict[str, Any]], per_node: int):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.ray = ray
        self.per_node = per_node
        actor = ray.remote(EvalWorker)
        # Held for the pool's life: a worker that Ray restarts is started from it again.
        self._spec = ray.put(spec)
        # Pinned to its node: Ray's soft affinity may put two on one node; a worker whose
        # node is gone cannot restart and is dropped, and the others go on.
        self.workers = [
            _Worker(
                i,
                actor.options(
                    num_cpus=0,
                    max_concurrency=per_node + 2,
                    max_restarts=RESTARTS,
                    max_task_retries=0,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
                ).remote(),
            )
            for i, n in enumerate(nodes)
        ]
        self._changed = asyncio.Condition()
        self._probes: set[asyncio.Task[None]] = set()

    async def start(self, timeout: float = START_TIMEOUT_S) -> list[dict[str, Any]]:
        """Start every worker; those that cannot start (no Docker on the node, no model) are
        dropped with a warning, and none starting is an error naming why."""

        async def one(w: _Worker) -> None:
            try:
                w.info = await asyncio.wait_for(
                    _awaitable(w.handle.start.remote(self._spec)), timeout
                )
            except Exception as e:
                w.state = "dead"
                failed.append(_reason(e))
                log.warning("a cluster worker did not start, running without it: %s", failed[-1])

        failed: list[str] = []
        await asyncio.gather(*(one(w) for w in self.workers))
        live = [w.info for w in self.workers if w.state == "ok" and w.info]
        if not live:
            raise ClusterError(f"no cluster worker started: {failed[0] if failed else '?'}")
        return live

    async def __call__(self, task: EvalTask, run: int) -> Attempt:
        key = task_key(run, task.id)
        tried: set[int] = set()
        lost = "no live worker"
        for n in range(1, MAX_TRIES + 1):
            w = await self._acquire(tried)
            if w is None:
                break
            ref = w.handle.attempt.remote(task, run)
            try:
                att: Attempt = await ref
                return att
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref)
                raise
            except self.ray.exceptions.RayError as e:
                lost = _reason(e)
                tried.add(w.index)
                then = "it goes to another worker" if n < MAX_TRIES else "no more tries"
                log.warning("worker %s lost task %s (%s); %s", _name(w), key, lost, then)
                self._suspect(w)
            finally:
                async with self._changed:
                    w.busy -= 1
                    self._changed.notify_all()
        error = f"the task's cluster worker was lost {len(tried)} time(s): {lost}"
        rel = trace_rel(run, task.id)
        return Attempt(key, error=error_line(key, task.id, run, "infrastructure", error, rel))

    async def _acquire(self, tried: set[int]) -> _Worker | None:
        async with self._changed:
            while True:
                live = [w for w in self.workers if w.state != "dead"]
                if not live:
                    return None
                # Another worker than the ones this task lost, while one lives.
                pool = [w for w in live if w.index not in tried] or live
                ready = [w for w in pool if w.state == "ok" and w.busy < self.per_node]
                if ready:
                    w = min(ready, key=lambda w: w.busy)
                    w.busy += 1
                    return w
                await self._changed.wait()

    def _suspect(self, w: _Worker) -> None:
        if w.state == "ok":
            w.state = "probing"
            probe = asyncio.create_task(self._probe(w))
            self._probes.add(probe)
            probe.add_done_callback(self._probes.discard)

    async def _probe(self, w: _Worker) -> None:
        """Back in the pool once Ray restarted it and it answers; dead if it cannot."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT_S
        state = "dead"
        while (left := deadline - loop.time()) > 0:
            try:
                await asyncio.wait_for(_awaitable(w.handle.start.remote(self._spec)), left)
            except self.ray.exceptions.ActorUnavailableError:
                await asyncio.sleep(PROBE_EVERY_S)  # restarting
                continue
            except Exception as e:
                log.warning("cluster worker %s is gone: %s", _name(w), _reason(e))
                break
            state = "ok"
            log.info("cluster worker %s answers again", _name(w))
            break
        async with self._changed:
            w.state = state
            self._changed.notify_all()

    async def close(self) -> None:
        """Let each worker close its sandbox pool and models, then end it."""
        for p in self._probes:
            p.cancel()
        live = [w for w in self.workers if w.state == "ok"]
        closing = [asyncio.wait_for(_awaitable(w.handle.close.remote()), 30) for w in live]
        await asyncio.gather(*closing, return_exceptions=True)
        for w in self.workers:
            with contextlib.suppress(Exception):
                self.ray.kill(w.handle, no_restart=True)


async def _awaitable(ref: Any) -> Any:
    return await ref


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[-1] if text else ''}"


def _name(w: _Worker) -> str:
    return (w.info or {}).get("worker") or f"#{w.index}"


async def eval_on_ray(
    bench: Benchmark,
    method: str,
    out_dir: str | os.PathLike[str],
    *,
    address: str = "auto",
    endpoint: dict[str, Any] | None = None,
    endpoint_per_node: str | None = None,
    models_factory: Any = None,
    data_dir: str | None = None,
    sandbox_kind: str = "auto",
    env_names: Iterable[str] = (),
    max_concurrency: int = 4,
    config: Any = None,
    **common: Any,
) -> EvalOutcome:
    """`run_eval` with one worker per node of the cluster at `address` (its head's
    HOST:PORT, or "auto": the one this machine belongs to; a process already connected
    keeps its connection), each running `max_concurrency` tasks at once. The
    other arguments are `run_eval`'s; the models come from `endpoint` (`connect`'s
    settings), on each node its own with `endpoint_per_node`, or from `models_factory`. The
    workers get the driver's environment variables named in `env_names`, and no other."""
    check_per_node(endpoint_per_node)
    # Before any worker starts (and a model loads); the demonstrations file is read here only.
    common["demos"] = preflight(bench, method, out_dir, config=config, **common)
    ray = _ray()
    spec = WorkerSpec(
        bench=bench,
        method=method,
        config=resolve(config, method=method).config.model_dump(mode="json"),
        demos=common["demos"],
        sandbox=sandbox_kind,
        endpoint=dict(endpoint or {}),
        per_node=endpoint_per_node,
        models_factory=models_factory,
        data_dir=str(data_dir) if data_dir else None,
        env=forwarded_env(os.environ, env_names),
        samples=common.get("samples"),
    )
    owned = _connect(ray, address)
    try:
        pool = WorkerPool(ray, spec, worker_nodes(ray), max_concurrency)
        try:
            infos = await pool.start()
            cluster = {
                "address": address,
                "workers": [i["worker"] for i in infos],
                "per_node_concurrency": max_concurrency,
                "endpoint_per_node": endpoint_per_node,
            }
            outcome = await run_eval(
                bench,
                method,
                None,
                None,
                Path(out_dir),
                max_concurrency=max_concurrency * len(infos),
                config=config,
                dispatch=pool,
                extra_config={
                    "models": infos[0]["models"],
                    "sandbox": infos[0]["sandbox"],
                    "cluster": cluster,
                },
                **common,
            )
        finally:
            await pool.close()
    finally:
        if owned:
            ray.shutdown()
    return outcome
