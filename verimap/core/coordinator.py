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
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from verimap import events as ev
from verimap.config import RunConfig
from verimap.core.executor import TEXT_OUTPUT, Executor, single_code_output
from verimap.core.feedback import Feedback, retry_feedback
from verimap.core.node_context import (
    DONE,
    best_unverified,
    content_key,
    failure_context,
    plurality,
    resolve_inputs,
    structured_context,
    text_context,
    votes_needed,
)
from verimap.core.result import AttemptReport, ErrorKind, NodeReport, RunResult, RunStatus
from verimap.core.run_context import RunContext, require_ctx
from verimap.core.run_scope import RunScope
from verimap.core.vacuity import without_vacuous_vfs
from verimap.core.verifier import Verifier
from verimap.events import EventBus
from verimap.planning.failure import FailureContext
from verimap.planning.plan import Node, Plan, PlanError
from verimap.planning.plan_checks import node_work
from verimap.planning.planner import Planner, PlanningError
from verimap.sandbox.base import Outcome
from verimap.verdicts import clip


class _RunState:
    def __init__(self, run_id: str, task: str, ctx: RunContext):
        self.run_id = run_id
        self.task = task
        # The run's context; each step gets a child of it for the current iteration.
        self.ctx = ctx
        self.reports: dict[str, NodeReport] = {}
        self.cache: dict[str, dict[str, Any]] = {}
        self.plans: list[Plan] = []
        self.retries = 0
        self.iteration = 0
        self.fallbacks: list[int] = []
        self.rules: list[str] = []
        self.dropped: list[str] = []
        # Feedback a node's next attempt starts from when its work runs again in a new iteration
        # (the plan kept, or a replan that hands the failed node's work back unchanged).
        self.carry: dict[str, Feedback] = {}
        self.kept: Counter[str] = Counter()
        # How often each node's work (`plan_checks.node_work`) has failed in this run.
        self.failed_work: Counter[str | None] = Counter()
        self.best: dict[str, Any] | None = None
        # Verdicts the sandbox could not give (SANDBOX_ERROR), which the verifier counts as fails.
        self.faults: list[str] = []
        # Why a verified node's answer is not confirmed (None: it is), by content key, so a node
        # reused after a replan keeps what its verification showed.
        self.unconfirmed: dict[str, str | None] = {}
        # The checks that disputed the final answer, for the run's message.
        self.disputes: list[str] = []
        # The final node of the plan being run (found once: finding it walks the whole plan).
        self.final = ""


class Coordinator:
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
        self.config = config or RunConfig()
        self.events = events or EventBus()
        self.trace_dir = Path(trace_dir) if trace_dir is not None else None
        # The policies the run follows, with their parameters, for its run_start event.
        self.policies = policies or []

    # -- context and events ---------------------------------------------------
    @staticmethod
    def _ctx(st: _RunState, node_id: str | None = None, attempt: int | None = None) -> RunContext:
        """The context of a step of the current iteration (and of a node's attempt, if given)."""
        return replace(st.ctx, iteration=st.iteration or None, node_id=node_id, attempt=attempt)

    def _emit(
        self,
        st: _RunState,
        event: ev.AnyEvent,
        node_id: str | None = None,
        attempt: int | None = None,
    ) -> None:
        self._ctx(st, node_id, attempt).emit(event)

    # -- public -------------------------------------------------------------
    async def run(
        self, task: str, *, run_id: str | None = None, trace_path: str | Path | None = None
    ) -> RunResult:
        scope = RunScope(
            task, self.config, self.events, run_id=run_id, trace_path=trace_path,
            trace_dir=self.trace_dir, policies=self.policies,
        )  # fmt: skip
        st = _RunState(scope.run_id, task, scope.ctx)
        return await scope.run(
            partial(self._run, st),
            partial(self._result, st),
            failures={PlanningError: "planning failed", PlanError: "planning failed"},
            faults=lambda: st.faults,
            at=lambda: self._ctx(st),
        )

    def run_sync(self, task: str, **kw: Any) -> RunResult:
        """Blocking wrapper for scripts and notebooks without a running loop."""
        return asyncio.run(self.run(task, **kw))

    # -- internals ----------------------------------------------------------
    def _result(self, st: _RunState, status: RunStatus, *, final: str | None = None,
                final_output: dict | None = None, error: str | None = None,
                error_kind: ErrorKind | None = None) -> RunResult:  # fmt: skip
        why = self._why_unverified(st, status, final)
        if final_output is None and st.plans:  # the best answer so far, unverified: never lost
            final_output = st.best or best_unverified(
                st.plans[-1], st.reports, st.iteration, self.config.verify.unverified_answer
            )
        return RunResult(
            run_id=st.run_id, task=st.task, status=status, final_node=final, final_output=final_output,
            nodes=st.reports, iterations=st.iteration, retries=st.retries, plans=list(st.plans), error=error,
            verified=why is None, unverified_reason=why, fallback_iterations=list(st.fallbacks),
            plan_rules=list(st.rules),
            dropped_vfs=list(st.dropped), error_kind=error_kind,
        )  # fmt: skip

    def _why_unverified(self, st: _RunState, status: RunStatus, final: str | None) -> str | None:
        """None when the run's answer is verified: every node passed, and the final one on
        evidence (a strong check passed); else why not."""
        if self.config.verify.verification == "none":
            return "the method runs no verification"
        if status != "success" or final is None:
            return f"the run ended {status}"
        rep = st.reports.get(final)
        return rep.unconfirmed if rep is not None else "the final node did not run"

    async def _run(self, st: _RunState) -> RunResult:
        cfg = self.config
        st.iteration = 1
        plan = await self._vet(st, await self.planner.plan(st.task, ctx=self._ctx(st)))
        while True:
            st.plans.append(plan)
            self._emit(st, ev.Plan(plan=plan.model_dump(mode="json", by_alias=True)))
            if not cfg.loop.reuse_verified:
                st.cache.clear()
            failure, statuses, values = await self._run_plan(st, plan)
            if failure is None:
                final = plan.final_node().id
                partial = any(s == "fail-accepted" for s in statuses.values())
                return self._result(
                    st,
                    "partial" if partial else "success",
                    final=final,
                    final_output=dict(values[final]),
                )
            best = best_unverified(
                plan, st.reports, st.iteration, self.config.verify.unverified_answer
            )
            st.best = best or st.best
            if statuses.get(failure.node_id) == "unconfirmed":
                disputes = sorted(set(st.disputes))
                why = (f"{' and '.join(disputes)} did not confirm any of its answers" if disputes
                       else f"its answers did not agree {cfg.verify.agreement} times in "
                       f"{cfg.loop.max_retries + cfg.verify.agreement - 1} attempts")  # fmt: skip
                kept = "the answer most solutions gave"
                return self._result(
                    st, "failed", final=plan.final_node().id,
                    final_output=st.reports[failure.node_id].outputs,
                    error=f"node {failure.node_id!r} passed its VFs, but {why}; {kept} is kept, "
                    "unverified",
                )  # fmt: skip
            if st.iteration >= cfg.loop.max_iterations:
                return self._result(
                    st, "failed", final=plan.final_node().id,
                    error=f"node {failure.node_id!r} failed verification and {cfg.loop.max_iterations} "
                    f"iteration(s) are spent",
                )  # fmt: skip
            st.failed_work[node_work(plan, failure.node_id)] += 1
            st.iteration += 1
            if failure.kind == "executor" and not st.kept[failure.node_id]:
                # No VF failed: the executor gave no answer of the declared shape. The plan is not
                # at fault, so it runs again, the node starting from what its retries were told.
                st.kept[failure.node_id] += 1
                self._emit(st, ev.PlanKept(failed_node=failure.node_id, error=failure.error))
                continue
            self._emit(
                st, ev.Replan(failed_node=failure.node_id, failure=failure.model_dump(mode="json"))
            )
            told, work = st.carry.get(failure.node_id), node_work(plan, failure.node_id)
            st.carry.clear()
            replan = self.planner.replan(st.task, plan, failure, ctx=self._ctx(st))
            plan = await self._vet(st, await replan)
            if told is not None and node_work(plan, failure.node_id) == work:
                st.carry[failure.node_id] = told  # else it repeats itself (docs/decisions.md, D09)
            if (stop := self._repeats_failed_work(st, plan, failure.node_id)) is not None:
                return stop

    def _repeats_failed_work(self, st: _RunState, plan: Plan, node_id: str) -> RunResult | None:
        """The run's end when the replanner hands back work that already failed more often than
        `max_plan_repeats` allows: under greedy decoding the executor then repeats its failed
        answers word for word, and every further iteration costs a plan and a node's retries."""
        limit, work = self.config.loop.max_plan_repeats, node_work(plan, node_id)
        if limit is None or work is None or (runs := st.failed_work[work]) <= limit:
            return None
        st.iteration -= 1  # the returned plan does not run
        return self._result(
            st, "failed", final=plan.final_node().id,
            error=f"node {node_id!r} failed verification; the replanner returned its work "
            f"unchanged after {runs} failed runs, so the run stopped (max_plan_repeats={limit})",
        )  # fmt: skip

    async def _vet(self, st: _RunState, plan: Plan) -> Plan:
        """Record a fallback plan; find Python VFs that pass on null and on absurd outputs (they
        check nothing), send them back to the planner once, then drop those still vacuous."""
        st.dropped.extend(f"{st.iteration}:{d}" for d in plan.dropped_vfs)
        if plan.rule is not None:
            st.rules.append(f"{st.iteration}: {plan.rule}")
            self._emit(st, ev.PlanRule(rule=plan.rule))
            return plan  # its VFs are built in: nothing to probe or repair
        if plan.fallback_reason is not None:
            st.fallbacks.append(st.iteration)
            self._emit(st, ev.PlanFallback(reason=plan.fallback_reason))
            return plan
        if self.config.verify.verification != "full" or not self.config.verify.vacuity_check:
            return plan
        repair = getattr(self.planner, "repair", None)
        if repair is not None:
            repair = partial(repair, st.task, ctx=self._ctx(st))
        plan, dropped = await without_vacuous_vfs(plan, st.task, self.verifier, repair)
        for nid, name in dropped:
            st.dropped.append(f"{st.iteration}:{nid}.{name} (vacuous)")
            self._emit(st, ev.VfVacuous(vf=name), nid)
        return plan

    async def _run_plan(self, st: _RunState, plan: Plan):
        cfg = self.config
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
                    votes = votes_needed(node, nid == st.final, self.config)
                    task = asyncio.create_task(
                        self._run_node(st, node, inputs, context, types, votes)
                    )
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

    def _tool_event(
        self, st: _RunState, node_id: str, attempt: int, tool: str, args: str, result: str,
        duration_s: float,
    ) -> None:  # fmt: skip
        self._emit(st, ev.ToolCall(tool=tool, arguments=clip(args, 2000),
                                   result=clip(result, 2000), duration_s=duration_s),
                   node_id, attempt)  # fmt: skip

    async def _run_node(
        self, st: _RunState, node: Node, inputs: dict, context: dict | None,
        input_types: dict[str, Any] | None = None, votes: int = 1,
    ) -> tuple[NodeReport, dict]:  # fmt: skip
        cfg = self.config
        rep = st.reports.setdefault(node.id, NodeReport(node_id=node.id))
        rep.iteration = st.iteration
        key = content_key(node, inputs, context)
        if key in st.cache:
            rep.status, rep.outputs = "reused", dict(st.cache[key])
            rep.unconfirmed = st.unconfirmed.get(key)
            self._emit(st, ev.NodeReused(outputs=rep.outputs), node.id)
            return rep, inputs
        rep.status = "pending"
        self._emit(st, ev.NodeStart(instruction=node.instruction, inputs=inputs), node.id)
        feedback: Feedback | None = st.carry.pop(node.id, None)
        last_outputs: dict[str, Any] | None = None
        passing: list[dict[str, Any]] = []
        disputed: list[dict[str, Any]] = []  # passed every VF, but a check disputed it
        attempt = failed = 0
        final = node.id == st.final
        fresh_turns = cfg.execution.fresh_code_retries and single_code_output(node)
        # Attempts that fail count against max_retries; agreement adds up to votes - 1 more.
        while failed < cfg.loop.max_retries and attempt < cfg.loop.max_retries + votes - 1:
            attempt += 1
            if attempt > 1 or feedback is not None:  # carried over: it goes on from a failure
                st.retries += 1
                told = feedback.model_dump(mode="json") if feedback else None
                self._emit(st, ev.Retry(feedback=told), node.id, attempt)
            self._emit(st, ev.Attempt(), node.id, attempt)
            actx = self._ctx(st, node.id, attempt)
            out = await self.executor.execute(
                node, inputs, feedback, context, input_types,
                on_tool_call=partial(self._tool_event, st, node.id, attempt),
                sample=bool(passing) and feedback is None, ctx=actx,
                final=final,
            )  # fmt: skip
            rec = AttemptReport(
                iteration=st.iteration, attempt=attempt, outputs=out.outputs, steps=out.steps
            )
            rep.attempts.append(rec)
            if not out.ok:
                failed += 1
                rec.error = out.error
                self._emit(st, ev.AttemptResult(passed=False, error=out.error, outputs=out.outputs,
                                                reply=out.reply()), node.id, attempt)  # fmt: skip
                feedback = retry_feedback(out.outputs, rep.attempts, fresh_turns, error=out.error)
                continue
            last_outputs = out.outputs
            verify_start = time.monotonic()
            vr = await self.verifier.verify(
                node, inputs, out.outputs or {}, ctx=actx, task=st.task, transcript=out.messages,
                final=final,
            )  # fmt: skip
            verify_s = time.monotonic() - verify_start
            rec.verdicts, rec.passed = vr.verdicts, vr.passed
            st.faults.extend(
                f"sandbox error in VF {v.name!r} of node {node.id!r}: {v.message}"
                for v in vr.verdicts
                if v.outcome == Outcome.SANDBOX_ERROR
            )
            for v in vr.verdicts:
                # The VFs of an attempt run together: each verdict carries the step's duration.
                self._emit(st, ev.VfVerdict.of(v, verify_s), node.id, attempt)
            self._emit(st, ev.AttemptResult(passed=vr.passed, score=vr.score, outputs=out.outputs,
                                            reply=out.reply()), node.id, attempt)  # fmt: skip
            if vr.passed:
                passing.append(dict(out.outputs or {}))
                answer, count = plurality(passing)
                if count >= votes:
                    rep.status, rep.outputs = "verified", answer
                    rep.unconfirmed = st.unconfirmed[key] = vr.why_unconfirmed()
                    st.cache[key] = dict(rep.outputs)
                    self._emit(st, ev.NodeFinish(status=rep.status, outputs=rep.outputs), node.id)
                    return rep, inputs
                # Agreement still missing: the next attempt is an independent sample.
                self._emit(st, ev.Agreement(answers=passing, needed=votes), node.id, attempt)
                feedback = None
                continue
            failed += 1
            if (against := self.verifier.disputes(vr)) is not None:
                disputed.append(dict(out.outputs or {}))
                st.disputes.extend(against)
            feedback = retry_feedback(out.outputs, rep.attempts, fresh_turns, failures=vr.failures)
        if passing or disputed:
            rep.status = "unconfirmed"
            picked = None if passing else self.verifier.choose(node, disputed, st.ctx)
            rep.outputs = picked or plurality(passing or disputed)[0]
            self._emit(st, ev.NodeFinish(status=rep.status, outputs=rep.outputs,
                                         answers=passing or disputed), node.id)  # fmt: skip
            return rep, inputs
        if cfg.loop.fail_accepted:
            rep.status = "fail-accepted"
            names = list(node.outputs) if cfg.execution.structured_io else [TEXT_OUTPUT]
            rep.outputs = dict(last_outputs) if last_outputs else dict.fromkeys(names)
            for o in names:
                rep.outputs.setdefault(o, None)
        else:
            rep.status = "failed"
            rep.outputs = last_outputs
            if feedback is not None:
                st.carry[node.id] = feedback
        self._emit(st, ev.NodeFinish(status=rep.status, outputs=rep.outputs), node.id)
        return rep, inputs
