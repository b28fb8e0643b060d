"""The methods: the paper's as presets on the engine (one planner choice plus `RunConfig`
overrides), and the baselines that spend the same compute without checking anything.

| method | planner | verification | retries x iterations | notes |
|---|---|---|---|---|
| react | one node, all tools | none | 1 x 1 | single agent, <= 20 steps |
| map | LLM planner, no VFs | none | 1 x 1 | text hand-offs: parents' and grandparents' replies |
| map-v | LLM planner, no VFs | judge, criterion = the instruction | 3 x 5 | |
| verimap | LLM planner | the plan's VFs | 3 x 5 | |
| map-v-1it | LLM planner, no VFs | judge, criterion = the instruction | 1 x 1 | failed outputs flow on |
| verimap-1it | LLM planner | the plan's VFs | 1 x 1 | failed outputs flow on |
| bare | none: one call, the model alone | none | 1 x 1 | a reply's own program is run |
| sc | none: k samples at 0.7, majority vote | none | 1 x 1 | k: `samples`; as bare |
| program | none: one program (PAL) run in the sandbox | none | 1 x 1 | |
| rag | none: the top passages and the question, one call | none | 1 x 1 | QA over a corpus only |

On a question over a corpus (MultiHopRAG) bare answers closed book, and sc votes over samples
that all read the passages rag reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Method:
    """A method: who plans, and the `RunConfig` settings (in their parts) that make it what it
    is (`fixed`, over the user's), and those it starts from that the user may change
    (`defaults`): a method's retries and iterations are its paper defaults, unless being one
    pass (the -1it variants, react, map) is what the method is."""

    name: str
    planner: str  # "react" (one fixed node), "llm", or "baseline" (no coordinator)
    fixed: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def verification(self) -> str:
        """What checks an attempt (`Verify.verification`): every method fixes it."""
        return str(self.fixed["verify"]["verification"])


def _one_pass(verification: str) -> dict[str, Any]:
    """A method's fixed settings: `verification`, one attempt and one plan."""
    return {
        "verify": {"verification": verification},
        "loop": {"max_retries": 1, "max_iterations": 1},
    }


_PAPER_LOOP = {"loop": {"max_retries": 3, "max_iterations": 5}}
_BASELINE = _one_pass("none")
BASELINE_METHODS = {
    "bare": "the model alone: one call, the plain prompt",
    "sc": "self-consistency: k samples at temperature 0.7 and a majority vote",
    "program": "one program written for the task and run in the sandbox (PAL)",
    "rag": "retrieve then read: the top passages for the question and the question, one call",
}

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "react",
            "react",
            {**_one_pass("none"), "execution": {"executor_max_steps": 20}},
            "single ReAct agent with all tools",
        ),
        Method(
            "map",
            "llm",
            {
                **_one_pass("none"),
                "execution": {"context_generations": 2, "structured_io": False},
            },
            "plan, no verification; executors see the instructions and text replies two generations back",
        ),
        Method(
            "map-v",
            "llm",
            {"verify": {"verification": "instruction"}},
            "plan + generic judge whose criterion is the node instruction",
            _PAPER_LOOP,
        ),
        Method(
            "verimap",
            "llm",
            {"verify": {"verification": "full"}},
            "plan with planner-written Python and NL verification functions",
            _PAPER_LOOP,
        ),
        Method(
            "map-v-1it",
            "llm",
            {
                "verify": {"verification": "instruction", "agreement": 1},
                "loop": {"max_retries": 1, "max_iterations": 1, "fail_accepted": True},
            },
            "map-v in one pass: no retries, no replanning",
        ),
        Method(
            "verimap-1it",
            "llm",
            {
                "verify": {"verification": "full", "agreement": 1},
                "loop": {"max_retries": 1, "max_iterations": 1, "fail_accepted": True},
            },
            "verimap in one pass: no retries, no replanning",
        ),
        *(Method(name, "baseline", _BASELINE, what) for name, what in BASELINE_METHODS.items()),
    )
}

# The paper samples every role at temperature 1.0, top_p 1.0.
PAPER_DEFAULTS: dict[str, Any] = {"sampling": {"temperature": 1.0, "top_p": 1.0}}


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}") from None


Solve = Callable[..., Awaitable[Any]]

# The single agent (react) on a benchmark is verimap's one-node plan without its VFs
# (`fallback.whole_task_plan`: a typed answer, the same instruction), so the two differ only in
# verification; outside a benchmark (`verimap run --method react`) it is one untyped answer.
REACT_INSTRUCTION = (
    "Solve the task completely, using the tools as needed, and give the final answer."
)
# What a planned final node must output for the benchmark's scorer to read an answer (a code
# task's `string` output named like code is typed `code`: `fallback.with_task_examples`).
PLAN_ANSWER_TYPES = {
    "math": ("number", "integer", "string"),
    "programming": ("code",),
    "qa": ("string", "boolean"),
}
