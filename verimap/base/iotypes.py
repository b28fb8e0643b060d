"""Types of a node's named outputs: short names for the common cases, or a JSON Schema fragment.

Untyped outputs let a small executor answer `{"price": {"value": 17}}` on every attempt and
spend its retries on a VF that rightly wants a number. A declared type does three jobs: the
executor's final call is grammar-constrained to it, the answer is validated and coerced before
any VF runs (so a VF never sees the wrong shape), and the vacuity check knows which "null" and
which absurd value to probe a VF with.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from typing import Annotated, Any

import jsonschema
from pydantic import BeforeValidator, Field, StrictBool, TypeAdapter, ValidationError

from verimap.base.errors import VerimapError

TypeSpec = str | dict[str, Any]

ANY = "any"
CODE = "code"
# An output named like source code ("code", "solution_code", "program"): a plan from before
# types, or a `string` the planner meant as code, is read as code.
SOURCE_NAMES = re.compile(r"(^|_)(code|source|program|script|implementation|solution)($|_)", re.I)


def may_hold_code(spec: TypeSpec, name: str) -> bool:
    """Whether an output of type `spec` named `name` can be source code a VF may load."""
    spec = canonical(spec)
    return spec == CODE or (spec in (ANY, "string") and bool(SOURCE_NAMES.search(name)))


# Short name -> the JSON Schema the executor's final call is constrained to.
TYPE_SCHEMAS: dict[str, dict[str, Any]] = {
    ANY: {},
    "number": {"type": "number"},
    "integer": {"type": "integer"},
    "string": {"type": "string"},
    "boolean": {"type": "boolean"},
    "object": {"type": "object"},
    "list": {"type": "array"},
    "list[number]": {"type": "array", "items": {"type": "number"}},
    "list[integer]": {"type": "array", "items": {"type": "integer"}},
    "list[string]": {"type": "array", "items": {"type": "string"}},
    "list[boolean]": {"type": "array", "items": {"type": "boolean"}},
    CODE: {"type": "string"},
}
TYPE_NAMES: tuple[str, ...] = tuple(TYPE_SCHEMAS)
_ALIASES = {
    "float": "number",
    "int": "integer",
    "str": "string",
    "text": "string",
    "bool": "boolean",
    "dict": "object",
    "array": "list",
    "list[float]": "list[number]",
    "list[int]": "list[integer]",
    "list[str]": "list[string]",
    "list[bool]": "list[boolean]",
    "python": CODE,
}


class TypeMismatch(VerimapError, ValueError):
    """An output value that does not fit its declared type; the message is what a retry sees."""


def canonical(spec: TypeSpec) -> TypeSpec:
    """The spelling plans are stored in: `int` -> `integer`, `List[Str]` -> `list[string]`."""
    if isinstance(spec, str):
        name = re.sub(r"\s+", "", spec).lower()
        return _ALIASES.get(name, name)
    return spec


def type_problem(spec: Any) -> str | None:
    """Why `spec` is not a type, or None: a known short name or a valid JSON Schema object."""
    if isinstance(spec, str):
        if canonical(spec) in TYPE_SCHEMAS:
            return None
        return (
            f"unknown type {spec!r} (use one of: {', '.join(TYPE_NAMES)}, or a JSON Schema object)"
        )
    if isinstance(spec, dict):
        try:
            jsonschema.Draft202012Validator.check_schema(spec)
        except jsonschema.SchemaError as e:
            return f"invalid JSON Schema: {e.message}"
        return None
    return f"a type is a name or a JSON Schema object, got {type(spec).__name__}"


def json_schema(spec: TypeSpec) -> dict[str, Any]:
    spec = canonical(spec)
    return dict(TYPE_SCHEMAS[spec]) if isinstance(spec, str) else spec


def label(spec: TypeSpec) -> str:
    """A short human form for prompts: `number`, or the schema's JSON."""
    spec = canonical(spec)
    return spec if isinstance(spec, str) else json.dumps(spec, separators=(",", ":"))


def describe(value: Any, limit: int = 80) -> str:
    """`object {"value": 17}`: the JSON kind of a value and a short rendering of it."""
    kind = (
        "null"
        if value is None
        else "boolean"
        if isinstance(value, bool)
        else "integer"
        if isinstance(value, int)
        else "number"
        if isinstance(value, float)
        else "string"
        if isinstance(value, str)
        else "list"
        if isinstance(value, list | tuple)
        else "object"
        if isinstance(value, dict)
        else type(value).__name__
    )
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{kind} {text}"


_NUMBER_TEXT = re.compile(r"^[-+]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?([eE][-+]?\d+)?$")
_DECORATION = re.compile(r"^\s*([-+]?)\s*[$€£]?\s*(.*?)\s*(%|dollars?|euros?|usd)?\s*$", re.I)


def _number_text(value: Any) -> Any:
    """Numbers written as text, as models do: "17", " $1,234.50 ", "-3e2". Anything else (a
    bool, an object, a sentence) is left for the validator to refuse."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if not isinstance(value, str):
        return value
    m = _DECORATION.match(value)
    if not m:
        return value
    body = m.group(2)
    if not body or not _NUMBER_TEXT.match(body) or not any(c.isdigit() for c in body):
        return value
    text = m.group(1) + body.replace(",", "")
    try:
        return int(text)
    except ValueError:
        return float(text)


def _integral(value: Any) -> Any:
    value = _number_text(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _text(value: Any) -> Any:
    """A string output may be given as a number (an id, a year); a container is refused."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


_Number = Annotated[
    int | Annotated[float, Field(allow_inf_nan=False)], BeforeValidator(_number_text)
]
_Integer = Annotated[int, BeforeValidator(_integral)]
_String = Annotated[str, BeforeValidator(_text)]

_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    "number": TypeAdapter(_Number),
    "integer": TypeAdapter(_Integer),
    "string": TypeAdapter(_String),
    "boolean": TypeAdapter(StrictBool),
    "object": TypeAdapter(dict[str, Any]),
    "list": TypeAdapter(list[Any]),
    "list[number]": TypeAdapter(list[_Number]),
    "list[integer]": TypeAdapter(list[_Integer]),
    "list[string]": TypeAdapter(list[_String]),
    "list[boolean]": TypeAdapter(list[StrictBool]),
    # A fence around code is left to `load_function`, which strips it where code is loaded.
    CODE: TypeAdapter(str),
}


_WHOLE_FENCE = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?\s*```\s*$", re.S)


def unfence(code: str) -> str:
    """Code without the markdown fence a model wrapped it in."""
    m = _WHOLE_FENCE.match(code)
    return m.group(1) if m else code


def _parses(code: str) -> str:
    """Code that does not parse is no code: the retry hears where it breaks."""
    try:
        compile(unfence(code), "<code>", "exec", dont_inherit=True)
    except SyntaxError as e:
        raise TypeMismatch(
            f"expected Python code that parses, got a SyntaxError: {e.msg} (line {e.lineno})"
        ) from None
    except ValueError as e:  # e.g. a NUL byte
        raise TypeMismatch(f"expected Python code, got {e}") from None
    return code


@cache
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(schema_json))


def coerce(spec: TypeSpec, value: Any) -> Any:
    """The value in its declared type ("17" -> 17 for a number), or `TypeMismatch` saying what
    was expected and what came. `{"value": 17}` is never unwrapped: guessing which field an
    object meant would hide a wrong answer."""
    spec = canonical(spec)
    if spec == ANY:
        return value
    if isinstance(spec, dict):
        err = jsonschema.exceptions.best_match(
            _validator(json.dumps(spec, sort_keys=True)).iter_errors(value)
        )
        if err is not None:
            where = "".join(f"[{p!r}]" for p in err.absolute_path)
            raise TypeMismatch(
                f"expected a value matching {label(spec)}, got {describe(value)}"
                + (f" ({where}: {err.message})" if where else f" ({err.message})")
            )
        return value
    try:
        value = _ADAPTERS[spec].validate_python(value)
    except ValidationError:
        raise TypeMismatch(f"expected {spec}, got {describe(value)}") from None
    return _parses(value) if spec == CODE else value


def null_value(spec: TypeSpec) -> Any:
    """The emptiest value of a type: a VF that accepts it (and an absurd one) checks nothing."""
    return _probe(spec, {"number": 0, "integer": 0, "string": "", "boolean": False}, [], {})


def absurd_value(spec: TypeSpec) -> Any:
    """A value of the declared type that no sensible answer has."""
    if canonical(spec) == CODE:
        return "def zq():\n    return 'xq'\n"
    scalars = {"number": -987654.321, "integer": -987654, "string": "zq xq zq", "boolean": True}
    return _probe(spec, scalars, None, {"zq": "xq"}, default="zq xq zq")


def plausible_value(spec: TypeSpec) -> Any:
    """An ordinary value of a type: what a VF's inputs hold while its outputs are probed."""
    if canonical(spec) == CODE:
        return "def f(x):\n    return x\n"
    return _probe(
        spec,
        {"number": 7, "integer": 7, "string": "seven", "boolean": True},
        None,
        {"a": 7},
        default=7,
    )


def _probe(
    spec: TypeSpec, scalars: dict[str, Any], array: list | None, obj: dict, default: Any = None
) -> Any:
    """`array=None`: a one-item list holding the item type's own probe."""
    schema = json_schema(spec)
    kind = schema.get("type")
    if kind == "array":
        if array is not None:
            return array
        items = schema.get("items")
        item = _probe(items, scalars, None, obj, default) if isinstance(items, dict) else default
        return [item]
    if kind == "object":
        return obj
    return scalars.get(kind, default) if isinstance(kind, str) else default


_PYTHON_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.S | re.I)


def python_blocks(text: str) -> list[str]:
    """The fenced blocks of a reply marked Python or unmarked, in order."""
    return _PYTHON_FENCE.findall(text)


def code_from_reply(text: str) -> str | None:
    """The last fenced block of a reply that parses as Python and defines a function with a
    body beyond its docstring (a stub copied from the task is no answer)."""
    for block in reversed(python_blocks(text)):
        tree = _parse(block)
        if tree is None and "\\n" in block:
            # Small models copy the task's docstring with the escapes of the JSON it came in:
            # `'''\n    Return ...\n    '''\n    if q != q[::-1]:` on one line. Tried only
            # on code that does not parse: a `\n` outside a string
            # can only mean a line break, and inside a triple-quoted one it means the same.
            block = _ESCAPED_NEWLINE.sub("\n", block)
            tree = _parse(block)
        if tree is None:
            continue
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and _has_body(fn):
                return block.strip() + "\n"
    return None


_ESCAPED_NEWLINE = re.compile(r"(?<!\\)\\n")


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def _has_body(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return any(
        not isinstance(b, ast.Pass)
        and not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))
        for b in body
    )
