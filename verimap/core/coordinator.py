"""The coordinator: plan, execute and verify every node, retry, replan, and report.

Nodes whose parents are all done run concurrently (up to `max_parallel`;
`sequential=True` runs them one at a time in topological order, like the paper).
Each node gets `max_retries` execute->verify attempts; when a node spends them,
the planner replans with the failure context, up to `max_iterations` plans.
After a replan, verified nodes whose content (instruction, input values,
outputs, VFs) is unchanged are reused. Every step is an event.

Each run has one `RunContext` (run id, event sink, ledger, settings), and each step gets a
child of it for its iteration and, within a node, its attempt: the planner, executor and
verifier meter their model calls and report through the context they are passed.

This module is the loop over plans; the rest is in its own modules: a new plan is vetted
(`vacuity.vet`), one plan runs its DAG (`plan_run`), a node runs its attempts
(`node_attempts`), and a run's result is assembled (`run_end`), all on one `RunState`.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from verimap.base import events as ev
from verimap.base.events import EventBus
from verimap.base.run_context import require_ctx
from verimap.config import RunConfig
from verimap.core.node_attempts import NodeAttempts
from verimap.core.node_context import best_unverified
from verimap.core.plan_run import run_plan
from verimap.core.protocols import Executor, Verifier
from verimap.core.result import RunResult
from verimap.core.run_end import repeats_failed_work, result, unconfirmed
from verimap.core.run_scope import Runner
from verimap.core.run_state import RunState
from verimap.core.vacuity import vet
from verimap.planning.plan import PlanError
from verimap.planning.plan_checks import node_work
from verimap.planning.planner import Planner, PlanningError


class Coordinator(Runner):
    def __init__(
        self,
        planner: Planner,
        executor: Executor,
        verifier: Verifier,
        config: RunConfig | None = None,
        events: EventBus | None = None,
        *,
        trace_dir: str | Path | None = None,
        policies: list[dict[str, Any]] | None = None,
    ):
        require_ctx("planner", planner)
        require_ctx("executor", executor)
        require_ctx("verifier", verifier)
        self.planner = planner
        self.executor = executor
        self.verifier = verifier
        super().__init__(config, events, trace_dir, policies)

    async def run(
        self, task: str, *, run_id: str | None = None, trace_path: str | Path | None = None
    ) -> RunResult:
        scope = self.scope(task, run_id, trace_path)
        st = RunState(scope.run_id, task, scope.ctx)
        return await scope.run(
            partial(self._run, st),
            partial(result, st, self.config),
            failures={PlanningError: "planning failed", PlanError: "planning failed"},
            faults=lambda: st.faults,
            at=st.step,
        )

    async def _run(self, st: RunState) -> RunResult:
        cfg = self.config
        attempts = NodeAttempts(self.executor, self.verifier, cfg)
        st.iteration = 1
        plan = await vet(
            st, await self.planner.plan(st.task, ctx=st.step()), cfg, self.planner, self.verifier
        )
        while True:
            st.plans.append(plan)
            st.emit(ev.Plan(plan=plan.model_dump(mode="json", by_alias=True)))
            failure, statuses, values = await run_plan(st, plan, cfg, attempts)
            if failure is None:
                final = plan.final_node().id
                accepted = any(s == "fail-accepted" for s in statuses.values())
                return result(
                    st, cfg, "partial" if accepted else "success", final=final,
                    final_output=dict(values[final]),
                )  # fmt: skip
            best = best_unverified(plan, st.reports, st.iteration, cfg.verify.unverified_answer)
            st.best = best or st.best
            if (end := unconfirmed(st, cfg, plan, failure, statuses)) is not None:
                return end
            if st.iteration >= cfg.loop.max_iterations:
                return result(
                    st, cfg, "failed", final=plan.final_node().id,
                    error=f"node {failure.node_id!r} failed verification and "
                    f"{cfg.loop.max_iterations} iteration(s) are spent",
                )  # fmt: skip
            st.failed_work[node_work(plan, failure.node_id)] += 1
            st.iteration += 1
            if failure.kind == "executor" and not st.kept[failure.node_id]:
                # No VF failed: the executor gave no answer of the declared shape. The plan is not
                # at fault, so it runs again, the node starting from what its retries were told.
                st.kept[failure.node_id] += 1
                st.emit(ev.PlanKept(failed_node=failure.node_id, error=failure.error))
                continue
            st.emit(ev.Replan(failed_node=failure.node_id, failure=failure.model_dump(mode="json")))
            told, work = st.carry.get(failure.node_id), node_work(plan, failure.node_id)
            st.carry.clear()
            replan = self.planner.replan(st.task, plan, failure, ctx=st.step())
            plan = await vet(st, await replan, cfg, self.planner, self.verifier)
            if told is not None and node_work(plan, failure.node_id) == work:
                st.carry[failure.node_id] = told  # else it repeats itself (docs/decisions.md, D09)
            if (stop := repeats_failed_work(st, cfg, plan, failure.node_id)) is not None:
                return stop
