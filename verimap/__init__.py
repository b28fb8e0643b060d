"""verimap: verification-aware multi-agent planning.

import verimap
coordinator = verimap.build({"planner": m, "executor": m, "judge": m}, sandbox)
result = coordinator.run_sync("How many ...?")
print(result.status, result.answer)
"""

from verimap.config import Budget, RunConfig
from verimap.coordinator import Coordinator
from verimap.errors import VerimapError
from verimap.events import Event, EventBus, JsonlTraceWriter
from verimap.executor import Executor, ExecutorOutput
from verimap.feedback import FailureContext, Feedback
from verimap.fixed_planners import AddVFsPlanner, TemplatePlanner
from verimap.llm.messages import GenerationSettings
from verimap.plan import LLMVF, Node, Plan, PlanError, PythonVF, parse_plan
from verimap.planner import LLMPlanner, Planner, PlanningError
from verimap.result import NodeReport, RunResult, VerificationReport, VFVerdict
from verimap.run_context import RunContext
from verimap.tools import Tool, ToolRegistry, calculator_tool, default_tools, python_tool
from verimap.verifier import Verifier
from verimap.wiring import build

__version__ = "0.1.0"

__all__ = [
    "LLMVF", "AddVFsPlanner", "Budget", "Coordinator", "Event", "EventBus", "Executor", "ExecutorOutput",
    "FailureContext", "Feedback", "GenerationSettings", "JsonlTraceWriter", "LLMPlanner", "Node", "NodeReport", "Plan", "PlanError",
    "Planner", "PlanningError", "PythonVF", "RunConfig", "RunContext", "RunResult", "TemplatePlanner", "Tool", "ToolRegistry",
    "VFVerdict", "VerificationReport", "Verifier", "VerimapError", "build", "calculator_tool", "default_tools", "parse_plan",
    "python_tool",
]  # fmt: skip
