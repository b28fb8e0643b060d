"""The scorers a custom benchmark chooses by name: exact, numeric, code-tests, judge.

Each reuses what a built-in benchmark scores with (GSM8K's number reader, HumanEval's sandboxed
tests, the verifier's judge), so a custom benchmark is scored as strictly as the built-in ones.
A scorer that cannot decide (no sandbox, no judge, a judge that fails) raises: the task is then
logged as an error and retried on resume, never counted wrong.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from verimap.base.protocols import Model, Sandbox
from verimap.evals.scoring import (
    CODE_NOTE,
    Score,
    answer_text,
    normalize_text,
    score_gsm8k,
    score_humaneval,
)
from verimap.evals.tasksets import EvalTask


@dataclass
class Scoring:
    """What a scorer may use besides the task and the answer."""

    sandbox: Sandbox | None = None
    judge: Model | None = None


ScoreFn = Callable[[EvalTask, Any, Scoring], Awaitable[Score]]

# What each scorer's tasks are planned as when `--domain` is not given.
DEFAULT_DOMAIN = {"exact": "qa", "numeric": "math", "code-tests": "programming", "judge": "qa"}
DOMAINS = ("math", "programming", "qa")

# Appended to each task's input so that the answer comes in the form its scorer reads.
PROMPT_NOTES = {
    "exact": "Give only the final answer (a word, a name, a number or a short phrase), with no "
    "explanation.",
    "numeric": "The final answer is a single number.",
    "code-tests": CODE_NOTE,
    "judge": "",
}


def targets(task: EvalTask) -> list[str]:
    """The answers a task accepts: its target, or each of a list of them."""
    return list(task.meta.get("targets") or [task.gold])


async def exact(task: EvalTask, answer: Any, ctx: Scoring) -> Score:
    """Equal after SQuAD-style normalisation (case, punctuation, articles, spaces)."""
    pred = answer_text(answer).strip()
    ok = any(normalize_text(pred) == normalize_text(t) for t in targets(task))
    return Score(correct=ok, predicted=pred, gold=task.gold)


async def numeric(task: EvalTask, answer: Any, ctx: Scoring) -> Score:
    """GSM8K's reader: the answer's final number, compared numerically."""
    return score_gsm8k(answer, task.gold)


async def code_tests(task: EvalTask, answer: Any, ctx: Scoring) -> Score:
    """HumanEval's pass@1: the task's tests run against the answer's code in the sandbox."""
    if ctx.sandbox is None:
        raise RuntimeError("the code-tests scorer needs a sandbox")
    return await score_humaneval(
        answer,
        prompt=task.meta.get("prompt", ""),
        test=task.meta["test"],
        entry_point=task.meta["entry_point"],
        sandbox=ctx.sandbox,
    )


JUDGE_CRITERION = (
    "The answer gives the same final answer as the reference answer {reference}: the same "
    "value, entity or conclusion. Wording, formatting and extra explanation do not matter; a "
    "different, missing, hedged or partly wrong final answer fails."
)


async def judge(task: EvalTask, answer: Any, ctx: Scoring) -> Score:
    """The run's judge model decides whether the answer agrees with the target, through the
    verifier's own judging of a natural-language criterion (free-text reasoning, then a
    verdict at temperature 0)."""
    from verimap.base.plan import LLMVF, Node
    from verimap.core.verifier import Verifier

    if ctx.judge is None:
        raise RuntimeError("the judge scorer needs the run's judge model")
    pred = answer_text(answer).strip()
    reference = " or ".join(repr(t) for t in targets(task))
    node = Node(id="score", instruction=task.prompt, outputs={"answer": "string"})
    vf = LLMVF(name="matches_reference", content=JUDGE_CRITERION.format(reference=reference))
    verdict = await Verifier(None, ctx.judge).run_judge(node, vf, {}, {"answer": pred})
    if verdict.outcome not in ("PASS", "FAIL"):
        raise RuntimeError(f"the judge could not score the answer: {verdict.message}")
    return Score(
        correct=verdict.outcome == "PASS",
        predicted=pred,
        gold=task.gold,
        detail=f"judge: {verdict.explanation}"[:500],
    )


SCORERS: dict[str, ScoreFn] = {
    "exact": exact,
    "numeric": numeric,
    "code-tests": code_tests,
    "judge": judge,
}


def user_scorer(fn: Callable[..., Any]) -> ScoreFn:
    """A scorer written by the user: `fn(task, answer)` with the answer as text, returning a
    bool or a `Score`, sync or async; one with a `sandbox` parameter gets the sandbox too."""
    wants_sandbox = "sandbox" in inspect.signature(fn).parameters

    async def score(task: EvalTask, answer: Any, ctx: Scoring) -> Score:
        text = answer_text(answer)
        out = fn(task, text, sandbox=ctx.sandbox) if wants_sandbox else fn(task, text)
        if inspect.isawaitable(out):
            out = await out
        if isinstance(out, Score):
            return out
        if isinstance(out, bool):
            return Score(correct=out, predicted=text.strip(), gold=task.gold)
        raise TypeError(
            f"the scorer {getattr(fn, '__name__', fn)!r} returned {type(out).__name__}; "
            "return a bool or a verimap.evals.scoring.Score"
        )

    return score
