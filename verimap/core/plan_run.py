"""One plan's run: its nodes in dependency order, those whose parents are done at once (up to
`max_parallel`; `sequential` runs one at a time in topological order, like the paper), each
with the context its hand-off gives it. The first node that fails stops the rest: running ones
are cancelled, pending ones are skipped, and the failure is what a replan is told."""

from __future__ import annotations

import asyncio
import heapq
from typing import Any

from verimap.config import RunConfig
from verimap.core.node_attempts import NodeAttempts
from verimap.core.node_context import (
    DONE,
    failure_context,
    resolve_inputs,
    structured_context,
    text_context,
    votes_needed,
)
from verimap.core.result import NodeReport
from verimap.core.run_state import RunState
from verimap.planning.failure import FailureContext
from verimap.planning.plan import Plan


async def run_plan(
    st: RunState, plan: Plan, config: RunConfig, attempts: NodeAttempts
) -> tuple[FailureContext | None, dict[str, str], dict[str, dict[str, Any]]]:
    """The first failure (None: every node is done), each node's status, and the outputs of
    the nodes that are done. Verified nodes of earlier plans are reused unless the config
    says every plan starts fresh (the paper)."""
    cfg = config
    if not cfg.loop.reuse_verified:
        st.cache.clear()
    st.final = plan.final_node().id
    order = {nid: i for i, nid in enumerate(plan.topological_order())}
    by_id = plan.by_id
    parents: dict[str, set[str]] = {nid: set() for nid in by_id}
    children: dict[str, list[str]] = {nid: [] for nid in by_id}
    for s, t in plan.edge_set():
        parents[t].add(s)
        children[s].append(t)
    waiting = {nid: len(ps) for nid, ps in parents.items()}
    ready = [(order[nid], nid) for nid, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    status: dict[str, str] = dict.fromkeys(by_id, "pending")
    values: dict[str, dict[str, Any]] = {}
    limit = 1 if cfg.loop.sequential else cfg.loop.max_parallel
    running: dict[asyncio.Task, str] = {}
    failure: FailureContext | None = None
    try:
        while True:
            while failure is None and ready and len(running) < limit:
                _, nid = heapq.heappop(ready)
                node = by_id[nid]
                inputs = resolve_inputs(node, st.task, values)
                gens = cfg.execution.context_generations
                context = (
                    structured_context(plan, node, values, gens)
                    if cfg.execution.structured_io
                    else text_context(plan, node, values, gens)
                )
                status[nid] = "running"
                types = {
                    ref: by_id[src].output_type(var)
                    for src, var in node.input_refs()
                    if src in by_id
                    for ref in (f"{src}.{var}",)
                }
                votes = votes_needed(node, nid == st.final, cfg)
                task = asyncio.create_task(attempts.run(st, node, inputs, context, types, votes))
                running[task] = nid
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: order[running[f]]):
                nid = running.pop(fut)
                report, inputs = fut.result()
                status[nid] = report.status
                if report.status in DONE:
                    values[nid] = report.outputs or {}
                    for c in children[nid]:
                        waiting[c] -= 1
                        if waiting[c] == 0:
                            heapq.heappush(ready, (order[c], c))
                elif failure is None:
                    failure = failure_context(
                        plan, by_id[nid], inputs, report, st.iteration, st.reports, status
                    )
    finally:
        for fut in running:
            fut.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    for nid, s in status.items():
        if s == "pending":
            status[nid] = "skipped"
            rep = st.reports.setdefault(nid, NodeReport(node_id=nid))
            if rep.iteration != st.iteration:
                rep.status, rep.iteration = "skipped", st.iteration
    return failure, status, values
