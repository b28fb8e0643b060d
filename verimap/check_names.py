"""The names of the built-in checks (`verimap.checks`), a leaf module below the plan model.

A plan may ask for a check by name (`{"type": "check", "check": "run_examples"}`), so the plan
needs the names to validate against; the checks themselves need the plan, so the names live
below both.
"""

from __future__ import annotations

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

# The ballots `answer_agreement` may confirm an answer with (`--ballot`), each measured on fresh
# draws (docs/checks.md).
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
