"""Baselines that spend compute without checking anything: what verimap must beat at equal cost.

- `Bare`: one call, the plain prompt a user would write; the model alone.
- `SelfConsistency` (`sc`): k samples at temperature 0.7 and a majority vote (Wang et al. 2023).
  k is settable, so it can be matched to verimap's mean calls per task.
- `Program` (`program`): the model writes one program for the task and the sandbox runs it
  (PAL, Gao et al. 2023).
- `Rag` (`rag`): for a question over a corpus, the passages the search tool ranks first and the
  question in one call (the MultiHop-RAG paper's retrieve-then-read baseline, Tang & Yang 2024).

A question over a corpus (a QA task whose tools include a search that can give passages) is
asked as the MultiHop-RAG paper asks it: `bare` closed book, `rag` and `sc` over the same
retrieved passages, `sc` voting over the normalised answers of its samples.

Each is run as a coordinator is (a `Runner`: `run`, `run_sync`, the same `RunScope`): the config's budget
stops it, its model calls are metered per role and traced, a dead endpoint is reported as
infrastructure, and its trace starts and ends like a coordinator's. None of them checks its
answer, so none reports one as verified: a method with no checks has nothing to vouch for.

A reasoning reply that computes its number with a program of its own is read by running that
program in the sandbox, as verimap's sampled votes are (`verimap.checks.samples`): the "output"
a small model writes under its code is made up, and a baseline read by the made-up number
would be weaker than the same calls allow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from verimap.base import events as ev
from verimap.base.events import EventBus
from verimap.base.messages import GenerationSettings, ModelRequest, UserMessage
from verimap.base.protocols import Model, Sandbox
from verimap.base.purpose import SolveCall
from verimap.base.run_context import RunContext
from verimap.base.sandbox import SandboxUnavailable
from verimap.base.usage import EXECUTOR
from verimap.base.verdicts import clip
from verimap.checks.behaviour import (
    SandboxFault,
    clusters,
    entry_point,
    generate_inputs,
    run_behaviour,
    with_task_imports,
)
from verimap.checks.programs import ProgramRun, write_program
from verimap.checks.samples import reasoned_number
from verimap.config import RunConfig
from verimap.core.executor import EXECUTOR_SETTINGS
from verimap.core.result import ErrorKind, RunResult, RunStatus
from verimap.core.run_scope import Runner
from verimap.methods.answers import (
    KINDS,
    WHAT,
    Kind,
    as_number,
    bare_prompt,
    kind_of,
    qa_prompt,
    read_answer,
)
from verimap.methods.votes import Vote, by_clusters, by_code_text, by_text, by_value
from verimap.tools.registry import ToolRegistry

UNVERIFIED = "the method runs no verification"
# How much of each reply the trace keeps.
REPLY_CHARS = 3000
# Inputs the code samples of `sc` are run on, and the time limit of each call.
VOTE_INPUTS = 24
CALL_TIMEOUT_S = 2.0
# Passages `rag` and QA `sc` give the model: enough for the two to four articles a multi-hop
# question joins, and a prompt a small local model reads in well under a minute.
RAG_PASSAGES = 6


@runtime_checkable
class Retriever(Protocol):
    """A search tool that can also hand over passages: what makes a task a question over a
    corpus for the baselines (`verimap.evals.tools.SearchTool`)."""

    def question(self, task: str) -> str:
        """The task's question, without instructions about tools or the answer's form."""
        ...

    def passages(self, task: str, k: int) -> str:
        """The `k` passages that best match the task's question, as text for a prompt."""
        ...


def retriever_of(tools: ToolRegistry | None) -> Retriever | None:
    """The registry's search tool when it can give passages, else None."""
    if tools is None or "search" not in tools:
        return None
    tool = tools.get("search")
    return tool if isinstance(tool, Retriever) else None


class Baseline(Runner):
    """What the baselines share: their construction, the run's lifetime, one plain call, and
    the result. A subclass says how it answers a task in `_solve`."""

    name: ClassVar[str]

    def __init__(
        self,
        model: Model,
        sandbox: Sandbox | None = None,
        *,
        kind: Kind,
        config: RunConfig | None = None,
        events: EventBus | None = None,
        trace_dir: str | Path | None = None,
        policies: list[dict[str, Any]] | None = None,
        tools: ToolRegistry | None = None,
    ):
        """`tools`: the task's tools; a search among them that gives passages makes a text
        task a question over a corpus (see the module docstring)."""
        if kind not in KINDS:
            raise ValueError(f"unknown answer kind {kind!r}; known: {', '.join(KINDS)}")
        self.model = model
        self.sandbox = sandbox
        self.kind: Kind = kind
        self.retriever = retriever_of(tools) if kind == "text" else None
        super().__init__(config, events, trace_dir, policies)
        # An attempt's settings, as verimap's executor gets them from the same config.
        self.settings = EXECUTOR_SETTINGS.replace(
            temperature=self.config.sampling.temperature,
            top_p=self.config.sampling.top_p,
            seed=self.config.sampling.seed,
        )

    def parameters(self) -> dict[str, Any]:
        """What the run's first event records besides the config."""
        return {"kind": self.kind, "temperature": self.settings.temperature}

    async def run(
        self, task: str, *, run_id: str | None = None, trace_path: str | Path | None = None
    ) -> RunResult:
        scope = self.scope(task, run_id, trace_path)
        return await scope.run(
            partial(self._solve, task, scope.ctx),
            partial(self._result, scope.run_id, task),
            start={"method": self.name, "parameters": self.parameters()},
        )

    async def _solve(self, task: str, ctx: RunContext) -> RunResult:
        raise NotImplementedError

    def _prompt(self, task: str, passages: str | None = None) -> str:
        """The plain prompt; a question over a corpus closed book, or over `passages`."""
        if self.retriever is None:
            return bare_prompt(task, self.kind)
        return qa_prompt(self.retriever.question(task), passages)

    async def _passages(self, task: str) -> str:
        """The passages retrieved for the task's question (off the event loop: it embeds)."""
        if self.retriever is None:
            raise ValueError(f"{self.name} needs a search tool over a corpus to retrieve from")
        return await asyncio.to_thread(self.retriever.passages, task, RAG_PASSAGES)

    async def _ask(
        self, ctx: RunContext, task: str, settings: GenerationSettings, passages: str | None = None
    ) -> str:
        """One plain call for `task` (over `passages` when given), metered as an executor
        call of the run."""
        request = ModelRequest(
            messages=[UserMessage(content=self._prompt(task, passages))],
            settings=settings,
            role=EXECUTOR,
            purpose=SolveCall(kind="sample", task=task),
        )
        return (await ctx.model(self.model).request(request)).content or ""

    async def _read(self, reply: str) -> tuple[Any, ProgramRun | None]:
        """The answer of one reply and, for a number a program in it computes, that program's
        run. A sandbox that cannot run it is infrastructure, not a wrong answer."""
        if self.kind != "number":
            return read_answer(reply, self.kind), None
        timeout = self.config.verify.vf_timeout_s
        number, run = await reasoned_number(reply, self.sandbox, timeout=timeout)
        if run is None:
            return read_answer(reply, self.kind), None
        if run.sandbox_fault:
            raise SandboxUnavailable(f"the sandbox could not run a reply's program: {run.error}")
        return as_number(number), run

    def _result(
        self,
        run_id: str,
        task: str,
        status: RunStatus,
        *,
        answer: Any = None,
        error: str | None = None,
        error_kind: ErrorKind | None = None,
        confidence: float | None = None,
    ) -> RunResult:
        return RunResult(
            run_id=run_id,
            task=task,
            status=status,
            final_node=self.name,
            final_output=None if answer is None else {"answer": answer},
            error=error,
            error_kind=error_kind,
            verified=False,
            unverified_reason=UNVERIFIED,
            confidence=confidence,
        )

    def _answered(
        self, ctx: RunContext, task: str, answer: Any, confidence: float | None = None
    ) -> RunResult:
        if answer is None:
            return self._result(ctx.run_id, task, "failed", error=f"{WHAT[self.kind]} in the reply")
        return self._result(ctx.run_id, task, "success", answer=answer, confidence=confidence)


def _replies(
    ctx: RunContext,
    replies: list[str],
    answers: list[Any],
    program: dict[str, Any] | None = None,
    ran: list[ProgramRun | None] | None = None,
) -> None:
    shown = [clip(a, REPLY_CHARS) if isinstance(a, str) else a for a in answers]
    cut = [clip(r, REPLY_CHARS) for r in replies]
    extra: dict[str, Any] = {}
    # Only the program baseline's replies name a program, and only replies that held one say
    # how it ran: the others' lines have no such key.
    if program is not None:
        extra["program"] = program
    if ran and any(r is not None for r in ran):
        extra["ran"] = [None if r is None else _without_reply(r) for r in ran]
    ctx.emit(ev.Replies(replies=cut, answers=shown, **extra))


def _without_reply(run: ProgramRun) -> dict[str, Any]:
    """How a program ran, without the reply it came from (the trace shows that once)."""
    return {k: v for k, v in run.trace().items() if k != "reply"}


class Bare(Baseline):
    """One call; the answer is the reply's final number (what its program prints, when it
    computes it with one), its code block, or its last line."""

    name = "bare"

    async def _solve(self, task: str, ctx: RunContext) -> RunResult:
        reply = await self._ask(ctx, task, self.settings)
        answer, run = await self._read(reply)
        _replies(ctx, [reply], [answer], ran=[run])
        if answer is None and run is not None:
            error = f"the reply's program gave no number: {run.error or run.printed!r}"
            return self._result(ctx.run_id, task, "failed", error=error)
        return self._answered(ctx, task, answer)


class SelfConsistency(Baseline):
    """`samples` independent bare calls at `temperature`, and their majority answer by the
    rules of `verimap.methods.votes`.

    Samples are drawn one after another: the budget is checked before each call, so a run
    never starts one the budget has no room for, and "the earliest" of tied answers is well
    defined. The vote's share of the samples is the result's `confidence`. Code samples are
    grouped by their outputs on inputs generated from the task, run in the sandbox."""

    name = "sc"

    def __init__(self, *args: Any, samples: int = 4, temperature: float = 0.7, **kw: Any):
        super().__init__(*args, **kw)
        if samples < 1:
            raise ValueError(f"self-consistency needs at least one sample, got {samples}")
        self.samples = samples
        self.settings = self.settings.replace(temperature=temperature)

    def parameters(self) -> dict[str, Any]:
        return {**super().parameters(), "samples": self.samples}

    async def _solve(self, task: str, ctx: RunContext) -> RunResult:
        replies: list[str] = []
        answers: list[Any] = []
        runs: list[ProgramRun | None] = []
        passages = await self._passages(task) if self.retriever is not None else None
        try:
            for _ in range(self.samples):
                replies.append(await self._ask(ctx, task, self.settings, passages))
                answer, run = await self._read(replies[-1])
                answers.append(answer)
                runs.append(run)
        finally:
            unread = len(replies) - len(answers)  # a reply the sandbox could not read
            _replies(ctx, replies, answers + [None] * unread, ran=runs + [None] * unread)
        vote = await self._vote(task, answers)
        ctx.emit(ev.Vote(**vote.trace()))
        if vote.winner is None:
            error = f"none of the {self.samples} samples gave an answer ({WHAT[self.kind]})"
            return self._result(ctx.run_id, task, "failed", error=error)
        return self._answered(ctx, task, vote.winner.answer, vote.share)

    async def _vote(self, task: str, answers: list[Any]) -> Vote:
        if self.kind == "number":
            return by_value(answers)
        if self.kind == "text":
            return by_text(answers)
        return await self._vote_code(task, answers)

    async def _vote_code(self, task: str, codes: list[str | None]) -> Vote:
        """By behaviour on inputs drawn from the task; by code text when there are none, or
        when no sample loads."""
        entry = entry_point(task)
        written = [i for i, c in enumerate(codes) if c is not None]
        if entry is None or not written or self.sandbox is None:
            return by_code_text(codes)
        # Off the event loop: drawing inputs with hypothesis takes a second.
        inputs = await asyncio.to_thread(generate_inputs, task, entry, limit=VOTE_INPUTS)
        if not inputs:
            return by_code_text(codes)
        programs = [with_task_imports(task, codes[i] or "") for i in written]
        try:
            found = await run_behaviour(
                self.sandbox, programs, entry, inputs, timeout=CALL_TIMEOUT_S
            )
        except SandboxFault as e:
            raise SandboxUnavailable(f"the sandbox could not run the samples: {e}") from e
        behaviours: list[Any] = [None] * len(codes)
        for i, b in zip(written, found, strict=True):
            behaviours[i] = b
        groups = clusters(behaviours)
        return by_clusters(codes, groups) if groups else by_code_text(codes)


class Program(Bare):
    """For numbers, one program for the whole task run in the sandbox, with one fix when it
    fails to run; the number it returns is the answer. For code and text it is `Bare`: a
    function is already a program, and a text answer has no program to compute it."""

    name = "program"

    async def _solve(self, task: str, ctx: RunContext) -> RunResult:
        if self.kind != "number":
            return await super()._solve(task, ctx)
        if self.sandbox is None:
            raise SandboxUnavailable("the program baseline needs a sandbox to run its program")
        run = await write_program(
            ctx.model(self.model),
            task,
            self.sandbox,
            self.settings,
            timeout=self.config.verify.vf_timeout_s,
            role=EXECUTOR,
        )
        answer = as_number(run.answer)
        _replies(ctx, [run.reply], [answer], program=_without_reply(run))
        if run.sandbox_fault:
            error = f"the sandbox could not run the program: {run.error}"
            return self._result(
                ctx.run_id, task, "failed", error=error, error_kind="infrastructure"
            )
        if answer is None:
            why = run.error or f"it printed {run.printed!r}, no number"
            return self._result(
                ctx.run_id, task, "failed", error=f"the program gave no number: {why}"
            )
        return self._result(ctx.run_id, task, "success", answer=answer)


class Rag(Baseline):
    """The `RAG_PASSAGES` passages the search ranks first for the question, and the question,
    in one call; the answer is the reply's last line. Only for questions over a corpus."""

    name = "rag"

    def parameters(self) -> dict[str, Any]:
        return {**super().parameters(), "passages": RAG_PASSAGES}

    async def _solve(self, task: str, ctx: RunContext) -> RunResult:
        reply = await self._ask(ctx, task, self.settings, await self._passages(task))
        answer = read_answer(reply, self.kind)
        _replies(ctx, [reply], [answer])
        return self._answered(ctx, task, answer)


BASELINES: Mapping[str, type[Baseline]] = {
    Bare.name: Bare,
    SelfConsistency.name: SelfConsistency,
    Program.name: Program,
    Rag.name: Rag,
}


def baseline(
    name: str,
    models: Mapping[str, Model],
    sandbox: Sandbox | None,
    *,
    domain: str | None,
    config: RunConfig | None = None,
    events: EventBus | None = None,
    samples: int | None = None,
    trace_dir: str | Path | None = None,
    policies: list[dict[str, Any]] | None = None,
    tools: ToolRegistry | None = None,
) -> Baseline:
    """The baseline `name` ("bare", "sc", "program" or "rag") on the executor model, for tasks
    of `domain` (math: numbers, programming: code, qa: text; None: math). `samples` is sc's k
    (None: its default); the other baselines take one sample and ignore it. `tools`: the task's
    tools, whose search makes a QA task a question over a corpus; `rag` needs one."""
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
    if EXECUTOR not in models:
        raise ValueError(f"the {name} baseline needs an {EXECUTOR!r} model")
    kind = kind_of(domain)
    if name == Rag.name and (kind != "text" or retriever_of(tools) is None):
        raise ValueError(
            "the rag baseline answers questions over a corpus: it needs a QA benchmark whose "
            "tools include a search (e.g. multihoprag)"
        )
    kw: dict[str, Any] = dict(
        kind=kind,
        config=config,
        events=events,
        trace_dir=trace_dir,
        policies=policies,
        tools=tools,
    )
    if name == SelfConsistency.name and samples is not None:
        kw["samples"] = samples
    return BASELINES[name](models[EXECUTOR], sandbox, **kw)
