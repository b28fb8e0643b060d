"""What a baseline asks the model, and how it reads the answer out of the reply, per kind of task.

The prompts are the plain ones a user would write, with no plan and no tools: a baseline
measures the model, so it must not be helped by the framework's own prompt engineering. The
answer is read the way the benchmarks' scorers read one (the final number as the GSM8K scorer
takes it, the function of a code block), so a baseline is never scored wrong for its format.
"""

from __future__ import annotations

import ast
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from verimap.base.iotypes import code_from_reply
from verimap.base.numbers import final_number
from verimap.checks.samples import REASONING_PROMPT

Kind = Literal["number", "code", "text"]
KINDS: tuple[Kind, ...] = ("number", "code", "text")
# A task domain (a benchmark's, an eval method's) as the kind of its answers.
DOMAIN_KINDS: dict[str, Kind] = {"math": "number", "programming": "code", "qa": "text"}

_CODE_REPLY = (
    "Reply with the complete function (signature and body, with any imports it needs) in one "
    "```python code block."
)
BARE_PROMPTS: dict[str, str] = {
    "number": REASONING_PROMPT,
    # A task in words that shows the function to complete (HumanEval as `verimap eval` asks it).
    "code": "{task}\n\n" + _CODE_REPLY,
    # A task that is only the function's stub (HumanEval's own prompt).
    "code_stub": "Complete this Python function. " + _CODE_REPLY + "\n\n```python\n{task}```",
    "text": "{task}\n\nGive your final answer in one line, as the last line of your reply.",
}
# A question answered from the model's own knowledge (closed book), and from passages retrieved
# for it, in the MultiHop-RAG paper's setup: the question, then the context; a word or entity
# for an answer, and the null answer when the context does not hold it.
_QA_CLOSED = (
    "Answer the question. The answer is a word or an entity (or Yes or No). If you do not know, "
    'answer "Insufficient information". Answer directly, without explanation.'
)
_QA_RAG = (
    "Below is a question and passages from news articles. Answer the question from the "
    "passages. The answer is a word or an entity (or Yes or No). If the passages do not hold "
    'the information, answer "Insufficient information". Answer directly, without explanation.'
)
QA_PROMPTS: dict[str, str] = {
    "closed": _QA_CLOSED + "\n\nQuestion: {question}\n\nAnswer:",
    "rag": _QA_RAG + "\n\nQuestion: {question}\n\nPassages:\n\n{passages}\n\n"
    "Question: {question}\nAnswer:",
}
# What a kind's answer is called in a run's error when a reply has none.
WHAT: dict[Kind, str] = {
    "number": "no final number",
    "code": "no ```python code block with a function",
    "text": "no answer line",
}
_LABEL = re.compile(r"^(?:final\s+)?answer\s*[:\-]\s*", re.I)


def kind_of(domain: str | None) -> Kind:
    """The answer kind of a task domain; no domain is math, as for the eval methods."""
    try:
        return DOMAIN_KINDS[domain or "math"]
    except KeyError:
        known = ", ".join(DOMAIN_KINDS)
        raise ValueError(f"no baseline answer kind for domain {domain!r}; known: {known}") from None


def is_code(text: str) -> bool:
    """Whether `text` is Python that defines a function: a bare stub, not a task in words."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in tree.body)


def bare_prompt(task: str, kind: Kind) -> str:
    """The one message a baseline sends for `task`."""
    if kind == "code" and is_code(task):
        return BARE_PROMPTS["code_stub"].format(task=task)
    return BARE_PROMPTS[kind].format(task=task)


def qa_prompt(question: str, passages: str | None = None) -> str:
    """The one message for a question, closed book or over retrieved `passages`."""
    if passages is None:
        return QA_PROMPTS["closed"].format(question=question)
    return QA_PROMPTS["rag"].format(question=question, passages=passages)


def as_number(text: str | float | None) -> int | float | str | None:
    """A normalised number as a value (an int when whole); a non-plain one (a boxed fraction)
    stays text, as the scorer reads it."""
    if text is None:
        return None
    try:
        d = Decimal(str(text))
    except InvalidOperation:
        return str(text)
    if not d.is_finite():
        return None
    return int(d) if d == d.to_integral_value() else float(d)


def code_answer(reply: str) -> str | None:
    """The function of a reply: its last code block that defines one, else the reply itself
    when it is only code (a model that forgot the fence)."""
    return code_from_reply(reply) or code_from_reply(f"```python\n{reply}\n```")


def text_answer(reply: str) -> str | None:
    """The reply's last non-empty line, without markup or an "Answer:" label."""
    lines = [ln.strip() for ln in reply.splitlines() if ln.strip()]
    if not lines:
        return None
    line = _LABEL.sub("", lines[-1].strip("*_ #>")).strip("*_ ")
    return line or None


def read_answer(reply: str, kind: Kind) -> Any:
    """The answer of one reply, or None when it has none."""
    if kind == "number":
        return as_number(final_number(reply))
    if kind == "code":
        return code_answer(reply)
    return text_answer(reply)
