"""Code is confirmed only when it behaves like an independently written solution.

Two or three docstring examples pass wrong code often on a small model. So the candidate runs on
many generated inputs beside reference solutions the judge model writes for the task alone
(fresh samples, each kept only if it passes the task's examples), and it is confirmed when it
does exactly what one of them does on every input (execution agreement, as CodeT and
AlphaCode's clustering use it). Two solutions written apart rarely share a mistake on every
input; one right and one wrong rarely agree on all of them. Inputs a reference rejects (raises
or runs out of time on) are not compared: generated inputs can fall outside what the task
describes, and what code does there is no one's mistake.

A disagreement first draws another reference while the run's budget allows (the first one may
be the wrong one), then goes back as one concrete input with both outputs, never the
reference's code: the executor decides from the task which is right. Code written after that
is no longer independent of the references where it was shown their output, and there the
independent solutions disagreed, so its agreement with them confirms nothing: it may be kept,
never verified. On the development draws, code that agreed only after a dispute was right once
in three (the executor copied references that were wrong). When retries run out, the answer
kept is the code of the largest group that behaves alike, an attempt's before a reference's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verimap.base.check_names import CODE_AGREEMENT
from verimap.base.events import CrossCheck
from verimap.base.iotypes import code_from_reply
from verimap.base.messages import ModelRequest, UserMessage
from verimap.base.model import ModelError
from verimap.base.plan import Node
from verimap.base.purpose import SolveCall
from verimap.base.sandbox import Outcome
from verimap.base.usage import JUDGE
from verimap.base.verdicts import ABSTAINED, VFVerdict
from verimap.base.verification import CheckTools, Strength, Submission, verdict
from verimap.checks.behaviour import (
    Behaviour,
    Result,
    SandboxFault,
    call_text,
    clusters,
    compared,
    entry_point,
    example_outputs,
    first_difference,
    generate_inputs,
    matches,
    run_behaviour,
    shown,
    with_task_imports,
    within_domain,
)
from verimap.checks.examples import RunExamples, code_output, run_examples
from verimap.sandbox.policy import task_examples

if TYPE_CHECKING:
    from verimap.base.run_context import RunContext

REFERENCE_PROMPT = (
    "{task}\n\nWrite the complete Python function `{entry}` this task asks for: its signature "
    "and body, with any imports and helper functions it needs. Reply with only the code, in one "
    "```python code block."
)


@dataclass
class Reference:
    """One solution the judge wrote: valid when it passes the task's examples and loads."""

    code: str | None
    valid: bool = False
    behaviour: Behaviour | None = None
    reason: str = ""


@dataclass
class Bench:
    """One run's inputs, references and the behaviour of every candidate run so far."""

    task: str = ""
    inputs: list[str] | None = None
    expected: dict[str, str] = field(default_factory=dict)
    references: list[Reference] = field(default_factory=list)
    seen: dict[str, Behaviour | None] = field(default_factory=dict)
    shown: set[int] = field(default_factory=set)  # inputs a dispute showed a reference's output on
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def valid(self) -> list[tuple[int, Reference]]:
        return [(i, r) for i, r in enumerate(self.references) if r.valid]


@dataclass
class Comparison:
    reference: int
    compared: int
    differs_at: int | None

    def agreed(self, min_inputs: int) -> bool:
        return self.differs_at is None and self.compared >= min_inputs


@dataclass
class CodeAgreement:
    """Final code is confirmed when it behaves like one of at most `max_references` reference
    solutions per run on every one of up to `max_inputs` generated inputs (at least `min_inputs`
    compared), each call limited to `call_timeout` seconds."""

    max_references: int = 2
    min_inputs: int = 3
    max_inputs: int = 24
    call_timeout: float = 2.0
    seed: int = 0
    name: str = CODE_AGREEMENT
    strength: Strength = "strong"
    disputes: bool = True

    def applies(self, sub: Submission) -> bool:
        return sub.final and code_output(sub) is not None and entry_point(sub.task) is not None

    def _bench(self, ctx: RunContext) -> Bench:
        return ctx.remember(self.name, Bench)

    async def check(self, sub: Submission, tools: CheckTools, ctx: RunContext) -> VFVerdict | None:
        out = code_output(sub)
        code = sub.outputs.get(out) if out is not None else None
        entry = entry_point(sub.task)
        if entry is None:
            return verdict(self, ABSTAINED, "the task names no function to compare")
        if not isinstance(code, str) or not code.strip():
            return verdict(self, "FAIL", "the node gave no code to compare")
        if tools.sandbox is None:
            return verdict(self, ABSTAINED, "no sandbox to run the code in")
        bench = self._bench(ctx)
        async with bench.lock:
            try:
                return await self._judge(bench, sub.task, entry, code, tools, ctx)
            except SandboxFault as e:  # a sandbox that cannot run is no verdict on the code
                return verdict(self, Outcome.SANDBOX_ERROR.value, str(e))

    async def _judge(
        self, bench: Bench, task: str, entry: str, code: str, tools: CheckTools, ctx: RunContext
    ) -> VFVerdict:
        inputs = await self._inputs(bench, task, entry)
        if not inputs:
            return verdict(self, ABSTAINED, f"no inputs could be generated for {entry}()")
        mine = await self._behaviour(bench, code, entry, tools)
        if mine is None:
            return verdict(
                self,
                "FAIL",
                f"your code could not be loaded and called as `{entry}`: it fails to run, or "
                "defines no function of that name",
            )
        done: dict[int, Comparison] = {}
        while True:
            for i, ref in bench.valid():
                if i not in done:
                    done[i] = self._compare(i, mine, ref, entry, inputs, ctx)
            agreed = any(c.agreed(self.min_inputs) for c in done.values())
            if agreed or not self._may_draw(bench, tools):
                break
            await self._draw(bench, task, entry, tools, ctx)  # no agreement yet: another opinion
        return self._verdict(list(done.values()), bench, mine, entry, inputs)

    async def _inputs(self, bench: Bench, task: str, entry: str) -> list[str]:
        """The run's inputs, generated once (off the event loop: hypothesis takes a second)."""
        if bench.inputs is None:
            bench.inputs = await asyncio.to_thread(
                generate_inputs, task, entry, limit=self.max_inputs, seed=self.seed
            )
            bench.expected = example_outputs(task, entry)
            bench.task = task
        return bench.inputs

    async def _behaviour(
        self, bench: Bench, code: str, entry: str, tools: CheckTools
    ) -> Behaviour | None:
        if code not in bench.seen:
            assert tools.sandbox is not None and bench.inputs is not None
            program = with_task_imports(bench.task, code)
            found = await run_behaviour(
                tools.sandbox, [program], entry, bench.inputs, timeout=self.call_timeout
            )
            bench.seen[code] = found[0]
        return bench.seen[code]

    def _may_draw(self, bench: Bench, tools: CheckTools) -> bool:
        return tools.model is not None and len(bench.references) < self.max_references

    async def _draw(
        self, bench: Bench, task: str, entry: str, tools: CheckTools, ctx: RunContext
    ) -> None:
        """Ask the judge for one more reference, and keep it if it passes the task's examples
        and runs on the inputs. Each costs one model call, counted even when it is no use."""
        assert tools.model is not None
        settings = tools.settings
        if bench.references and tools.retry_temperature is not None:
            settings = settings.replace(temperature=tools.retry_temperature)
        prompt = REFERENCE_PROMPT.format(task=task, entry=entry)
        request = ModelRequest(
            messages=[UserMessage(content=prompt)],
            settings=settings,
            role=JUDGE,
            purpose=SolveCall(kind="reference", task=task),
        )
        try:
            reply = (await ctx.model(tools.model).request(request)).content or ""
            ref = await self._vet(bench, code_from_reply(reply), task, entry, tools)
        except ModelError as e:
            ref = Reference(None, reason=f"the model failed: {e}"[:300])
        except SandboxFault as e:
            ref = Reference(None, reason=f"the sandbox failed: {e}"[:300])
        bench.references.append(ref)
        ctx.emit(
            CrossCheck(
                kind="code", reference=len(bench.references) - 1, valid=ref.valid, reason=ref.reason
            )
        )

    async def _vet(
        self, bench: Bench, code: str | None, task: str, entry: str, tools: CheckTools
    ) -> Reference:
        if code is None:
            return Reference(None, reason="the reply holds no function")
        code = with_task_imports(task, code)
        if task_examples(task):
            ran = await run_examples(RunExamples(), tools, task, code)
            if not ran.passed:
                return Reference(code, reason=f"it fails the task's examples: {ran.message}"[:300])
        behaviour = await self._behaviour(bench, code, entry, tools)
        if behaviour is None:
            return Reference(code, reason=f"it does not load or defines no {entry}()")
        return Reference(code, valid=True, behaviour=behaviour)

    def _compare(
        self,
        i: int,
        mine: Behaviour,
        ref: Reference,
        entry: str,
        inputs: list[str],
        ctx: RunContext,
    ) -> Comparison:
        assert ref.behaviour is not None
        ours, theirs = within_domain(mine, ref.behaviour)
        at = first_difference(ours, theirs)
        c = Comparison(i, compared(ours, theirs), at)
        differs = None if at is None else call_text(entry, inputs[at])
        ctx.emit(
            CrossCheck(
                kind="code",
                reference=i,
                agreed=c.agreed(self.min_inputs),
                compared=c.compared,
                input=differs,
            )
        )
        return c

    def _verdict(
        self, done: list[Comparison], bench: Bench, mine: Behaviour, entry: str, inputs: list[str]
    ) -> VFVerdict:
        agreeing = [c for c in done if c.agreed(self.min_inputs)]
        if agreeing and bench.shown:
            calls = ", ".join(call_text(entry, inputs[i]) for i in sorted(bench.shown))
            return verdict(
                self,
                ABSTAINED,
                "the code behaves like an independently written solution only after it was shown "
                f"that solution's output on {calls}, where the independent solutions disagreed: "
                "that agreement confirms nothing",
            )
        if agreeing:
            n = max(c.compared for c in agreeing)
            return verdict(
                self,
                "PASS",
                f"on {n} generated inputs your code behaves exactly like {len(agreeing)} of "
                f"{len(done)} independently written solutions",
            )
        if not done:
            why = [r.reason for r in bench.references] or ["no model to write one"]
            return verdict(
                self,
                ABSTAINED,
                "no independently written solution to compare with: " + "; ".join(why),
            )
        differing = [c for c in done if c.differs_at is not None]
        if len(differing) < len(done):
            n = min(c.compared for c in done)
            return verdict(self, ABSTAINED, f"only {n} inputs could be compared")
        assert differing[0].differs_at is not None
        bench.shown.add(differing[0].differs_at)  # the retry sees the reference's output there
        return verdict(self, "FAIL", self._dispute(differing[0], bench, mine, entry, inputs))

    def _dispute(
        self, c: Comparison, bench: Bench, mine: Behaviour, entry: str, inputs: list[str]
    ) -> str:
        assert c.differs_at is not None
        theirs = bench.references[c.reference].behaviour
        assert theirs is not None
        at = c.differs_at
        return (
            f"on {call_text(entry, inputs[at])} your code {self._shown(mine[at])}, an "
            f"independently written solution {self._shown(theirs[at])}; decide from the task's "
            "description which is right, and fix your code if it is yours"
        )

    def _shown(self, result: Result) -> str:
        return shown(result, self.call_timeout)

    def choose(
        self, node: Node, candidates: list[dict[str, Any]], ctx: RunContext
    ) -> dict[str, Any] | None:
        """The code of the largest group of solutions that behave alike: the attempts that did
        not contradict an example, and the valid references. An attempt leads its group, so a
        reference's code is chosen only when no attempt behaves like the largest group."""
        bench: Bench | None = ctx.memo.get(self.name)
        name = code_output(Submission(task="", node=node, inputs={}, outputs={}))
        if bench is None or name is None or not candidates:
            return None
        members: list[tuple[dict[str, Any] | None, str, Behaviour]] = []
        for c in candidates:
            code = c.get(name)
            b = bench.seen.get(code) if isinstance(code, str) else None
            if isinstance(code, str) and b is not None and self._fits_examples(bench, b):
                members.append((c, code, b))
        members += [(None, r.code, r.behaviour) for _, r in bench.valid() if r.code and r.behaviour]
        groups = clusters([b for _, _, b in members])
        if not groups:
            return None
        candidate, code, _ = members[groups[0][0]]
        return dict(candidate) if candidate is not None else {**candidates[0], name: code}

    def _fits_examples(self, bench: Bench, behaviour: Behaviour) -> bool:
        """Whether a behaviour gives what the task's examples expect, where they call the
        function directly."""
        inputs = bench.inputs or []
        return all(
            matches(behaviour[inputs.index(src)], want)
            for src, want in bench.expected.items()
            if src in inputs
        )
