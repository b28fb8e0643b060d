"""The names of the built-in checks (`verimap.checks`), a leaf module below the plan model.

A plan may ask for a check by name (`{"type": "check", "check": "run_examples"}`), so the plan
needs the names to validate against; the checks themselves need the plan, so the names live
below both. The catalog's checks take arguments (`{"type": "check", "check": "fact_in_source",
"args": {"output": "fact", "source": "TechCrunch"}}`): `CATALOG` says which, and of what kind,
so the plan can validate them and a planner's grammar can enumerate them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RUN_EXAMPLES = "run_examples"
ARITHMETIC = "arithmetic"
SHOWN_WORK = "shown_work"
ANSWER_AGREEMENT = "answer_agreement"
CODE_AGREEMENT = "code_agreement"

BUILTIN_CHECKS: dict[str, str] = {
    RUN_EXAMPLES: "the task's own examples run against the node's code output",
    ARITHMETIC: "every calculation the executor wrote out is recomputed",
    SHOWN_WORK: "a number the executor worked out comes with its calculation",
    ANSWER_AGREEMENT: "a numeric answer must agree with solutions sampled independently (`--ballot`)",
    CODE_AGREEMENT: "code must behave like independently written solutions on generated inputs",
}

# The checks that confirm an answer with independently written solutions (`--cross-check`).
AGREEMENT_CHECKS = (ANSWER_AGREEMENT, CODE_AGREEMENT)

# The ballots `answer_agreement` may confirm an answer with (`--ballot`; docs/checks.md).
MIXED = "mixed"
SAMPLED = "sampled"
STRICT = "strict"
BALLOTS: dict[str, str] = {
    STRICT: "three of up to five samples agree with the first attempt, at most one against "
    "(default)",
    MIXED: "three votes, a program and a sample among them, twice any other answer's",
    SAMPLED: "two of at most three samples agree with the first attempt, no retry confirmed",
}
DEFAULT_BALLOT = STRICT


def known_ballot(name: str) -> str:
    """`name` when it is a ballot's; a `ValueError` naming the ballots otherwise."""
    if name not in BALLOTS:
        raise ValueError(f"unknown ballot {name!r}; the ballots are: {', '.join(BALLOTS)}")
    return name


# ---- the catalog: checks a plan names with arguments -----------------------------------------

YES_NO = "yes_no"
ENTITY = "entity"
NUMBER_IN_RANGE = "number_in_range"
DATE = "date"
FACT_IN_SOURCE = "fact_in_source"
FACTS_FROM_SOURCES = "facts_from_sources"
REPORTS_IN_ORDER = "reports_in_order"

# What an argument holds: `output` one of the node's outputs; `value` one of its outputs or an
# earlier node's output it reads (`node.var`); `source` the name of a news source; `number` a
# number.
ArgKind = Literal["output", "value", "source", "number"]


@dataclass(frozen=True)
class CheckSpec:
    """A catalog check: what it verifies, its arguments by name and kind (all required), and
    the task domains whose plans may name it."""

    description: str
    args: dict[str, ArgKind]
    domains: tuple[str, ...]


CATALOG: dict[str, CheckSpec] = {
    YES_NO: CheckSpec("the output is Yes or No", {"output": "output"}, ("qa",)),
    ENTITY: CheckSpec(
        "the output is a short name (a person, company or thing), not a sentence",
        {"output": "output"},
        ("qa",),
    ),
    NUMBER_IN_RANGE: CheckSpec(
        "the output is a number from min to max",
        {"output": "output", "min": "number", "max": "number"},
        ("math", "qa"),
    ),
    DATE: CheckSpec("the output is a date", {"output": "output"}, ("qa",)),
    FACT_IN_SOURCE: CheckSpec(
        "the output's words appear in a passage of the named source that this node's search "
        "retrieved",
        {"output": "output", "source": "source"},
        ("qa",),
    ),
    FACTS_FROM_SOURCES: CheckSpec(
        "each of two outputs appears in a retrieved passage of its own named source (the two "
        "sides of a comparison)",
        {
            "first": "output",
            "first_source": "source",
            "second": "output",
            "second_source": "source",
        },
        ("qa",),
    ),
    REPORTS_IN_ORDER: CheckSpec(
        "two report dates are in the order the task states: earlier is before later",
        {"earlier": "value", "later": "value"},
        ("qa",),
    ),
}

# An answer a QA task may verifiably give when its corpus holds nothing on the question.
ABSTENTION = "Insufficient information"

# The checks a plan of each domain may name, the built-in ones (no arguments) with the catalog's.
DOMAIN_CHECKS: dict[str, tuple[str, ...]] = {
    "qa": tuple(n for n, s in CATALOG.items() if "qa" in s.domains),
    "math": (ARITHMETIC, ANSWER_AGREEMENT, *(n for n, s in CATALOG.items() if "math" in s.domains)),
    "programming": (RUN_EXAMPLES, CODE_AGREEMENT),
}

# Every name a plan may ask for.
PLAN_CHECKS: tuple[str, ...] = (*BUILTIN_CHECKS, *CATALOG)


def arg_problems(check: str, args: dict[str, object]) -> list[str]:
    """What is wrong with `args` for `check`, by the catalog alone (the node's outputs are the
    plan's to check): missing and unknown arguments, and arguments of the wrong kind."""
    spec = CATALOG.get(check)
    if spec is None:
        return [f"check {check!r} takes no arguments"] if args else []
    problems = [f"missing argument {a!r}" for a in spec.args if a not in args]
    problems += [
        f"unknown argument {a!r} (it takes {', '.join(spec.args)})"
        for a in args
        if a not in spec.args
    ]
    for name, kind in spec.args.items():
        if name not in args:
            continue
        v = args[name]
        if kind == "number":
            if not isinstance(v, int | float) or isinstance(v, bool):
                problems.append(f"argument {name!r} must be a number, got {v!r}")
        elif not isinstance(v, str) or not v.strip():
            problems.append(f"argument {name!r} must be a non-empty string, got {v!r}")
    if not problems and "first" in spec.args and args["first"] == args.get("second"):
        problems.append(f"arguments 'first' and 'second' name the same output {args['first']!r}")
    if (
        not problems
        and spec.args.get("min") == "number"
        and float(args["min"]) > float(args["max"])  # type: ignore[arg-type]
    ):
        problems.append(f"argument 'min' ({args['min']}) is above 'max' ({args['max']})")
    return problems
