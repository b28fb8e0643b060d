"""A picture of a run: the last plan as a mermaid flowchart, nodes coloured by status."""

from __future__ import annotations

from verimap.base.plan import Plan, to_mermaid
from verimap.core.result import RunResult

STATUS_STYLE = {
    "verified": "fill:#c8e6c9,stroke:#2e7d32",
    "reused": "fill:#bbdefb,stroke:#1565c0",
    "fail-accepted": "fill:#ffe0b2,stroke:#ef6c00",
    "unconfirmed": "fill:#fff9c4,stroke:#f9a825",
    "failed": "fill:#ffcdd2,stroke:#c62828",
    "skipped": "fill:#eeeeee,stroke:#9e9e9e,stroke-dasharray: 4 2",
    "pending": "fill:#ffffff,stroke:#9e9e9e",
}


def _cls(status: str) -> str:
    return status.replace("-", "_")


def run_to_mermaid(result: RunResult, plan: Plan | None = None) -> str:
    """Mermaid of `plan` (default: the run's last plan) with a class per node status."""
    plan = plan or (result.plans[-1] if result.plans else None)
    if plan is None:
        return "flowchart TD\n    empty[no plan]"
    lines = [to_mermaid(plan)]
    for status, style in STATUS_STYLE.items():
        lines.append(f"    classDef {_cls(status)} {style}")
    for n in plan.nodes:
        rep = result.nodes.get(n.id)
        status = rep.status if rep else "pending"
        lines.append(f"    class {n.id} {_cls(status)}")
    return "\n".join(lines)
