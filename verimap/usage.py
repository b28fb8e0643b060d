"""Token and cost accounting, per call and per role.

Failed attempts count: a call that errors still costs a request (and often tokens),
and budgets must see it.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

PLANNER, EXECUTOR, JUDGE = "planner", "executor", "judge"
ROLES = (PLANNER, EXECUTOR, JUDGE)


class Price(BaseModel):
    """US dollars per million tokens."""

    input: float
    output: float
    cached_input: float | None = None


# The paper's App. B.6 prices (OpenAI list prices, per 1M tokens).
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4.1": Price(input=2.00, cached_input=0.50, output=8.00),
    "gpt-4o-mini": Price(input=0.15, cached_input=0.075, output=0.60),
}


class Usage(BaseModel):
    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            failed_calls=self.failed_calls + other.failed_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost=self.cost + other.cost,
        )


def price_for(model: str, prices: Mapping[str, Price] | None = None) -> Price | None:
    """Exact name first, then the longest known prefix (`gpt-4.1-2025-04-14` -> `gpt-4.1`)."""
    table = DEFAULT_PRICES if prices is None else prices
    if model in table:
        return table[model]
    best = max((k for k in table if model.startswith(k)), key=len, default=None)
    return table[best] if best else None


def cost_of(usage: Usage, model: str, prices: Mapping[str, Price] | None = None) -> float:
    p = price_for(model, prices)
    if p is None:
        return 0.0
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    cached_price = p.cached_input if p.cached_input is not None else p.input
    return (
        (usage.prompt_tokens - cached) * p.input
        + cached * cached_price
        + usage.completion_tokens * p.output
    ) / 1_000_000


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
