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

The coordinator alone owns a run's state (`_RunState`) and alone changes it. The steps it
calls take values and give values back: a new plan is vetted (`vacuity.vet`) and its graph
read once (`PlanShape`), one plan runs its DAG (`plan_run`), a node step takes a job and
reports (`node_attempts`), and how a run ends is decided by pure functions (`run_end`); the
coordinator folds what they give into the state and builds the result from it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from verimap.base import events as ev
from verimap.base.events import EventBus
from verimap.base.execution import Feedback
from verimap.base.plan import Plan, PlanError, PlanningError, PlanShape
from verimap.base.roles import Executor, Planner, Verifier
from verimap.base.run_context import RunContext, require_ctx
from verimap.config import RunConfig
from verimap.core.node_attempts import NodeAttempts, NodeStep
from verimap.core.node_context import NodeJob, content_key
from verimap.core.plan_run import run_plan
from verimap.core.result import ErrorKind, NodeReport, RunResult, RunStatus
from verimap.core.run_end import (
    best_unverified,
    repeated_work_error,
    unconfirmed_error,
    why_unverified,
)
from verimap.core.run_scope import Runner
from verimap.core.vacuity import vet


class _RunState:
    """What one run knows as it goes: its plans, node reports and reuse cache, the counters
    that bound it, and the context each step reports through. Read and written by the
    coordinator only."""

    def __init__(self, run_id: str, task: str, ctx: RunContext):
        self.run_id = run_id
        self.task = task
        # The run's context; each step gets a child of it for the current iteration.
        self.ctx = ctx
        self.reports: dict[str, NodeReport] = {}
        self.cache: dict[str, dict[str, Any]] = {}
        # The plans run so far, each read once.
        self.shapes: list[PlanShape] = []
        self.retries = 0
        self.iteration = 0
        self.fallbacks: list[int] = []
        self.rules: list[str] = []
        self.dropped: list[str] = []
        # Feedback a node's next attempt starts from when its work runs again in a new iteration
        # (the plan kept, or a replan that hands the failed node's work back unchanged).
        self.carry: dict[str, Feedback] = {}
        self.kept: Counter[str] = Counter()
        # How often each node's work (`PlanShape.work`) has failed in this run.
        self.failed_work: Counter[str | None] = Counter()
        self.best: dict[str, Any] | None = None
        # Verdicts the sandbox could not give (SANDBOX_ERROR), which the verifier counts as fails.
        self.faults: list[str] = []
        # Why a verified node's answer is not confirmed (None: it is), by content key, so a node
        # reused after a replan keeps what its verification showed.
        self.unconfirmed: dict[str, str | None] = {}
        # The checks that disputed an answer, for the run's message.
        self.disputes: list[str] = []

    def step(self, node_id: str | None = None, attempt: int | None = None) -> RunContext:
        """The context of a step of the current iteration (and of a node's attempt, if given)."""
        return replace(self.ctx, iteration=self.iteration or None, node_id=node_id, attempt=attempt)

    def emit(self, event: ev.AnyEvent, node_id: str | None = None) -> None:
        self.step(node_id).emit(event)

    def result(
        self,
        config: RunConfig,
        status: RunStatus,
        *,
        final: str | None = None,
        final_output: dict | None = None,
        error: str | None = None,
        error_kind: ErrorKind | None = None,
    ) -> RunResult:
        """The run's result as the state stands (read, never changed); with no answer of its
        own, the best unverified one so far (an answer is never lost)."""
        why = why_unverified(config, status, final, self.reports)
        if final_output is None and self.shapes:
            final_output = self.best or best_unverified(
                self.shapes[-1], self.reports, self.iteration, config.verify.unverified_answer
            )
        return RunResult(
            run_id=self.run_id,
            task=self.task,
            status=status,
            final_node=final,
            final_output=final_output,
            nodes=self.reports,
            iterations=self.iteration,
            retries=self.retries,
            plans=[s.plan for s in self.shapes],
            error=error,
            verified=why is None,
            unverified_reason=why,
            fallback_iterations=list(self.fallbacks),
            plan_rules=list(self.rules),
            dropped_vfs=list(self.dropped),
            error_kind=error_kind,
        )


@dataclass(frozen=True)
class _End:
    """How the loop ended: what the run's result is built from."""

    status: RunStatus
    final: str | None = None
    final_output: dict[str, Any] | None = None
    error: str | None = None


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
        st = _RunState(scope.run_id, task, scope.ctx)
        return await scope.run(
            partial(self._run, st),
            partial(st.result, self.config),
            failures={PlanningError: "planning failed", PlanError: "planning failed"},
            faults=lambda: st.faults,
            at=st.step,
        )

    async def _run(self, st: _RunState) -> RunResult:
        end = await self._loop(st)
        return st.result(
            self.config,
            end.status,
            final=end.final,
            final_output=end.final_output,
            error=end.error,
        )

    async def _loop(self, st: _RunState) -> _End:
        """Plan, run the plan, and on a failure keep the plan or replan, until the run ends."""
        cfg = self.config
        attempts = NodeAttempts(self.executor, self.verifier, cfg)
        st.iteration = 1
        shape = await self._vet(st, await self.planner.plan(st.task, ctx=st.step()))
        while True:
            st.shapes.append(shape)
            st.emit(ev.Plan(plan=shape.plan.model_dump(mode="json", by_alias=True)))
            if not cfg.loop.reuse_verified:
                st.cache.clear()
            failure, statuses, values = await run_plan(
                shape, st.task, st.iteration, cfg, partial(self._node, st, attempts)
            )
            for nid, s in statuses.items():
                if s == "skipped":
                    rep = st.reports.setdefault(nid, NodeReport(node_id=nid))
                    if rep.iteration != st.iteration:
                        rep.status, rep.iteration = "skipped", st.iteration
            final = shape.final
            if failure is None:
                accepted = any(s == "fail-accepted" for s in statuses.values())
                return _End("partial" if accepted else "success", final, dict(values[final]))
            best = best_unverified(shape, st.reports, st.iteration, cfg.verify.unverified_answer)
            st.best = best or st.best
            if statuses.get(failure.node_id) == "unconfirmed":
                rep = st.reports[failure.node_id]
                error = unconfirmed_error(cfg, failure.node_id, rep, st.disputes)
                return _End("failed", final, rep.outputs, error)
            if st.iteration >= cfg.loop.max_iterations:
                return _End(
                    "failed",
                    final,
                    error=f"node {failure.node_id!r} failed verification "
                    f"and {cfg.loop.max_iterations} iteration(s) are spent",
                )
            work = shape.work[failure.node_id]
            st.failed_work[work] += 1
            st.iteration += 1
            if failure.kind == "executor" and not st.kept[failure.node_id]:
                # No VF failed: the executor gave no answer of the declared shape. The plan is not
                # at fault, so it runs again, the node starting from what its retries were told.
                st.kept[failure.node_id] += 1
                st.emit(ev.PlanKept(failed_node=failure.node_id, error=failure.error))
                continue
            st.emit(ev.Replan(failed_node=failure.node_id, failure=failure.model_dump(mode="json")))
            told = st.carry.get(failure.node_id)
            st.carry.clear()
            replan = self.planner.replan(st.task, shape.plan, failure, ctx=st.step())
            shape = await self._vet(st, await replan)
            again = shape.work.get(failure.node_id)
            if told is not None and again == work:
                st.carry[failure.node_id] = (
                    told  # else it repeats itself (design/decisions.md, D09)
                )
            if again is not None and (
                stop := repeated_work_error(cfg, failure.node_id, st.failed_work[again])
            ):
                st.iteration -= 1  # the returned plan does not run
                return _End("failed", shape.final, error=stop)

    async def _vet(self, st: _RunState, plan: Plan) -> PlanShape:
        """`plan` as it runs, read once (`Plan.shape`): what it says of itself (VFs it dropped,
        the rule or fallback that made it) recorded, then its vacuous VFs sent back or dropped
        (`vacuity.vet`)."""
        st.dropped.extend(f"{st.iteration}:{d}" for d in plan.dropped_vfs)
        if plan.rule is not None:
            st.rules.append(f"{st.iteration}: {plan.rule}")
            st.emit(ev.PlanRule(rule=plan.rule))
        elif plan.fallback_reason is not None:
            st.fallbacks.append(st.iteration)
            st.emit(ev.PlanFallback(reason=plan.fallback_reason))
        plan, dropped = await vet(
            plan, st.task, self.config, self.planner, self.verifier, st.step()
        )
        st.dropped.extend(f"{st.iteration}:{nid}.{name} (vacuous)" for nid, name in dropped)
        return plan.shape()

    async def _node(self, st: _RunState, attempts: NodeAttempts, job: NodeJob) -> NodeReport:
        """The node's report for this iteration: its verified result of an earlier plan when
        the same work was done (the reuse cache), else what its step reports, folded into the
        state as each report comes."""
        nid = job.node.id
        key = content_key(job.node, job.inputs, job.context)
        if key in st.cache:
            rep = st.reports.setdefault(nid, NodeReport(node_id=nid))
            rep.iteration = st.iteration
            rep.status, rep.outputs = "reused", dict(st.cache[key])
            rep.unconfirmed = st.unconfirmed.get(key)
            st.emit(ev.NodeReused(outputs=rep.outputs), nid)
            return rep
        job = replace(job, feedback=st.carry.pop(nid, None), earlier=st.reports.get(nid))
        seen = NodeStep(NodeReport(node_id=nid))
        async for step in attempts.run(job, st.step()):
            st.reports[nid] = step.report
            st.retries += step.retries - seen.retries
            st.faults.extend(step.faults[len(seen.faults) :])
            st.disputes.extend(step.disputes[len(seen.disputes) :])
            seen = step
        rep = seen.report
        if rep.status == "verified":
            st.unconfirmed[key] = rep.unconfirmed
            st.cache[key] = dict(rep.outputs or {})
        if seen.carry is not None:
            st.carry[nid] = seen.carry
        return rep
