"""A verimap answer as the text a benchmark's own scorer reads from a model's completion.

Inspect tasks score `state.output.completion` as if a model had written it, so the answer must
have the form their scorers extract:

- math: the number alone (inspect_evals' GSM8K scores with `match(numeric=True)`, the last
  number of the completion);
- code: a module whose first statement is the task's function (inspect_evals' HumanEval keeps
  what follows the first `:\\n    ` of the completion, the function's body, and runs it after
  the prompt and before the tests). The function is re-emitted by `ast.unparse`, so its body is
  indented by four spaces whatever the model wrote; the other statements (imports, helpers)
  follow it, and are in place before the tests call anything.
"""

from __future__ import annotations

import ast
from typing import Any

from verimap.base.numbers import final_number
from verimap.evals.scoring import answer_text, extract_code


def completion(answer: Any, domain: str | None, entry_point: str | None = None) -> str:
    """The completion for `answer` in `domain` ("math", "programming", else the text as is)."""
    text = answer_text(answer)
    if domain == "programming" or entry_point:
        code = extract_code(text, entry_point) if entry_point else text
        return function_first(code, entry_point) if entry_point else code
    if domain == "math":
        return final_number(text) or text.strip()
    return text


def function_first(code: str, entry_point: str) -> str:
    """`code` with the top-level function `entry_point` moved first; as it was when it does not
    parse or defines no such function."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    fns = [
        s
        for s in tree.body
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == entry_point
    ]
    if not fns:
        return code
    rest = [s for s in tree.body if all(s is not f for f in fns)]
    # The last definition is the one that counts; earlier ones would override it if kept.
    return ast.unparse(ast.Module(body=[fns[-1], *rest], type_ignores=[])) + "\n"
