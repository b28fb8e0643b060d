"""What is common to every model backend: the charge of a call cut off before the server said
what it cost, the error of a call that failed for good, and `WrappedModel`, a model around
another. The `Model` protocol itself is in `verimap.base.protocols`; the messages a request
carries and the response are in `verimap.base.messages`, and a backend turns them into its own
wire format (the OpenAI client with `to_openai`), so nothing else depends on that format.
"""

from __future__ import annotations

import json
from typing import Any

from verimap.base.errors import VerimapError
from verimap.base.messages import ModelRequest, ModelResponse, to_openai
from verimap.base.protocols import Model
from verimap.base.usage import Usage


def estimate_prompt_tokens(req: ModelRequest) -> int:
    """About four characters a token over all a request sends (messages, tools, the reply's
    schema): the charge for a call cut off before the server said what its prompt cost."""
    sent = [to_openai(req.messages), req.tools or [], req.response_schema or {}]
    return len(json.dumps(sent, ensure_ascii=False)) // 4


class ModelError(VerimapError, RuntimeError):
    """A model call failed for good (after the backend's own retries)."""

    def __init__(self, message: str, *, usage: Usage | None = None):
        super().__init__(message)
        self.usage = usage or Usage(calls=1, failed_calls=1)


class WrappedModel:
    """A model around another (metering, a cache, a reply cap), as pydantic-ai's
    `WrapperModel`: the wrapper overrides `request`, and every attribute it does not define
    (`base_url`, `provider`, `cost_of`, `aclose`, a double's `requests`) is the inner model's."""

    def __init__(self, inner: Model):
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes the wrapper lacks (and, while copying, before `inner`).
        try:
            inner = self.__dict__["inner"]
        except KeyError:
            raise AttributeError(name) from None
        return getattr(inner, name)

    @property
    def name(self) -> str:  # the Model protocol's attributes, spelled out for type checkers
        return self.inner.name

    @property
    def supports_tools(self) -> bool:
        return self.inner.supports_tools

    async def request(self, req: ModelRequest) -> ModelResponse:
        return await self.inner.request(req)
