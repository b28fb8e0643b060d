"""What runs on each node of a cluster eval: a worker that solves tasks and writes nothing.

A worker builds, once, what the local runner builds once: the models (the driver's
endpoint, the node's own, or a models factory), a warm sandbox pool on the node's Docker
daemon, and what the benchmark's tools share (the search index). Each task then runs
through `attempt_task`, exactly as in a local run, with its trace in a scratch directory;
the attempt and the trace's text go back to the driver, the only writer of the run.

Importing this module does not import Ray: the driver wraps `EvalWorker` as an actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verimap.evals.attempt import Attempt, attempt_task, method_solver, trace_rel
from verimap.evals.tasksets import Benchmark, EvalTask
from verimap.planning.demos import DemoPool

# `--ray-endpoint-per-node local`: each node serves the local model itself.
LOCAL = "local"
# Settings a node's endpoint replaces; the model names stay the driver's.
_WHERE = ("base_url", "model_file", "keep_server")


@dataclass
class WorkerSpec:
    """Everything a worker needs, shipped once through the object store (so the nodes need
    the package, Docker and the sandbox image, not the data set)."""

    bench: Benchmark
    method: str
    config: dict[str, Any]  # the method's resolved RunConfig, as JSON
    sandbox: str = "auto"
    endpoint: dict[str, Any] = field(
        default_factory=dict
    )  # `verimap.local.endpoint.connect` settings
    per_node: str | None = None  # a base URL with {node_ip}, or "local"
    # MODULE:FUNCTION or a picklable callable (benchmark, data_dir) -> models, instead of an endpoint
    models_factory: str | Callable[..., dict[str, Any]] | None = None
    data_dir: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # the driver's that --ray-env names
    samples: int | None = None  # the k of a method that samples (sc)
    demos: DemoPool | None = None  # the pool `config` names, as the driver read it


def check_per_node(per_node: str | None) -> None:
    """Refuse on the driver what every node would fail on."""
    if per_node is None or per_node == LOCAL:
        return
    try:
        per_node.format(node_ip="127.0.0.1")
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(
            f"--ray-endpoint-per-node {per_node!r}: {{node_ip}} is the only placeholder ({e})"
        ) from None
    if "://" not in per_node:
        raise ValueError(
            f"--ray-endpoint-per-node {per_node!r}: give a base URL (http://{{node_ip}}:8000/v1) "
            "or 'local'"
        )


def node_endpoint(endpoint: dict[str, Any], per_node: str | None, node_ip: str) -> dict[str, Any]:
    """The `connect` settings on the node at `node_ip`: the driver's, or with the node's own
    server (`per_node`) in place of the driver's."""
    if not per_node:
        return dict(endpoint)
    kept = {k: v for k, v in endpoint.items() if k not in _WHERE}
    if per_node == LOCAL:
        return {**kept, **{k: endpoint[k] for k in ("model_file", "keep_server") if k in endpoint}}
    return {**kept, "base_url": per_node.format(node_ip=node_ip)}


def forwarded_env(environ: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
    """The variables of the driver's environment that go to the workers: those the user named
    (`--ray-env`), and no other. A cluster receives what it is sent, so nothing goes unasked:
    neither a key nor verimap's own settings."""
    return {n: environ[n] for n in names if n in environ}


def _factory(spec: str | Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    if callable(spec):
        return spec
    mod, _, attr = spec.partition(":")
    fn: Callable[..., dict[str, Any]] = getattr(importlib.import_module(mod), attr)
    return fn


class EvalWorker:
    """A Ray actor (see `verimap.evals.cluster`): `start` builds the node's models and
    sandbox pool once, `attempt` solves one task, `close` releases the pool and the models.

    The spec comes with `start`, not to the constructor, so a worker that Ray restarts
    holds nothing until the driver, seeing it answer again, starts it anew."""

    def __init__(self) -> None:
        self.spec: WorkerSpec | None = None
        self.name = ""
        self._stack = contextlib.AsyncExitStack()
        self._setup: asyncio.Future[dict[str, Any]] | None = None
        self._solve: Any = None
        self._sandbox: Any = None

    async def start(self, spec: WorkerSpec) -> dict[str, Any]:
        """Where this worker runs and with what; builds it on the first call only."""
        if self._setup is None:
            self.spec = spec
            self._setup = asyncio.ensure_future(self._build(spec))
        return await asyncio.shield(self._setup)

    async def _build(self, spec: WorkerSpec) -> dict[str, Any]:
        import ray

        from verimap.config import RunConfig
        from verimap.sandbox import get_sandbox

        node_ip = ray.util.get_node_ip_address()
        node_id = ray.get_runtime_context().get_node_id()
        self.name = f"{node_ip} node {node_id[:8]}"
        os.environ.update(spec.env)
        if spec.per_node == LOCAL:  # an endpoint in the node's environment would win otherwise
            for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
                os.environ.pop(k, None)
        self._sandbox = await self._stack.enter_async_context(
            get_sandbox(spec.sandbox, shared=False)
        )
        if spec.models_factory is not None:
            # A custom benchmark has no name to be opened by: the factory gets it whole.
            named = spec.bench if spec.bench.identity() else spec.bench.name
            models = _factory(spec.models_factory)(named, spec.data_dir)
        else:
            from verimap.local.endpoint import connect

            settings = node_endpoint(spec.endpoint, spec.per_node, node_ip)
            models = await self._stack.enter_async_context(connect(**settings))
        await asyncio.to_thread(spec.bench.prepare)
        cfg = RunConfig.model_validate(spec.config)
        self._solve = method_solver(
            spec.bench,
            spec.method,
            models,
            self._sandbox,
            cfg,
            samples=spec.samples,
            demos=spec.demos,
        )
        return {
            "worker": self.name,
            "pid": os.getpid(),
            "sandbox": self._sandbox.kind,
            "models": {r: getattr(m, "name", "?") for r, m in models.items()},
        }

    async def attempt(self, task: EvalTask, run: int) -> Attempt:
        if self._setup is None or self.spec is None:
            raise RuntimeError("this worker was not started (restarted by Ray?)")
        await asyncio.shield(self._setup)
        spec = self.spec
        with tempfile.TemporaryDirectory(prefix="verimap-task-") as scratch:
            path = Path(scratch) / trace_rel(run, task.id)
            att = await attempt_task(
                spec.bench, spec.method, task, run, path, self._sandbox, self._solve
            )
            att.trace = path.read_text(errors="replace") if path.exists() else ""
        att.worker = self.name
        return att

    async def close(self) -> None:
        await self._stack.aclose()
