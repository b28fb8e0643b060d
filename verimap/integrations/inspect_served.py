"""verimap's own models served to Inspect AI as a model API (`verimap/<name>`).

The solver's fallback (verimap's local llama.cpp model, or the endpoint `verimap run` would use)
and any verimap `Model` passed to it (a test double) are wrapped so that their calls too go
through Inspect's `Model.generate`: they are model events in the transcript, counted in the
log's usage, cached by `--cache` and limited by `--max-connections`. The adapter hands the API
the request whole (`CURRENT_CALL`), so what Inspect's types cannot hold (the planner's
schema, the purpose a test double answers by) still reaches the model, and takes the reply
back whole the same way; the event records Inspect's view of both, and the request as the
endpoint would get it as the raw call, all with their secrets masked (`redaction.redact`):
the transcript is a file that gets shared.

Retries stay with the served model (`OpenAIModel` retries, and restarts a local server that
died), so Inspect does not retry them again. The local server runs one request at a time, so
it is given one connection (`serve`): requests wait their turn in Inspect, not in the server.
"""

from __future__ import annotations

from typing import Any

from verimap.base.messages import ModelResponse, to_openai
from verimap.base.model import ModelError
from verimap.base.protocols import Model
from verimap.base.redaction import redact, secret_values
from verimap.integrations import missing_extra
from verimap.integrations.inspect_model import (
    CURRENT_CALL,
    RESPONSE_KEY,
    inspect_call,
    model_usage,
)

try:
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessage,
        ChatMessageAssistant,
        GenerateConfig,
        ModelAPI,
        ModelCall,
        ModelOutput,
        StopReason,
        modelapi,
    )
    from inspect_ai.model import Model as InspectModelType
    from inspect_ai.tool import ToolChoice, ToolInfo
except ModuleNotFoundError as e:
    raise missing_extra(e, "inspect_ai", "inspect") from None

_STOP: dict[str, StopReason] = {
    "length": "max_tokens",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}


@modelapi(name="verimap")
class ServedModelAPI(ModelAPI):
    """An Inspect model API that answers with a verimap `Model` (see the module docstring)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),  # noqa: B008 (Inspect's own signature)
        served: Model | None = None,
        **_: Any,
    ) -> None:
        if served is None:
            raise ValueError(
                f"verimap/{model_name} is served only by verimap's solver: run "
                "verimap.integrations.inspect_ai.verimap_solver with no --model (verimap's "
                "local model) or with any Inspect model"
            )
        # The local server's port changes from run to run, and Inspect's cache keys on the URL.
        local = getattr(served, "local", False)
        url = None if local else getattr(served, "base_url", None)
        super().__init__(model_name, url, None, [], config)
        self.served = served

    def connection_key(self) -> str:
        return f"{self.base_url or self.model_name}@{id(self.served)}"

    def should_retry(self, ex: Exception) -> bool:
        return False

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> tuple[ModelOutput | Exception, ModelCall]:
        call = CURRENT_CALL.get()
        if call is None:
            raise RuntimeError(f"verimap/{self.model_name} answers only verimap's own requests")
        req = call.request
        secrets = secret_values()
        sent: dict[str, Any] = redact(
            {
                "messages": to_openai(req.messages),
                "tools": req.tools,
                "tool_choice": req.tool_choice,
                "response_schema": req.response_schema,
                **req.settings.model_dump(exclude_none=True),
            },
            secrets,
        )
        try:
            resp = await self.served.request(req)
        except ModelError as e:  # Inspect records it in the model event, then raises it
            return e, ModelCall.create(request=sent, response={"error": redact(str(e), secrets)})
        call.response = resp
        shown = ModelResponse.model_validate(redact(resp.model_dump(mode="json"), secrets))
        return _output(shown, self.model_name), ModelCall.create(
            request=sent, response=shown.model_dump(mode="json")
        )


def _output(resp: ModelResponse, name: str) -> ModelOutput:
    """Inspect's view of the (masked) reply, for the transcript and the log's usage; it also
    travels whole in the metadata, for the adapter to take out of Inspect's cache."""
    calls = [inspect_call(tc) for tc in resp.tool_calls]
    message = ChatMessageAssistant(
        content=resp.content, tool_calls=calls or None, model=resp.model or name, source="generate"
    )
    return ModelOutput(
        model=resp.model or name,
        choices=[
            ChatCompletionChoice(
                message=message, stop_reason=_STOP.get(resp.finish_reason or "", "stop")
            )
        ],
        usage=model_usage(resp.usage),
        metadata={RESPONSE_KEY: resp.model_dump(mode="json")},
    )


def serve(model: Model) -> InspectModelType:
    """`model` as an Inspect `Model` (`verimap/<its name>`). verimap's local server gets one
    connection, set as Inspect's own `max_connections` (which turns its adaptive concurrency
    off, and which `--max-connections` overrides)."""
    local = bool(getattr(model, "local", False))
    config = GenerateConfig(max_connections=1) if local else GenerateConfig()
    return InspectModelType(ServedModelAPI(model.name, served=model), config)
