"""The paper policy: VeriMAP as Xu et al. describe it (arXiv:2510.17109), as closely as this
engine can, with every beyond-paper switch off. Its prompts are paraphrases of the paper's, and
the coordinator infers edges from the named inputs.

Nodes run one at a time in topological order and a replan restarts from the top; every VF runs
(one judge exchange per natural-language VF, even after a Python VF failed); roles sample at
1.0; a plan the planner cannot write ends the run (no fallback plan, no repair round, no
automatic fixes of common mistakes, no checks injected into the final node, no built-in
checks, no vacuity probe); a node's executor sees only the inputs its plan names and makes
every tool call itself.
Deviations that remain are listed in docs/eval.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verimap.policies.base import Policy

NAME = "paper"


class Paper(Policy):
    name = NAME
    summary = (
        "the paper's protocol: sequential nodes, restart on replan, every VF judged, sampling "
        "at 1.0, no fallback plans, plan repairs, plan fixes or built-in checks"
    )

    def settings(self, given: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "sampling": {"temperature": 1.0, "top_p": 1.0, "retry_temperature": None},
            "loop": {"sequential": True, "reuse_verified": False, "max_plan_repeats": None},
            "verify": {
                "checks": [],
                "vacuity_check": False,
                "full_feedback": True,
                "batch_judge": False,
                "unverified_answer": "last",
            },
            "planning": {"plan_repairs": 0, "max_nodes": None},
            "execution": {"fresh_code_retries": False, "opening_calls": False},
        }

    def for_method(self, method: str) -> dict[str, Any]:
        # MAP-V is MAP plus generic verifiers (the paper's B.5): MAP's text hand-offs, with the
        # parents' and grandparents' replies.
        if method in ("map-v", "map-v-1it"):
            return {"execution": {"structured_io": False, "context_generations": 2}}
        return {}

    def planner_options(self) -> dict[str, Any]:
        return {"fallback": False, "task_examples": False, "fix_plans": False}
