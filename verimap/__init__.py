"""verimap: verification-aware multi-agent planning.

import verimap
coordinator = verimap.build({"planner": m, "executor": m, "judge": m}, sandbox)
result = coordinator.run_sync("How many ...?")
print(result.status, result.answer)
"""

from verimap.base.accounting import Budget
from verimap.base.errors import VerimapError
from verimap.base.events import Event, EventBus, JsonlTraceWriter
from verimap.base.execution import ExecutorOutput, Feedback
from verimap.base.failure import FailureContext
from verimap.base.messages import GenerationSettings
from verimap.base.plan import LLMVF, Node, Plan, PlanError, PlanningError, PythonVF
from verimap.base.roles import Planner
from verimap.base.run_context import RunContext
from verimap.base.verdicts import VerificationReport, VFVerdict
from verimap.base.version import __version__ as __version__
from verimap.config import RunConfig
from verimap.core.coordinator import Coordinator
from verimap.core.executor import Executor
from verimap.core.result import NodeReport, RunResult
from verimap.core.verifier import Verifier
from verimap.planning.fixed_planners import AddVFsPlanner, TemplatePlanner
from verimap.planning.plan import parse_plan
from verimap.planning.planner import LLMPlanner
from verimap.tools.registry import Tool, ToolRegistry, calculator_tool, default_tools, python_tool
from verimap.wiring import build

__all__ = [
    "LLMVF",
    "AddVFsPlanner",
    "Budget",
    "Coordinator",
    "Event",
    "EventBus",
    "Executor",
    "ExecutorOutput",
    "FailureContext",
    "Feedback",
    "GenerationSettings",
    "JsonlTraceWriter",
    "LLMPlanner",
    "Node",
    "NodeReport",
    "Plan",
    "PlanError",
    "Planner",
    "PlanningError",
    "PythonVF",
    "RunConfig",
    "RunContext",
    "RunResult",
    "TemplatePlanner",
    "Tool",
    "ToolRegistry",
    "VFVerdict",
    "VerificationReport",
    "Verifier",
    "VerimapError",
    "build",
    "calculator_tool",
    "default_tools",
    "parse_plan",
    "python_tool",
]
