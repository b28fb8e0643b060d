"""A program written for the whole task, run in the sandbox: the model names each quantity and
Python does the arithmetic (PAL, Gao et al. 2023).

Shared by the answer-agreement check, where programs are independent votes on a numeric
answer, and by the `program` baseline, which answers with one. A reasoning reply and a program
by the same model err in different places (a slipped sum in prose, a misread quantity in code),
which is what makes their agreement evidence.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from typing import Any

from verimap.base.iotypes import code_from_reply, python_blocks
from verimap.base.messages import (
    AssistantMessage,
    GenerationSettings,
    Message,
    ModelRequest,
    UserMessage,
)
from verimap.base.numbers import final_number
from verimap.base.protocols import Model, Sandbox
from verimap.base.purpose import SolveCall
from verimap.base.sandbox import Outcome
from verimap.base.usage import JUDGE

# Prompts that frame the same request differently, so that a second program is not the first
# one resampled: different framings make different mistakes. The first makes the model account
# for every sentence: a wrong answer every vote shares has most often dropped a fact
# (design/decisions.md, D22).
PROGRAM_PROMPTS = (
    "{task}\n\nWrite a Python function `solution()` for this task. Copy each sentence of the "
    "task as a comment, and under it the code that uses what it says; leave no fact of the task "
    "unused. End with `return` and the number the question asks for. Reply with only the code, "
    "in one ```python code block.",
    "{task}\n\nWrite a Python function `solution()` that returns the answer to this task as a "
    "number. Start the function with a comment that says exactly what is asked, compute it step "
    "by step, one line per step, and end with `return` and the answer. Reply with only the code, "
    "in one ```python code block.",
)
# A program that does not run goes back once with its error: a name used before it was set, or
# no function at all, are the common slips of a small model.
PROGRAM_TRIES = 2
PROGRAM_FIX = (
    "Running it failed: {error}\n\nFix the code. Reply with the whole corrected function "
    "`solution()` in one ```python code block."
)
# Printed last, so a program that prints on its own still ends on its answer.
RUN_SOLUTION = "\n\nprint(solution())\n"


# What a program keeps of its module: `solution()` and what it may need. Top-level calls are
# not part of the contract; a small model adds self-tests whose wrong `assert` would sink a
# right `solution()`, and prints that would run before it.
_KEPT = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Assign,
    ast.AnnAssign,
)


def solution_module(code: str) -> str:
    """`code` with only its imports, definitions and assignments at the top level (none that
    calls the module's own functions); unchanged when it does not parse (the run reports it)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    tree.body = [n for n in tree.body if isinstance(n, _KEPT) and not _calls_its_own(n, defined)]
    return ast.unparse(tree)


def _calls_its_own(node: ast.stmt, defined: set[str]) -> bool:
    """An assignment that runs the module's own functions at import (`ok = check_solution()`);
    other calls (`prices = list(range(5))`) may set up what `solution()` reads."""
    if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
        return False
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in defined
        for n in ast.walk(node.value)
    )


def number_in(text: str) -> float | None:
    """The number a text ends on, read as the GSM8K scorer reads it; None when it has none."""
    found = final_number(text)
    try:
        return float(found) if found is not None else None
    except ValueError:
        return None


@dataclass
class ProgramRun:
    """One program: the number it returned (None if it gave none), its reply and what running it
    said, for the trace."""

    answer: float | None
    reply: str
    tries: int
    printed: str = ""
    error: str | None = None
    sandbox_fault: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def trace(self) -> dict[str, Any]:
        out: dict[str, Any] = {"answer": self.answer, "reply": self.reply, "tries": self.tries}
        if self.error is not None:
            out.update(error=self.error, sandbox_fault=self.sandbox_fault)
        else:
            out["printed"] = self.printed
        return out


def runnable(reply: str) -> str | None:
    """The program a reply holds, ready to print its answer last; None when it holds none.

    Asked for `solution()`, a small model often writes the function's body without its header
    (a `return` at the top level), a script that prints the answer, or a function under another
    name, and asked to fix that writes the same shape again. Each is a program for the task all
    the same, so each is run as written rather than sent back."""
    code = code_from_reply(reply)
    if code is not None:
        tree = ast.parse(code)
        names = [
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef)
            and not (n.args.args or n.args.posonlyargs or n.args.kwonlyargs)
        ]
        if "solution" in names:
            return solution_module(code) + RUN_SOLUTION
        if len(names) == 1:  # `def total_cost():`, with or without its own call
            return solution_module(code) + f"\nsolution = {names[0]}" + RUN_SOLUTION
    for block in reversed(python_blocks(reply)):
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue
        if any(isinstance(n, ast.Return) for n in tree.body):  # a body without its header
            return "def solution():\n" + textwrap.indent(block, "    ") + RUN_SOLUTION
        if any(
            isinstance(n, ast.Call) and getattr(n.func, "id", None) == "print"
            for n in ast.walk(tree)
        ):
            return block  # a script: its last printed line is its answer
    return None


async def run_program(sandbox: Sandbox, reply: str, timeout: float) -> ProgramRun:
    """What the reply's program returns. A program that does not run gives no number."""
    program = runnable(reply)
    if program is None:
        return ProgramRun(None, reply, 1, error="the reply holds no function `solution()`")
    res = await sandbox.run_program(program, timeout=timeout)
    if res.outcome is not Outcome.PASS:
        return ProgramRun(
            None,
            reply,
            1,
            error=f"{res.outcome.value}: {res.message}"[:500],
            sandbox_fault=res.outcome is Outcome.SANDBOX_ERROR,
        )
    lines = res.stdout.strip().splitlines()
    printed = lines[-1].strip() if lines else ""
    answer = number_in(printed)
    if answer is None:  # it ran but gave no number (a function that forgot its return): fixable
        return ProgramRun(
            None,
            reply,
            1,
            printed=printed[:200],
            error=f"solution() returned {printed[:80]!r}, not a number: it must return the answer",
        )
    return ProgramRun(answer, reply, 1, printed=printed[:200])


async def write_program(
    model: Model,
    task: str,
    sandbox: Sandbox,
    settings: GenerationSettings,
    *,
    timeout: float = 10.0,
    framing: int = 0,
    role: str = JUDGE,
) -> ProgramRun:
    """Ask `model` for a program for `task` (in the `framing`-th wording) and run it; one that
    fails to run goes back once with its error. A sandbox fault is not the program's to fix."""
    prompt = PROGRAM_PROMPTS[framing % len(PROGRAM_PROMPTS)]
    messages: list[Message] = [UserMessage(content=prompt.format(task=task))]
    purpose = SolveCall(kind="program", framing=framing, task=task)
    run = ProgramRun(None, "", 0)
    for tries in range(1, PROGRAM_TRIES + 1):
        request = ModelRequest(messages=messages, settings=settings, role=role, purpose=purpose)
        text = (await model.request(request)).content or ""
        run = await run_program(sandbox, text, timeout)
        run.tries = tries
        if run.error is None or run.sandbox_fault:
            break
        messages += [
            AssistantMessage(content=text),
            UserMessage(content=PROGRAM_FIX.format(error=run.error)),
        ]
    return run
