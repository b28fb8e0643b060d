"""What one run of the coordinator knows as it goes: its plans, node reports and reuse cache,
the counters that bound it, and the context each step reports through. The coordinator, the
plan run and a node's attempts all read and write it, so it lives apart from each."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from verimap.base import events as ev
from verimap.base.run_context import RunContext
from verimap.core.feedback import Feedback
from verimap.core.result import NodeReport
from verimap.planning.plan import Plan


class RunState:
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

    def step(self, node_id: str | None = None, attempt: int | None = None) -> RunContext:
        """The context of a step of the current iteration (and of a node's attempt, if given)."""
        return replace(self.ctx, iteration=self.iteration or None, node_id=node_id, attempt=attempt)

    def emit(
        self, event: ev.AnyEvent, node_id: str | None = None, attempt: int | None = None
    ) -> None:
        self.step(node_id, attempt).emit(event)
