"""Scorers: is a run's final answer right?

Each returns a `Score` carrying the extracted prediction, so a report can show
what was compared and a wrong extraction is visible rather than silent.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import string
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from verimap.base.iotypes import python_blocks
from verimap.base.numbers import final_number, normalize_number
from verimap.base.protocols import Sandbox
from verimap.base.sandbox import Outcome
from verimap.sandbox.worker.snippets import parse_code


class Score(BaseModel):
    correct: bool
    predicted: str
    gold: str
    detail: str = ""


_PREFERRED_KEYS = ("answer", "final_answer", "result", "code", "solution", "output")


def answer_text(answer: Any) -> str:
    """Flatten a run's answer (a string, a number, or a dict of outputs) into text."""
    if answer is None:
        return ""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, dict):
        if len(answer) == 1:
            return answer_text(next(iter(answer.values())))
        for k in _PREFERRED_KEYS:
            if k in answer:
                return answer_text(answer[k])
        return json.dumps(answer, ensure_ascii=False, default=str)
    if isinstance(answer, list | tuple):
        return "\n".join(answer_text(a) for a in answer)
    return str(answer)


# ---- GSM8K ---------------------------------------------------------------------------------


def extract_gsm8k(text: Any) -> str | None:
    """The final number of a free-text solution (see `numbers.final_number`)."""
    return final_number(answer_text(text))


def _math_verify_equal(gold: str, pred: str) -> bool | None:
    try:
        from math_verify import parse, verify
    except ImportError:
        return None
    try:
        return bool(verify(parse(gold), parse(pred)))
    except Exception:
        return None


def score_gsm8k(answer: Any, gold: str) -> Score:
    """Numeric equality after normalization; `math-verify` decides non-plain forms (fractions, LaTeX)."""
    text = answer_text(answer)
    pred = extract_gsm8k(text)
    g = normalize_number(gold) or gold.strip()
    if pred is None:
        return Score(correct=False, predicted="", gold=g, detail="no number in the answer")
    if normalize_number(pred) is not None:
        return Score(correct=Decimal(pred) == Decimal(g), predicted=pred, gold=g)
    eq = _math_verify_equal(g, pred)
    return Score(correct=bool(eq), predicted=pred, gold=g, detail="math-verify")


# ---- MultiHopRAG ---------------------------------------------------------------------------

_ANSWER_IS = re.compile(r'the answer to the question is\s*"([^"]*)"', re.I)
# Upstream's extraction is case-sensitive and takes the shortest quoted text.
_OFFICIAL_ANSWER_IS = re.compile(r'The answer to the question is "(.*?)"')
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NULL_SAYINGS = ("insufficient", "not enough information")
# What `score_detail` holds of upstream's verdict (the report reads it back).
OFFICIAL_MARK = "upstream_match="


def normalize_text(s: str) -> str:
    """SQuAD-style: lower case, no punctuation, no articles, single spaces."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def extract_multihop(text: str) -> str:
    m = _ANSWER_IS.search(text)
    return m.group(1) if m else text.strip()


def official_multihop_match(answer: str, gold: str) -> bool:
    """MultiHop-RAG's own verdict (`qa_evaluate.py`, which the paper's accuracy is): the
    quoted text after `The answer to the question is` when the answer has it, else the whole
    answer, is right when it shares any whitespace-separated word with the gold answer, both
    lower-cased. Lenient: "Sam Altman" is right for "Sam Bankman-Fried"."""
    m = _OFFICIAL_ANSWER_IS.search(answer)
    pred = m.group(1) if m else answer
    return bool(set(pred.lower().split()) & set(gold.lower().split()))


def score_multihoprag(answer: Any, gold: str) -> Score:
    """Whether the normalised gold answer is in the normalised prediction, read so that it
    cannot be gamed; upstream's verdict is kept in `detail` (`OFFICIAL_MARK`) beside it.

    Yes/no golds need the prediction's first yes/no word to agree (containment alone would
    count "yes or no" right for both); the null answer ("Insufficient information.") needs
    the prediction to say the information is insufficient (or "not enough information"); any
    other gold must appear in the prediction as whole words ("Google" is not in "Googled").
    """
    text = answer_text(answer)
    pred = extract_multihop(text)
    np_, ng = normalize_text(pred), normalize_text(gold)
    if ng in ("yes", "no"):
        words = [w for w in np_.split() if w in ("yes", "no")]
        ok = bool(words) and words[0] == ng
    elif ng.startswith("insufficient information"):
        ok = any(x in np_ for x in _NULL_SAYINGS)
    else:
        ok = bool(ng) and f" {ng} " in f" {np_} "
    official = official_multihop_match(text, gold)
    return Score(correct=ok, predicted=pred, gold=gold, detail=f"{OFFICIAL_MARK}{official}")


# ---- code tasks (HumanEval, MBPP, a custom benchmark's code-tests) -------------------------

# Ends a code task's prompt, so that the answer comes as the function its tests call.
CODE_NOTE = (
    "The final answer is the complete Python code of the function `{entry_point}` (with any "
    "imports it needs)."
)

_ASSERT = re.compile(r"^\s*assert\b(.*)$", re.M)
_CALL = re.compile(r"(?<![.\w])([A-Za-z_]\w*)\s*\(")


def entry_point_of(tests: str) -> str | None:
    """The first function the asserts of `tests` call that is no builtin (MBPP-style tests
    name no entry point): `f` in `assert abs(f(2) - 1.5) < 1e-9`."""
    for line in _ASSERT.findall(tests):
        for name in _CALL.findall(line):
            if not hasattr(builtins, name):
                return str(name)
    return None


def as_check(tests: Any) -> str:
    """HumanEval-style tests (`def check(candidate): ...`) as given; plain asserts (a string,
    or a list of them as MBPP writes them) wrapped into a `check(candidate)` that runs them
    with the candidate's functions in scope."""
    text = "\n".join(map(str, tests)) if isinstance(tests, list | tuple) else str(tests)
    if re.search(r"^def\s+check\s*\(", text, re.M):
        return text
    body = "\n".join(f"    {line}" for line in text.splitlines()) or "    pass"
    return f"def check(candidate):\n{body}\n"


def extract_code(text: Any, entry_point: str) -> str:
    """The code of a reply: the fenced block that defines `entry_point`, else the last block, else all."""
    text = answer_text(text)
    blocks = python_blocks(text)
    if not blocks:
        return text.strip("\n")
    defining = [b for b in blocks if re.search(rf"\bdef\s+{re.escape(entry_point)}\s*\(", b)]
    return (defining or blocks)[-1].strip("\n")


def build_candidate(answer: Any, prompt: str, entry_point: str) -> str:
    """A full module to test, as the official harness runs prompt + completion: a reply that
    writes the whole function runs after the prompt, so the helpers the prompt defines and the
    tests call (`encode_shift` beside `decode_shift`) are there, and its own definition replaces
    the prompt's stub; a reply that is a body completes the prompt."""
    code = extract_code(answer, entry_point)
    if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.M):
        whole = f"{prompt.rstrip()}\n\n\n{code}\n"
        if parse_code(ast, whole, "exec") is not None:
            return whole
        header = "\n".join(ln for ln in prompt.splitlines() if ln.startswith(("import ", "from ")))
        return f"{header}\n\n{code}\n" if header else code + "\n"
    return prompt + code + "\n"


async def score_humaneval(
    answer: Any,
    *,
    prompt: str,
    test: str,
    entry_point: str,
    sandbox: Sandbox,
    timeout: float = 20.0,
) -> Score:
    """pass@1: the hidden tests run in the sandbox's test runner, separate from the candidate."""
    if not extract_code(answer, entry_point).strip():
        return Score(correct=False, predicted="", gold=entry_point, detail="no code in the answer")
    candidate = build_candidate(answer, prompt, entry_point)
    res = await sandbox.run_tests(candidate, test, entry_point, timeout=timeout)
    detail = res.outcome.value + (f": {res.message}" if res.message else "")
    if res.outcome is Outcome.SANDBOX_ERROR:
        raise RuntimeError(f"sandbox failed while scoring: {res.message}")
    return Score(correct=res.passed, predicted=candidate, gold=entry_point, detail=detail[:500])
