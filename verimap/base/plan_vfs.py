"""A node's verification functions as a plan writes them: Python assertions for the sandbox,
natural-language criteria for the judge, and built-in checks asked for by name."""

from __future__ import annotations

import textwrap
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from verimap.base.check_names import CATALOG, PLAN_CHECKS, arg_problems
from verimap.base.iotypes import unfence

__all__ = ["LLMVF", "VF", "CheckVF", "PythonVF", "normalize_code"]


def _compiles(code: str) -> bool:
    try:
        compile(code, "<vf>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def normalize_code(code: str) -> str:
    """VF code as it was meant: without a markdown fence, and dedented, including the common
    "first line flush, the rest indented" shape of code written inside a JSON string."""
    code = unfence(code).replace("\r\n", "\n").replace("\t", "    ").strip("\n")
    candidates = [textwrap.dedent(code)]
    head, _, rest = code.partition("\n")
    if rest:
        candidates.append(head.strip() + "\n" + textwrap.dedent(rest))
    for c in candidates:
        if _compiles(c):
            return c.rstrip() + "\n" if c.strip() else ""
    return candidates[0]


def _require_type(schema: dict[str, Any]) -> None:
    """Schema-constrained models must always write `type`: it is what tells the VF kinds apart."""
    schema["required"] = ["name", "type", *(r for r in schema.get("required", []) if r != "name")]


class PythonVF(BaseModel):
    """Python checked in the sandbox with `inputs` and `outputs` in scope.

    The code either asserts at top level or defines `verify(inputs, outputs)`;
    a `verify` that returns `False` fails too.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra=_require_type)
    name: str = Field(min_length=1)
    type: Literal["python"] = "python"
    code: str
    weight: float = Field(default=1.0, ge=0)

    @field_validator("code")
    @classmethod
    def _normalize(cls, v: str) -> str:
        return normalize_code(v)


class LLMVF(BaseModel):
    """A natural-language criterion for the judge model."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_require_type)
    name: str = Field(min_length=1)
    type: Literal["llm"] = "llm"
    content: str = Field(min_length=1)
    weight: float = Field(default=1.0, ge=0)


class CheckVF(BaseModel):
    """A check asked for by name (`verimap.base.check_names`), with its arguments when it is one of
    the catalog's: a planner that cannot write a strong Python VF can still choose one, so the
    plan decides how each node is verified. Which outputs the arguments name is checked with
    the node (`verimap.planning.plan.check_plan`)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_require_type)
    name: str = Field(min_length=1)
    type: Literal["check"] = "check"
    check: str = Field(json_schema_extra={"enum": list(PLAN_CHECKS)})
    args: dict[str, Any] = Field(default_factory=dict)
    weight: float = Field(default=1.0, ge=0)

    @field_validator("check")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in PLAN_CHECKS:
            raise ValueError(f"unknown check {v!r}; choose one of {', '.join(PLAN_CHECKS)}")
        return v

    @model_validator(mode="after")
    def _args(self) -> CheckVF:
        problems = arg_problems(self.check, self.args)
        if problems:
            raise ValueError(f"check {self.check!r}: {'; '.join(problems)}")
        return self

    def named_values(self) -> dict[str, str]:
        """The arguments that name an output or an input (`output` and `value` kinds)."""
        spec = CATALOG.get(self.check)
        kinds = spec.args if spec is not None else {}
        return {a: str(v) for a, v in self.args.items() if kinds.get(a) in ("output", "value")}


def _vf_kind(v: Any) -> str | None:
    """The VF's kind: its `type`, or, when a hand-written plan leaves it out, its body's key."""
    get = v.get if isinstance(v, dict) else lambda k, d=None: getattr(v, k, d)
    kind = get("type")
    if kind is None:
        kind = (
            "python"
            if get("code") is not None
            else "llm"
            if get("content") is not None
            else "check"
            if get("check") is not None
            else None
        )
    return kind


VF = Annotated[
    Annotated[PythonVF, Tag("python")]
    | Annotated[LLMVF, Tag("llm")]
    | Annotated[CheckVF, Tag("check")],
    Discriminator(
        _vf_kind,
        custom_error_type="vf_type",
        custom_error_message='a VF needs "type": "python" (with "code"), "llm" (with "content") '
        'or "check" (with "check", the name of a built-in or catalog check, and its "args")',
    ),
]
