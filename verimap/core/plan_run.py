"""One plan's run: its nodes in dependency order, those whose parents are done at once (up to
`max_parallel`; `sequential` runs one at a time in topological order, like the paper), each
with the context its hand-off gives it. The first node that fails stops the rest: running ones
are cancelled, pending ones are skipped, and the failure is what a replan is told."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Coroutine
from typing import Any

from verimap.base.failure import FailureContext
from verimap.base.plan import PlanShape
from verimap.config import RunConfig
from verimap.core.node_context import DONE, NodeJob, failure_context, node_job
from verimap.core.result import NodeReport

# Runs one node's job to its final report (the coordinator adds what the run carries to it).
RunNode = Callable[[NodeJob], Coroutine[Any, Any, NodeReport]]


async def run_plan(
    shape: PlanShape, task: str, iteration: int, config: RunConfig, run_node: RunNode
) -> tuple[FailureContext | None, dict[str, str], dict[str, dict[str, Any]]]:
    """The first failure (None: every node is done), each node's status (a node that never
    started is "skipped"), and the outputs of the nodes that are done."""
    cfg = config
    order = {nid: i for i, nid in enumerate(shape.order)}
    waiting = {nid: len(ps) for nid, ps in shape.parents.items()}
    ready = [(order[nid], nid) for nid, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    status: dict[str, str] = dict.fromkeys(shape.nodes, "pending")
    values: dict[str, dict[str, Any]] = {}
    # The reports of the nodes done so far: a failed node's ancestors are among them.
    reports: dict[str, NodeReport] = {}
    limit = 1 if cfg.loop.sequential else cfg.loop.max_parallel
    running: dict[asyncio.Task, NodeJob] = {}
    failure: FailureContext | None = None
    try:
        while True:
            while failure is None and ready and len(running) < limit:
                _, nid = heapq.heappop(ready)
                status[nid] = "running"
                job = node_job(shape, nid, task, iteration, values, cfg)
                running[asyncio.create_task(run_node(job))] = job
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: order[running[f].node.id]):
                job = running.pop(fut)
                nid, report = job.node.id, fut.result()
                reports[nid], status[nid] = report, report.status
                if report.status in DONE:
                    values[nid] = report.outputs or {}
                    for c in shape.children[nid]:
                        waiting[c] -= 1
                        if waiting[c] == 0:
                            heapq.heappush(ready, (order[c], c))
                elif failure is None:
                    failure = failure_context(
                        shape, job.node, job.inputs, report, iteration, reports, status
                    )
    finally:
        for fut in running:
            fut.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    for nid, s in status.items():
        if s == "pending":
            status[nid] = "skipped"
    return failure, status, values
