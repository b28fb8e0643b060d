"""Model access: the `Model` protocol, typed messages, each request's purpose, structured output,
and (in `openai_model`) the OpenAI-compatible client.

Backends are imported from their own modules so that importing `verimap.llm` never
pulls in an HTTP client.
"""

from verimap.base.messages import (
    AssistantMessage,
    GenerationSettings,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from verimap.base.model import Model, ModelError, ModelRequest, ModelResponse
from verimap.base.purpose import ExecuteCall, JudgeCall, PlanCall, Purpose, SolveCall

__all__ = [
    "AssistantMessage",
    "ExecuteCall",
    "GenerationSettings",
    "JudgeCall",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "PlanCall",
    "Purpose",
    "SolveCall",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
]
