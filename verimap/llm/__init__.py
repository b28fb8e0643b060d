"""Model access: the `Model` protocol, typed messages, structured output, and (in `openai_model`)
the OpenAI-compatible client.

Backends are imported from their own modules so that importing `verimap.llm` never
pulls in an HTTP client.
"""

from verimap.llm.base import Model, ModelError, ModelRequest, ModelResponse
from verimap.llm.messages import (
    AssistantMessage,
    GenerationSettings,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

__all__ = [
    "AssistantMessage",
    "GenerationSettings",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
]
