"""One node's attempts: execute, verify, and retry with the failure's feedback until the node
verifies (its answer agreed on, when agreement asks for votes), or its retries are spent.

A node ends verified, unconfirmed (its VFs passed but its answers never agreed, or a check
disputed every one), failed (its feedback is carried to the node's next run), or, in the
one-pass methods, fail-accepted (its last outputs flow on). Every step is an event.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from verimap.base import events as ev
from verimap.base.sandbox import Outcome
from verimap.base.verdicts import clip
from verimap.config import RunConfig
from verimap.core.executor import TEXT_OUTPUT, single_code_output
from verimap.core.feedback import Feedback, retry_feedback
from verimap.core.node_context import content_key, plurality
from verimap.core.protocols import Executor, Verifier
from verimap.core.result import AttemptReport, NodeReport
from verimap.core.run_state import RunState
from verimap.planning.plan import Node


@dataclass(frozen=True)
class NodeAttempts:
    """Runs a node's attempts with the run's executor, verifier and settings."""

    executor: Executor
    verifier: Verifier
    config: RunConfig

    async def run(
        self, st: RunState, node: Node, inputs: dict, context: dict | None,
        input_types: dict[str, Any] | None = None, votes: int = 1,
    ) -> tuple[NodeReport, dict]:  # fmt: skip
        """The node's report (also kept in `st.reports`) and the inputs it ran on."""
        cfg = self.config
        rep = st.reports.setdefault(node.id, NodeReport(node_id=node.id))
        rep.iteration = st.iteration
        key = content_key(node, inputs, context)
        if key in st.cache:
            rep.status, rep.outputs = "reused", dict(st.cache[key])
            rep.unconfirmed = st.unconfirmed.get(key)
            st.emit(ev.NodeReused(outputs=rep.outputs), node.id)
            return rep, inputs
        rep.status = "pending"
        st.emit(ev.NodeStart(instruction=node.instruction, inputs=inputs), node.id)
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
                st.emit(ev.Retry(feedback=told), node.id, attempt)
            st.emit(ev.Attempt(), node.id, attempt)
            actx = st.step(node.id, attempt)
            out = await self.executor.execute(
                node, inputs, feedback, context, input_types,
                on_tool_call=partial(_tool_event, st, node.id, attempt),
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
                st.emit(ev.AttemptResult(passed=False, error=out.error, outputs=out.outputs,
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
                st.emit(ev.VfVerdict.of(v, verify_s), node.id, attempt)
            st.emit(ev.AttemptResult(passed=vr.passed, score=vr.score, outputs=out.outputs,
                                     reply=out.reply()), node.id, attempt)  # fmt: skip
            if vr.passed:
                passing.append(dict(out.outputs or {}))
                answer, count = plurality(passing)
                if count >= votes:
                    rep.status, rep.outputs = "verified", answer
                    rep.unconfirmed = st.unconfirmed[key] = vr.why_unconfirmed()
                    st.cache[key] = dict(rep.outputs)
                    st.emit(ev.NodeFinish(status=rep.status, outputs=rep.outputs), node.id)
                    return rep, inputs
                # Agreement still missing: the next attempt is an independent sample.
                st.emit(ev.Agreement(answers=passing, needed=votes), node.id, attempt)
                feedback = None
                continue
            failed += 1
            if (against := self.verifier.disputing.of(vr)) is not None:
                disputed.append(dict(out.outputs or {}))
                st.disputes.extend(against)
                if (why := self.verifier.disputing.settled(node, st.ctx)) is not None:
                    st.emit(ev.RetriesStopped(reason=why), node.id, attempt)
                    break
            feedback = retry_feedback(out.outputs, rep.attempts, fresh_turns, failures=vr.failures)
        if passing or disputed:
            rep.status = "unconfirmed"
            picked = None if passing else self.verifier.disputing.choose(node, disputed, st.ctx)
            rep.outputs = picked or plurality(passing or disputed)[0]
            if disputed and (tally := self.verifier.disputing.tally(st.ctx)) is not None:
                rep.unconfirmed = f"votes: {tally}"
            st.emit(ev.NodeFinish(status=rep.status, outputs=rep.outputs,
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
        st.emit(ev.NodeFinish(status=rep.status, outputs=rep.outputs), node.id)
        return rep, inputs


def _tool_event(
    st: RunState, node_id: str, attempt: int, tool: str, args: str, result: str,
    duration_s: float,
) -> None:  # fmt: skip
    st.emit(ev.ToolCall(tool=tool, arguments=clip(args, 2000), result=clip(result, 2000),
                        duration_s=duration_s), node_id, attempt)  # fmt: skip
