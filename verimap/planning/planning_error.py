"""What a planner raises when it writes no valid plan, below every planner that raises it."""

from __future__ import annotations

from verimap.base.errors import VerimapError
from verimap.base.messages import ModelResponse


class PlanningError(VerimapError, RuntimeError):
    """The planner gave no valid plan within its repair attempts."""

    def __init__(
        self, message: str, problems: list[str], responses: list[ModelResponse] | None = None
    ):
        super().__init__(
            message + ("\n" + "\n".join(f"- {p}" for p in problems) if problems else "")
        )
        self.problems = problems
        self.responses = responses or []
