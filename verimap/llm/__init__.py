"""Model access: the `Model` protocol, structured output, and (in `openai_model`) the OpenAI-compatible client.

Backends are imported from their own modules so that importing `verimap.llm` never
pulls in an HTTP client.
"""

from verimap.llm.base import Message, Model, ModelError, ModelRequest, ModelResponse, ToolCall

__all__ = ["Message", "Model", "ModelError", "ModelRequest", "ModelResponse", "ToolCall"]
