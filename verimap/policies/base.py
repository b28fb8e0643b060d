"""What a policy is: a named bundle of the rules a run follows beyond the core loop.

The core loop (plan, execute, verify, retry, replan) is the paper's. Everything a setting adds
to it, the rules that make a small local model usable or the switches that reproduce the paper
exactly, is a policy: settings it gives the run where the user left them unset, options of the
planner (fallback plans, plan fixes, injected checks), and wrappers around the models. A run
records its policies and their parameters (`run_start`), so a reader sees which rules ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from verimap.base.protocols import Model
from verimap.config import merge


class Policy(BaseModel):
    """The base of every policy; a policy's fields are its parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: ClassVar[str]
    summary: ClassVar[str]

    def settings(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """`RunConfig` settings, in their parts, this policy sets where the user left them
        unset; `given` is what the user set, in the same form (a rule may depend on it)."""
        return {}

    def for_method(self, method: str) -> dict[str, Any]:
        """`RunConfig` settings, in their parts, this policy sets for one method where the user
        left them unset."""
        return {}

    def planner_options(self) -> dict[str, Any]:
        """Keyword arguments for `LLMPlanner` (fallback plans, plan fixes, injected checks)."""
        return {}

    def wrap(self, model: Model) -> Model:
        """`model` as this policy's runs call it."""
        return model

    def record(self) -> dict[str, Any]:
        """What a run's first event says of this policy: its name and parameters."""
        return {"name": self.name, **self.model_dump(mode="json")}


def fill(base: Mapping[str, Any], policies: list[Policy]) -> dict[str, Any]:
    """`base` (the settings a user gave, in their parts) with each policy's settings added
    where `base` has no value of its own; a later policy's setting wins over an earlier one's."""
    return merge(*(policy.settings(base) for policy in policies), base)
