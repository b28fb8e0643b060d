"""Policies by name: the small-model rules and the paper's protocol, as objects a run lists.

`verimap.build()` and the CLI apply the same one: a run on the local model follows the
small-model policy unless it names its own (`RunConfig(policies=[...])`, `--policy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verimap.base.protocols import Model
from verimap.config import RunConfig, given
from verimap.policies.base import Policy, fill
from verimap.policies.paper import Paper
from verimap.policies.small_model import SmallModel, SmallModelPlanner

POLICIES: dict[str, type[Policy]] = {
    SmallModel.name: SmallModel, SmallModelPlanner.name: SmallModelPlanner, Paper.name: Paper,
}  # fmt: skip

__all__ = ["POLICIES", "Paper", "Policy", "SmallModel", "SmallModelPlanner", "apply", "fill", "for_models",
           "get_policies", "planner_options", "wrap_models"]  # fmt: skip


def get_policies(names: list[str] | None) -> list[Policy]:
    """The policies `names` lists, with their default parameters."""
    out = []
    for name in names or []:
        if name not in POLICIES:
            raise ValueError(f"unknown policy {name!r}; the policies are: {', '.join(POLICIES)}")
        out.append(POLICIES[name]())
    return out


def for_models(models: Mapping[str, Any]) -> list[str]:
    """The policies a run on `models` follows when it names none: the small-model one on the
    local model, none on an endpoint (its own defaults apply)."""
    local = any(getattr(m, "local", False) is True for m in models.values())
    return [SmallModel.name] if local else []


def wrap_models(models: Mapping[str, Model], policies: list[Policy]) -> dict[str, Model]:
    """Every role's model as the policies' runs call it."""
    out = dict(models)
    for policy in policies:
        out = {role: policy.wrap(m) for role, m in out.items()}
    return out


def apply(config: RunConfig, names: list[str]) -> RunConfig:
    """`config` under its policies, or `names` when it names none: each policy's settings fill
    the fields the user left unset, and the config names the policies."""
    chosen = config.policies if config.policies is not None else names
    user = given(config)
    return RunConfig.model_validate({**fill(user, get_policies(chosen)), "policies": chosen})


def planner_options(policies: list[Policy]) -> dict[str, Any]:
    """The planner's options the policies set, a later policy's winning."""
    out: dict[str, Any] = {}
    for policy in policies:
        out.update(policy.planner_options())
    return out
