"""One node's attempts: execute, verify, and retry with the failure's feedback until the node
verifies (its answer agreed on, when agreement asks for votes), or its retries are spent.

A node ends verified, unconfirmed (its VFs passed but its answers never agreed, or a check
disputed every one), failed (its feedback is carried to the node's next run), or, in the
one-pass methods, fail-accepted (its last outputs flow on). Every step is an event.

A node step takes a `NodeJob` and gives `NodeStep` reports; it changes nothing of the run's:
the coordinator folds each report into the run's state.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from verimap.base import events as ev
from verimap.base.execution import TEXT_OUTPUT, Feedback
from verimap.base.plan import single_code_output
from verimap.base.roles import Executor, Verifier
from verimap.base.run_context import RunContext
from verimap.base.sandbox import Outcome
from verimap.base.verdicts import VFVerdict, clip
from verimap.config import RunConfig
from verimap.core.feedback import retry_feedback
from verimap.core.node_context import NodeJob
from verimap.core.result import AttemptReport, NodeReport
from verimap.core.run_end import plurality


@dataclass(frozen=True)
class NodeStep:
    """A node step's report so far: the node's report (its earlier attempts included), and
    what this step adds to the run: `retries` made, `faults` (verdicts the sandbox could not
    give), `disputes` (checks that disputed an answer), and `carry` (the feedback a failed
    node's next run starts from). The last report a step gives is its result."""

    report: NodeReport
    retries: int = 0
    faults: tuple[str, ...] = ()
    disputes: tuple[str, ...] = ()
    carry: Feedback | None = None
    attempts: tuple[AttemptReport, ...] = ()

    @property
    def verdicts(self) -> list[VFVerdict]:
        """The VF verdicts of this step's attempts, in order."""
        return [v for a in self.attempts for v in a.verdicts]


@dataclass(frozen=True)
class NodeAttempts:
    """Runs a node's attempts with the run's executor, verifier and settings."""

    executor: Executor
    verifier: Verifier
    config: RunConfig

    async def run(self, job: NodeJob, ctx: RunContext) -> AsyncIterator[NodeStep]:
        """The node's reports as its run goes: one before each model step (so a run cut off
        mid-way keeps what was done) and the result last. `ctx` is the iteration's context."""
        cfg, node, inputs = self.config, job.node, job.inputs
        earlier = job.earlier or NodeReport(node_id=node.id)
        base = earlier.model_copy(update={"iteration": job.iteration, "status": "pending"})
        nctx = ctx.for_attempt(node.id, None)
        nctx.emit(ev.NodeStart(instruction=node.instruction, inputs=inputs))
        feedback = job.feedback
        mine: list[AttemptReport] = []
        retries = 0
        faults: list[str] = []
        disputes: list[str] = []

        def step(carry: Feedback | None = None, **decided: Any) -> NodeStep:
            report = base.model_copy(update={"attempts": [*earlier.attempts, *mine], **decided})
            return NodeStep(report, retries, tuple(faults), tuple(disputes), carry, tuple(mine))

        last_outputs: dict[str, Any] | None = None
        passing: list[dict[str, Any]] = []
        disputed: list[dict[str, Any]] = []  # passed every VF, but a check disputed it
        attempt = failed = 0
        fresh_turns = cfg.execution.fresh_code_retries and single_code_output(node)
        # Attempts that fail count against max_retries; agreement adds up to votes - 1 more.
        while failed < cfg.loop.max_retries and attempt < cfg.loop.max_retries + job.votes - 1:
            attempt += 1
            actx = ctx.for_attempt(node.id, attempt)
            if attempt > 1 or feedback is not None:  # carried over: it goes on from a failure
                retries += 1
                told = feedback.model_dump(mode="json") if feedback else None
                actx.emit(ev.Retry(feedback=told))
            actx.emit(ev.Attempt())
            yield step()
            out = await self.executor.execute(
                node,
                inputs,
                feedback,
                job.context,
                job.input_types,
                on_tool_call=partial(_tool_event, actx),
                sample=bool(passing) and feedback is None,
                ctx=actx,
                final=job.final,
            )
            rec = AttemptReport(
                iteration=job.iteration,
                attempt=attempt,
                outputs=out.outputs,
                steps=out.steps,
                error=None if out.ok else out.error,
            )
            mine.append(rec)
            if not out.ok:
                failed += 1
                actx.emit(
                    ev.AttemptResult(
                        passed=False, error=out.error, outputs=out.outputs, reply=out.reply()
                    )
                )
                feedback = retry_feedback(
                    out.outputs, [*earlier.attempts, *mine], fresh_turns, error=out.error
                )
                continue
            last_outputs = out.outputs
            yield step()
            verify_start = time.monotonic()
            vr = await self.verifier.verify(
                node,
                inputs,
                out.outputs or {},
                ctx=actx,
                task=job.task,
                transcript=out.messages,
                final=job.final,
            )
            verify_s = time.monotonic() - verify_start
            mine[-1] = rec.model_copy(update={"verdicts": vr.verdicts, "passed": vr.passed})
            faults.extend(
                f"sandbox error in VF {v.name!r} of node {node.id!r}: {v.message}"
                for v in vr.verdicts
                if v.outcome == Outcome.SANDBOX_ERROR
            )
            for v in vr.verdicts:
                # The VFs of an attempt run together: each verdict carries the step's duration.
                actx.emit(ev.VfVerdict.of(v, verify_s))
            actx.emit(
                ev.AttemptResult(
                    passed=vr.passed, score=vr.score, outputs=out.outputs, reply=out.reply()
                )
            )
            if vr.passed:
                passing.append(dict(out.outputs or {}))
                answer, count = plurality(passing)
                if count >= job.votes:
                    done = step(status="verified", outputs=answer, unconfirmed=vr.why_unconfirmed())
                    nctx.emit(ev.NodeFinish(status="verified", outputs=answer))
                    yield done
                    return
                # Agreement still missing: the next attempt is an independent sample.
                actx.emit(ev.Agreement(answers=passing, needed=job.votes))
                feedback = None
                continue
            failed += 1
            if (against := self.verifier.disputing.of(vr)) is not None:
                disputed.append(dict(out.outputs or {}))
                disputes.extend(against)
                if (why := self.verifier.disputing.settled(node, ctx)) is not None:
                    actx.emit(ev.RetriesStopped(reason=why))
                    break
            feedback = retry_feedback(
                out.outputs, [*earlier.attempts, *mine], fresh_turns, failures=vr.failures
            )
        if passing or disputed:
            picked = None if passing else self.verifier.disputing.choose(node, disputed, ctx)
            outputs = picked or plurality(passing or disputed)[0]
            tally = self.verifier.disputing.tally(ctx) if disputed else None
            votes: dict[str, Any] = {} if tally is None else {"unconfirmed": f"votes: {tally}"}
            nctx.emit(
                ev.NodeFinish(status="unconfirmed", outputs=outputs, answers=passing or disputed)
            )
            yield step(status="unconfirmed", outputs=outputs, **votes)
            return
        if cfg.loop.fail_accepted:
            names = list(node.outputs) if cfg.execution.structured_io else [TEXT_OUTPUT]
            outputs = dict(last_outputs) if last_outputs else dict.fromkeys(names)
            for o in names:
                outputs.setdefault(o, None)
            nctx.emit(ev.NodeFinish(status="fail-accepted", outputs=outputs))
            yield step(status="fail-accepted", outputs=outputs)
            return
        nctx.emit(ev.NodeFinish(status="failed", outputs=last_outputs))
        yield step(feedback, status="failed", outputs=last_outputs)


def _tool_event(actx: RunContext, tool: str, args: str, result: str, duration_s: float) -> None:
    actx.emit(
        ev.ToolCall(
            tool=tool, arguments=clip(args, 2000), result=clip(result, 2000), duration_s=duration_s
        )
    )
