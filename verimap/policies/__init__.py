"""Policies by name: the small-model rules and the paper's protocol, as objects a run lists.

Which policies a run follows, and what they set, is resolved in `verimap.wiring`.
"""

from __future__ import annotations

from verimap.policies.base import Policy, fill
from verimap.policies.paper import Paper
from verimap.policies.small_model import SmallModel, SmallModelPlanner

POLICIES: dict[str, type[Policy]] = {
    SmallModel.name: SmallModel,
    SmallModelPlanner.name: SmallModelPlanner,
    Paper.name: Paper,
}

__all__ = ["POLICIES", "Paper", "Policy", "SmallModel", "SmallModelPlanner", "fill", "get_policies"]


def get_policies(names: list[str] | None) -> list[Policy]:
    """The policies `names` lists, with their default parameters."""
    out = []
    for name in names or []:
        if name not in POLICIES:
            raise ValueError(f"unknown policy {name!r}; the policies are: {', '.join(POLICIES)}")
        out.append(POLICIES[name]())
    return out
