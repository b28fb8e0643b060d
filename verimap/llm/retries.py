"""When a failed request is tried again, and after how long.

A server that says when to come back (`Retry-After` in seconds or as an HTTP date, or
`retry-after-ms`) is taken at its word up to a bound: coming back sooner only earns another
429, and the rate limits of hosted APIs ask for waits of tens of seconds. A wait over the bound
(a quota spent for the day) ends the request at once, with the wait in the error, rather than
hammering the endpoint or sleeping for an hour. Without a word from the server the wait grows
exponentially, with jitter. Every request has a total budget of waiting, so a run never stalls
on one call however the limits are set, and every attempt a deadline (`request_timeout_from_env`):
an HTTP client's timeout is per read, so a server sending a byte at a time would hold it
forever. An attempt past its deadline is retried as a timeout.

Rate limits (429) have their own, larger count of retries: they say the endpoint is busy, not
broken, while the other failures (5xx, timeouts, an unreachable endpoint) stop after
`max_retries`, so a typo in a URL fails in seconds.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from verimap.base.env import EnvError, getenv_float

DEFAULT_MAX_WAIT = 60.0
DEFAULT_BUDGET = 300.0
# Generous for the local model on a few CPU cores, whose long replies take minutes.
DEFAULT_REQUEST_TIMEOUT = 600.0


def max_wait_from_env() -> float:
    """The longest single wait honoured: `VERIMAP_MAX_RETRY_WAIT` seconds, else 60 (`EnvError`
    when it is no number of seconds)."""
    value = getenv_float("VERIMAP_MAX_RETRY_WAIT", DEFAULT_MAX_WAIT)
    if not math.isfinite(value) or value < 0:
        raise EnvError(f"VERIMAP_MAX_RETRY_WAIT must be a number of seconds >= 0, got {value}")
    return value


def request_timeout_from_env() -> float:
    """The deadline of one attempt, from sending the request to the reply's last byte:
    `VERIMAP_REQUEST_TIMEOUT` seconds, else 600 (`EnvError` when it is no number of seconds
    above 0)."""
    value = getenv_float("VERIMAP_REQUEST_TIMEOUT", DEFAULT_REQUEST_TIMEOUT)
    if not math.isfinite(value) or value <= 0:
        raise EnvError(f"VERIMAP_REQUEST_TIMEOUT must be a number of seconds > 0, got {value}")
    return value


def server_wait(
    headers: Mapping[str, str] | None, now: Callable[[], float] = time.time
) -> float | None:
    """Seconds the server asked to wait before a retry, or None when it did not say (or said
    something unreadable). `retry-after-ms` (OpenAI, Azure) is more precise and wins."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000
            if math.isfinite(value):
                return max(0.0, value)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now())


class GiveUp(Exception):
    """No retry: `reason` says why (None: the retries allowed are used up)."""

    def __init__(self, reason: str | None = None):
        super().__init__(reason or "")
        self.reason = reason


@dataclass(frozen=True)
class RetryPolicy:
    """How one model's requests are retried (see the module's docstring)."""

    max_retries: int = 4
    max_rate_limit_retries: int = 12
    max_wait: float = DEFAULT_MAX_WAIT
    budget: float = DEFAULT_BUDGET
    backoff_base: float = 0.5
    backoff_max: float = 8.0

    def backoff(self, i: int) -> float:
        """The i-th wait (from 0) when the server named none: exponential, with ±25% jitter so
        that tasks failing together do not retry together."""
        d = min(self.backoff_base * (2**i), self.backoff_max)
        return d * (0.75 + random.random() / 2)


class Retries:
    """The retries of one request: what has been waited, and how many of each kind."""

    def __init__(self, policy: RetryPolicy):
        self.policy = policy
        self.retries = 0
        self.rate_limited = 0
        self.waited = 0.0

    def next_wait(self, *, rate_limited: bool, asked: float | None) -> float:
        """Seconds to wait before the next attempt; raises `GiveUp` when there is none."""
        p = self.policy
        if rate_limited and self.rate_limited >= p.max_rate_limit_retries:
            raise GiveUp(f"still rate limited after {self.rate_limited} retries")
        if not rate_limited and self.retries - self.rate_limited >= p.max_retries:
            raise GiveUp()
        if asked is not None and asked > p.max_wait:
            raise GiveUp(
                f"it asked to wait {asked:.0f} s, over the {p.max_wait:.0f} s verimap waits "
                "(VERIMAP_MAX_RETRY_WAIT)"
            )
        wait = asked if asked is not None else self.policy.backoff(self.retries)
        if self.waited + wait > p.budget:
            raise GiveUp(
                f"{self.waited:.0f} s waited already; {wait:.0f} s more would pass the "
                f"{p.budget:.0f} s budget for one request's retries"
            )
        self.retries += 1
        self.rate_limited += rate_limited
        self.waited += wait
        return wait
