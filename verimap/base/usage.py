"""Token and cost accounting, per call and per role.

Failed attempts count: a call that errors still costs a request (and often tokens),
and budgets must see it. Prices come from `genai-prices`, a maintained table of providers'
list prices: a hand-kept table went stale (it gave gpt-4o $0), and a cost budget on a model
priced at $0 never trips. A model with no known price is reported as such (`price_known`),
never taken for free.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from genai_prices.types import PriceCalculation

PLANNER, EXECUTOR, JUDGE = "planner", "executor", "judge"
ROLES = (PLANNER, EXECUTOR, JUDGE)


class Price(BaseModel):
    """US dollars per million tokens: a caller's own price for a model (a private deployment,
    a negotiated rate), which takes precedence over the library's."""

    input: float
    output: float
    cached_input: float | None = None


class Usage(BaseModel):
    """What model calls used. `calls` are requests sent to an endpoint (failed attempts too), and
    the tokens and cost are what the endpoint counted for them; `cached_tokens` are prompt tokens
    the endpoint served from its own prompt cache, still sent and billed (at its cached rate).

    Replies answered from verimap's disk cache (`verimap.llm.cache`) reach no endpoint: they are
    `cached_calls`, never `calls`, and what the recorded reply had cost is `saved_*`, never
    added to the tokens and cost above."""

    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    cached_calls: int = 0
    saved_prompt_tokens: int = 0
    saved_completion_tokens: int = 0
    saved_cost: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def saved_tokens(self) -> int:
        return self.saved_prompt_tokens + self.saved_completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage.model_validate(
            {k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields}
        )


def price_for(model: str, prices: Mapping[str, Price] | None = None) -> Price | None:
    """A caller's own price: exact name first, then the longest known prefix
    (`gpt-4.1-2025-04-14` -> `gpt-4.1`). None when `prices` has none for `model`."""
    table = prices or {}
    if model in table:
        return table[model]
    best = max((k for k in table if model.startswith(k)), key=len, default=None)
    return table[best] if best else None


def cost_of(
    usage: Usage,
    model: str,
    prices: Mapping[str, Price] | None = None,
    *,
    base_url: str | None = None,
) -> float:
    """US dollars for `usage` on `model`; 0.0 when no price is known (see `price_known`)."""
    cost = _cost(usage, model, prices, base_url)
    return 0.0 if cost is None else cost


def price_known(
    model: str, prices: Mapping[str, Price] | None = None, *, base_url: str | None = None
) -> bool:
    """Whether `cost_of` can price `model`: in `prices`, or in genai-prices' table (found by
    the endpoint's URL, else by the model name alone)."""
    return price_for(model, prices) is not None or _library_knows(model, base_url)


def _cost(
    usage: Usage, model: str, prices: Mapping[str, Price] | None, base_url: str | None
) -> float | None:
    own = price_for(model, prices)
    if own is not None:
        return _table_cost(usage, own)
    if not _library_knows(model, base_url):
        return None
    return float(_library_price(usage, model, base_url).total_price)


def _table_cost(usage: Usage, p: Price) -> float:
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    cached_price = p.cached_input if p.cached_input is not None else p.input
    return (
        (usage.prompt_tokens - cached) * p.input
        + cached * cached_price
        + usage.completion_tokens * p.output
    ) / 1_000_000


@functools.lru_cache(maxsize=256)
def _provider_url(model: str, base_url: str | None) -> str | None:
    """The URL to name the provider by: the endpoint's when the library knows it (OpenRouter's
    `openai/gpt-4o`), else None (a proxy or a self-hosted server: priced by model name)."""
    if base_url is None:
        return None
    import genai_prices  # on first use: it adds a quarter second to every start otherwise

    try:
        genai_prices.calc_price(genai_prices.Usage(), model, provider_api_url=base_url)
    except LookupError:
        return None
    return base_url


@functools.lru_cache(maxsize=256)
def _library_knows(model: str, base_url: str | None) -> bool:
    try:
        _library_price(Usage(), model, base_url)
    except LookupError:
        return False
    return True


def _library_price(usage: Usage, model: str, base_url: str | None) -> PriceCalculation:
    import genai_prices

    tokens = genai_prices.Usage(
        input_tokens=usage.prompt_tokens,
        cache_read_tokens=min(usage.cached_tokens, usage.prompt_tokens),
        output_tokens=usage.completion_tokens,
    )
    url = _provider_url(model, base_url)
    if url is not None:
        return genai_prices.calc_price(tokens, model, provider_api_url=url)
    return genai_prices.calc_price(tokens, model)


class UsageByRole(BaseModel):
    roles: dict[str, Usage] = Field(default_factory=dict)

    def add(self, role: str, usage: Usage) -> None:
        self.roles[role] = self.roles.get(role, Usage()) + usage

    @property
    def total(self) -> Usage:
        out = Usage()
        for u in self.roles.values():
            out = out + u
        return out
