"""Per-role usage ledger and budgets, and the model wrapper that charges them.

Every model call a run makes goes through a `MeteredModel` around the role's model, which
asks the run's `Ledger` whether the call may start and records what it cost afterwards,
also when it failed. The run's `RunContext` (`verimap.base.run_context`) hands its components
their metered models, so the ledger is passed, never looked up. A budget is checked
*before* a call, so a run never starts a call that would cross a limit. Each call is also
heard as a `ModelCall`, so a run's trace (and its OpenTelemetry spans) see every call the
budget sees, also one cut off by a timeout or the budget's clock: the prompt was sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from verimap.base.errors import VerimapError
from verimap.base.messages import ModelRequest, ModelResponse
from verimap.base.model import ModelError, WrappedModel, estimate_prompt_tokens
from verimap.base.protocols import Model
from verimap.base.purpose import label
from verimap.base.usage import Usage, UsageByRole, cost_of, price_known


class Budget(BaseModel):
    """Hard limits; crossing one stops the run with status `budget_exhausted`."""

    model_config = ConfigDict(extra="forbid")

    max_llm_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    timeout_s: float | None = None


class BudgetExceeded(VerimapError, RuntimeError):
    """A budget limit stops the run; `limit` names which one."""

    def __init__(self, limit: str, message: str):
        super().__init__(message)
        self.limit = limit


class UnpricedModel(BudgetExceeded):
    """A cost budget on a model whose price is unknown: its calls would be counted at $0, and
    the budget would never trip. Raised before the model's first call."""

    def __init__(self, model: str):
        super().__init__(
            "max_cost",
            f"cost budget cannot be enforced: no price is known for model {model!r} "
            "(genai-prices has none); drop --cost-limit/max_cost, or budget calls, tokens or time",
        )
        self.model = model


def has_known_price(model: Model) -> bool:
    """Whether the cost of `model`'s calls is known (the local model's is: it is free). A model
    may say so itself (`price_known`); otherwise its name is looked up, with its own `prices`."""
    known = getattr(model, "price_known", None)
    if isinstance(known, bool):
        return known
    return price_known(model.name, getattr(model, "prices", None))


def _cost(model: Model, usage: Usage) -> float:
    """What `usage` on `model` costs, as the model prices it (`cost_of`) or by its name."""
    own = getattr(model, "cost_of", None)
    if callable(own):
        return float(own(usage))
    return cost_of(usage, model.name, getattr(model, "prices", None))


class ModelCall(BaseModel):
    """One model call as traces and spans see it: what it cost, how long it took and how it
    ended. Never what was said: prompts and replies carry the user's data and stay out."""

    role: str
    model: str
    # Why the call was made, as a short label (`execute:a:final`, `solve:program:1`): see
    # `verimap.base.purpose`. None for a request that named no purpose.
    purpose: str | None = None
    # Who serves the API, as the OpenTelemetry GenAI conventions name it (`openai` for every
    # OpenAI-compatible endpoint; `server_address` tells which one).
    provider: str
    response_model: str = ""
    server_address: str | None = None
    server_port: int | None = None
    output_type: Literal["text", "json"] = "text"
    # The request's `GenerationSettings`, kept flat as trace files and span attributes have them.
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    duration_s: float = 0.0
    finish_reason: str | None = None
    tool_calls: int = 0
    # Answered from verimap's call cache: no endpoint was asked, and the tokens above are 0.
    cache_hit: bool = False
    error: str | None = None
    error_type: str | None = None


def _server(model: Model) -> tuple[str | None, int | None]:
    """Host and port of a model's endpoint, never its path or any credentials in the URL."""
    url = getattr(model, "base_url", None)
    if not isinstance(url, str) or not url:
        return None, None
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None, None
    return parts.hostname, port


def _model_call(
    model: Model,
    req: ModelRequest,
    usage: Usage,
    duration_s: float,
    resp: ModelResponse | None = None,
    error: Exception | None = None,
) -> ModelCall:
    host, port = _server(model)
    settings = req.settings.model_dump()
    cap = getattr(model, "max_tokens_cap", None)  # the limit the endpoint was sent, not asked
    if isinstance(cap, int):
        settings["max_tokens"] = min(cap, settings["max_tokens"] or cap)
    return ModelCall(
        role=req.role,
        purpose=label(req.purpose),
        model=model.name,
        provider=getattr(model, "provider", type(model).__name__),
        response_model=resp.model if resp else "",
        server_address=host,
        server_port=port,
        output_type="json" if req.response_schema is not None else "text",
        **settings,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens,
        cost=usage.cost,
        duration_s=duration_s,
        finish_reason=resp.finish_reason if resp else None,
        tool_calls=len(resp.tool_calls) if resp else 0,
        cache_hit=usage.cached_calls > 0,
        error=str(error)[:1000] if error else None,
        error_type=type(error).__name__ if error else None,
    )


OnCall = Callable[[ModelCall], None]


class CallCancelled(Exception):
    """How a cancelled call appears in its `ModelCall` (`error_type` "CallCancelled")."""


class Ledger:
    """Usage per role for one run, checked against a `Budget`."""

    def __init__(
        self, budget: Budget | None = None, *, clock=time.monotonic, on_call: OnCall | None = None
    ):
        self.budget = budget or Budget()
        self.usage = UsageByRole()
        self.calls_log: list[tuple[str, Usage]] = []
        # Model calls that failed for good, also those a caller turned into something else (a
        # judge's ERROR verdict): a run that then fails did so on infrastructure, not on merit.
        self.faults: list[str] = []
        self._clock = clock
        self.started = clock()
        self.on_call = on_call

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self.started

    def check(self, role: str = "") -> None:
        """Raise `BudgetExceeded` if one more call would cross a limit. Replies from the call
        cache count as the calls they replay: a re-run from the cache stops where the run it
        replays stopped, or it would not give the same results."""
        b, total = self.budget, self.usage.total
        calls = total.calls + total.cached_calls
        tokens = total.total_tokens + total.saved_tokens
        cost = total.cost + total.saved_cost
        if b.max_llm_calls is not None and calls + 1 > b.max_llm_calls:
            raise BudgetExceeded(
                "max_llm_calls",
                f"LLM call budget exhausted: {calls} of {b.max_llm_calls} calls used",
            )
        if b.max_tokens is not None and tokens >= b.max_tokens:
            raise BudgetExceeded(
                "max_tokens", f"token budget exhausted: {tokens} of {b.max_tokens} tokens used"
            )
        if b.max_cost is not None and cost >= b.max_cost:
            raise BudgetExceeded(
                "max_cost", f"cost budget exhausted: ${cost:.4f} of ${b.max_cost:.4f}"
            )
        if b.timeout_s is not None and self.elapsed_s >= b.timeout_s:
            raise BudgetExceeded(
                "timeout_s", f"wall-clock budget exhausted: {self.elapsed_s:.1f}s of {b.timeout_s}s"
            )

    def check_price(self, model: Model) -> None:
        """Raise `UnpricedModel` if a cost budget is set and `model`'s price is unknown."""
        if self.budget.max_cost is not None and not has_known_price(model):
            raise UnpricedModel(model.name)

    def record(self, role: str, usage: Usage, call: ModelCall | None = None) -> None:
        self.usage.add(role, usage)
        self.calls_log.append((role, usage))
        if call is not None and self.on_call is not None:
            self.on_call(call)


class MeteredModel(WrappedModel):
    """A model whose every request is checked against a `Ledger` and charged to it.

    Metering wraps the model rather than living in the code that calls it, so model access
    (`verimap.llm`) knows nothing of budgets, and each run meters its own calls: there is no
    ambient ledger that concurrent runs could share by accident. The budget is checked *before*
    a request (a run never starts a call that would cross a limit); what the request cost is
    recorded after it, also when it failed for good. `on_call` hears each `ModelCall` besides
    the ledger's own `on_call`, so a run can say which node and attempt a call belongs to.
    Anything else (`name`, `supports_tools`, `base_url`, a double's `requests`) is the inner
    model's, as in pydantic-ai's `WrapperModel`.
    """

    def __init__(self, inner: Model, ledger: Ledger, *, on_call: OnCall | None = None):
        super().__init__(inner)
        self.ledger = ledger
        self.on_call = on_call

    def _record(self, role: str, usage: Usage, call: ModelCall) -> None:
        self.ledger.record(role, usage, call)
        if self.on_call is not None:
            self.on_call(call)

    async def request(self, req: ModelRequest) -> ModelResponse:
        ledger, model = self.ledger, self.inner
        ledger.check(req.role)
        ledger.check_price(model)
        start = time.monotonic()
        try:
            resp = await model.request(req)
        except asyncio.CancelledError as e:
            self._record_cancelled(req, time.monotonic() - start, e)
            raise
        except ModelError as e:
            call = _model_call(model, req, e.usage, time.monotonic() - start, error=e)
            self._record(req.role, e.usage, call)
            ledger.faults.append(f"{req.role} model error: {e}")
            raise
        usage = resp.usage
        if usage.calls == 0 and usage.cached_calls == 0:
            usage = usage.model_copy(update={"calls": 1})
        self._record(
            req.role, usage, _model_call(model, req, usage, time.monotonic() - start, resp)
        )
        return resp

    def _record_cancelled(
        self, req: ModelRequest, duration_s: float, e: asyncio.CancelledError
    ) -> None:
        """A call cut off (a run's timeout, a cancelled sibling) was sent and may be billed: it
        counts as a failed call with its prompt's tokens, estimated as the server never said."""
        model = self.inner
        usage = Usage(calls=1, failed_calls=1, prompt_tokens=estimate_prompt_tokens(req))
        usage.cost = _cost(model, usage)
        why = f"cancelled before the model answered{f': {e}' if str(e) else ''}"
        call = _model_call(model, req, usage, duration_s, error=CallCancelled(why))
        self._record(req.role, usage, call)


def metered(model: Model, ledger: Ledger, *, on_call: OnCall | None = None) -> MeteredModel:
    """`model` charged to `ledger`; a model already metered by `ledger` is not charged twice."""
    if isinstance(model, MeteredModel) and model.ledger is ledger:
        model = model.inner
    return MeteredModel(model, ledger, on_call=on_call)
