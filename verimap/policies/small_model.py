"""The small-model policy: the rules that make the catalog's local models usable.

Each rule has its record in design/decisions.md: greedy first attempts and sampled, explained retries;
no plan repair and at most one replan; the whole task as one node, with no planner call; answers
confirmed only by independently written solutions; code retries that alternate repair and a
fresh start; and every reply capped, since a small model in a repetition loop runs to the cap.

`planner="model"` (the `small-model-planner` policy) lets the model plan instead, in stages
under the grammar (`verimap.planning.staged`): it writes up to `plan_nodes` nodes and names
their checks, and the validator's messages go back to it once. Opt-in (design/decisions.md,
D32).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from verimap.base.check_names import ANSWER_AGREEMENT, ARITHMETIC, BUILTIN_CHECKS, CODE_AGREEMENT
from verimap.base.env import EnvError, getenv_int
from verimap.base.messages import ModelRequest, ModelResponse
from verimap.base.model import ModelError, WrappedModel
from verimap.base.protocols import Model
from verimap.policies.base import Policy

NAME = "small-model"
PLANNER_NAME = "small-model-planner"


class SmallModel(Policy):
    name = NAME
    summary = (
        "temperature 0 with retries at 0.7, no plan repair, at most 2 plans, the whole task as "
        "one node, answers confirmed by independent solutions, code retries that alternate "
        "repair and a fresh start, replies capped"
    )
    # At 0 a small model follows the demonstration, which at the paper's 1.0 it does not. A retry
    # at 0 would repeat its failed answer word for word; sampled at 0.7 it changes.
    temperature: float = 0.0
    retry_temperature: float = 0.7
    # A repair round costs minutes and has not made a small model's plan valid (design/decisions.md,
    # D01).
    plan_repairs: int = 0
    # Each replan costs minutes a task and seldom brings a right answer: one replan stays.
    max_iterations: int = 2
    # Each node is one more place for a small model to slip: the whole task as one node
    # (design/decisions.md, D02).
    max_nodes: int = 1
    # Its reasoning is checked by what it does not write itself: recomputed arithmetic and
    # solutions written apart (docs/checks.md).
    checks: tuple[str, ...] = (ARITHMETIC, ANSWER_AGREEMENT, CODE_AGREEMENT)
    fresh_code_retries: bool = True
    # Who writes the plan: a rule (the whole task as one node) or the model, in stages.
    planner: Literal["rule", "model"] = "rule"
    # The most nodes the model's plan may have, and the validator's rounds it gets back.
    plan_nodes: int = Field(default=4, ge=1)
    staged_repairs: int = Field(default=1, ge=0)

    @field_validator("checks")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [c for c in v if c not in BUILTIN_CHECKS]
        if unknown:
            raise ValueError(f"unknown check(s): {', '.join(unknown)}")
        return v

    # A repetition loop ran to a 2,048-token cap in 2 minutes; useful replies were 236-521.
    reply_tokens: int = Field(default_factory=lambda: reply_cap())

    def settings(self, given: Mapping[str, Any]) -> dict[str, Any]:
        # A temperature the user chose is theirs for retries too.
        sampling = (
            {}
            if "temperature" in given.get("sampling", {})
            else {"temperature": self.temperature, "retry_temperature": self.retry_temperature}
        )
        planned = self.planner == "model"
        return {
            "sampling": sampling,
            "loop": {"max_iterations": self.max_iterations},
            "planning": {
                "plan_repairs": self.staged_repairs if planned else self.plan_repairs,
                "max_nodes": self.plan_nodes if planned else self.max_nodes,
            },
            "verify": {"checks": list(self.checks)},
            "execution": {"fresh_code_retries": self.fresh_code_retries},
        }

    def planner_options(self) -> dict[str, Any]:
        if self.planner == "model":
            return {"decoding": "staged"}
        return {"one_node_rule": f"one-node plan ({self.name} policy)"}

    def wrap(self, model: Model) -> Model:
        return ReplyCap(model, self.reply_tokens)


class SmallModelPlanner(SmallModel):
    """The small-model policy with the model planning (`planner="model"`), by name for `--policy`."""

    name = PLANNER_NAME
    summary = (
        "the small-model policy, but the model writes the plan in stages under the grammar (up to "
        "4 nodes, checks named from the catalog, the validator's messages fed back once)"
    )
    planner: Literal["rule", "model"] = "model"


def reply_cap() -> int:
    """`VERIMAP_LOCAL_MAX_TOKENS`, else 1,024 tokens; at least 64."""
    try:
        return max(64, getenv_int("VERIMAP_LOCAL_MAX_TOKENS", 1024))
    except EnvError as e:
        raise ModelError(str(e)) from None


class ReplyCap(WrappedModel):
    """`model` with every reply capped at `limit` tokens (a request asking for fewer keeps its
    own limit). Anything else is the inner model's."""

    def __init__(self, model: Model, limit: int):
        super().__init__(model)
        self.limit = limit

    async def request(self, req: ModelRequest) -> ModelResponse:
        asked = req.settings.max_tokens
        if asked is None or asked > self.limit:
            req = req.model_copy(update={"settings": req.settings.replace(max_tokens=self.limit)})
        return await self.inner.request(req)
