"""verimap: verification-aware multi-agent planning."""

from verimap.config import Budget, RunConfig
from verimap.plan import LLMVF, Node, Plan, PlanError, PythonVF, parse_plan

__version__ = "0.1.0"

__all__ = ["LLMVF", "Budget", "Node", "Plan", "PlanError", "PythonVF", "RunConfig", "parse_plan"]
