"""A node step takes a job and gives reports; it changes nothing it was given."""

from typing import Any

import verimap
from verimap.base.execution import ExecutorOutput, Feedback
from verimap.base.run_context import RunContext
from verimap.base.verdicts import VerificationReport, VFVerdict
from verimap.base.verification import Disputing
from verimap.config import Loop, RunConfig
from verimap.core.node_attempts import NodeAttempts, NodeStep
from verimap.core.node_context import NodeJob
from verimap.core.result import AttemptReport, NodeReport

NODE = verimap.parse_plan(
    {
        "nodes": [
            {
                "id": "n",
                "instruction": "say ok",
                "inputs": ["USER_TASK"],
                "outputs": ["v"],
                "verification": [
                    {"name": "ok", "type": "python", "code": "assert outputs['v'] == 'ok'"}
                ],
            }
        ]
    }
).nodes[0]


class Executor:
    """Answers in turn, and keeps the feedback each attempt was given."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.told: list[Feedback | None] = []

    async def execute(
        self, node: Any, inputs: Any, feedback: Feedback | None, *a: Any, **kw: Any
    ) -> ExecutorOutput:
        self.told.append(feedback)
        return ExecutorOutput(outputs={"v": self.answers.pop(0)})


class Verifier:
    """Passes "ok" only, the sandbox failing to judge "boom"."""

    disputing = Disputing([])

    async def verify(self, node: Any, inputs: Any, outputs: dict, **kw: Any) -> VerificationReport:
        outcome = {"ok": "PASS", "boom": "SANDBOX_ERROR"}.get(outputs["v"], "FAIL")
        verdict = VFVerdict(name="ok", type="python", outcome=outcome, message="not ok")
        return VerificationReport(passed=outcome == "PASS", verdicts=[verdict])


async def steps(executor: Executor, job: NodeJob, max_retries: int) -> tuple[list[NodeStep], list]:
    events: list = []
    config = RunConfig(loop=Loop(max_retries=max_retries))
    attempts = NodeAttempts(executor, Verifier(), config)  # type: ignore[arg-type]
    ctx = RunContext(run_id="r", iteration=job.iteration, sink=events.append)
    return [s async for s in attempts.run(job, ctx)], events


EARLIER = NodeReport(
    node_id="n",
    status="failed",
    iteration=1,
    outputs={"v": "bad"},
    unconfirmed="kept",
    attempts=[AttemptReport(iteration=1, attempt=1, outputs={"v": "bad"})],
)


async def test_a_step_reports_what_it_did_and_leaves_the_report_it_was_given_alone():
    before = EARLIER.model_dump()
    carried = Feedback(previous_outputs={"v": "bad"})
    executor = Executor("boom", "ok")
    job = NodeJob(NODE, "task", 2, {"USER_TASK": "task"}, feedback=carried, earlier=EARLIER)
    reports, events = await steps(executor, job, max_retries=3)
    assert EARLIER.model_dump() == before
    assert executor.told[0] is carried and executor.told[1] is not None
    *going, last = reports
    assert {s.report.status for s in going} == {"pending"}
    assert all(s.report.outputs == {"v": "bad"} for s in going)  # undecided: as it stood
    done = last.report
    assert (done.status, done.outputs, done.iteration) == ("verified", {"v": "ok"}, 2)
    assert done.unconfirmed is not None and done.unconfirmed.startswith("only weak checks")
    assert [(a.iteration, a.attempt, a.passed) for a in done.attempts] == [
        (1, 1, False),
        (2, 1, False),
        (2, 2, True),
    ]
    assert last.retries == 2 and last.carry is None and len(last.attempts) == 2
    assert last.faults == ("sandbox error in VF 'ok' of node 'n': not ok",)
    assert [v.outcome for v in last.verdicts] == ["SANDBOX_ERROR", "PASS"]
    assert {(e.node_id, e.iteration) for e in events} == {("n", 2)}
    assert [e.type for e in events if e.type.startswith("node")] == ["node_start", "node_finish"]


async def test_a_failed_step_hands_back_the_feedback_its_next_run_starts_from():
    job = NodeJob(NODE, "task", 1, {"USER_TASK": "task"})
    reports, _ = await steps(Executor("bad", "worse"), job, max_retries=2)
    last = reports[-1]
    assert (last.report.status, last.report.outputs) == ("failed", {"v": "worse"})
    assert last.carry is not None and last.carry.previous_outputs == {"v": "worse"}
    assert [v.message for v in last.carry.failures] == ["not ok"]
    assert last.retries == 1 and last.report.unconfirmed is None
