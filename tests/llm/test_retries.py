"""Retries over real HTTP on loopback: Retry-After honoured up to a bound, within a budget."""

from __future__ import annotations

import logging
import time
from email.utils import formatdate

import pytest

from verimap.base.messages import ModelRequest, UserMessage
from verimap.base.model import ModelError
from verimap.llm.openai_model import OpenAIModel
from verimap.llm.retries import GiveUp, Retries, RetryPolicy, max_wait_from_env, server_wait

from .conftest import Reply, completion


def ask() -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content="hi")])


def limited(headers: dict[str, str]) -> Reply:
    return Reply(status=429, body={"error": {"message": "rate limited"}}, headers=headers)


class Sleeps:
    """A sleep that records what it was asked and returns at once."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)


def test_server_wait_reads_seconds_dates_and_milliseconds():
    assert server_wait({"retry-after": "20"}) == 20.0
    assert server_wait({"retry-after": "1.5"}) == 1.5
    assert server_wait({"retry-after-ms": "250", "retry-after": "9"}) == 0.25  # ms is precise
    now = 1_700_000_000.0
    date = formatdate(now + 30, usegmt=True)
    assert server_wait({"retry-after": date}, now=lambda: now) == pytest.approx(30.0)
    assert server_wait({"retry-after": formatdate(now - 5, usegmt=True)}, now=lambda: now) == 0.0
    assert server_wait({"retry-after": "soon"}) is None
    assert server_wait({"retry-after": "nan"}) is None
    assert server_wait({"retry-after": "-3"}) == 0.0
    assert server_wait({}) is None and server_wait(None) is None


def test_the_policy_bounds_one_wait_the_total_and_the_counts():
    r = Retries(RetryPolicy(max_retries=1, max_rate_limit_retries=3, max_wait=60, budget=100))
    assert r.next_wait(rate_limited=True, asked=20) == 20
    assert r.next_wait(rate_limited=True, asked=30) == 30
    # The third retry backs off as one (0.5 s x 2^2, ±25%), the first not rate limited.
    assert 1.5 <= r.next_wait(rate_limited=False, asked=None) <= 2.5
    with pytest.raises(GiveUp) as over:
        r.next_wait(rate_limited=True, asked=61)
    assert "asked to wait 61 s, over the 60 s" in str(over.value.reason)
    with pytest.raises(GiveUp) as budget:
        r.next_wait(rate_limited=True, asked=60)
    assert "100 s budget" in str(budget.value.reason)
    with pytest.raises(GiveUp) as spent:
        r.next_wait(rate_limited=False, asked=None)
    assert spent.value.reason is None  # max_retries used up: the caller's own message
    many = Retries(RetryPolicy(max_rate_limit_retries=2))
    many.next_wait(rate_limited=True, asked=0)
    many.next_wait(rate_limited=True, asked=0)
    with pytest.raises(GiveUp, match="still rate limited after 2 retries"):
        many.next_wait(rate_limited=True, asked=0)


def test_the_bound_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("VERIMAP_MAX_RETRY_WAIT", "90")
    assert max_wait_from_env() == 90.0
    assert OpenAIModel("m", base_url="http://127.0.0.1:1/v1").retry_policy.max_wait == 90.0
    monkeypatch.setenv("VERIMAP_MAX_RETRY_WAIT", "a minute")
    with pytest.raises(ValueError, match="VERIMAP_MAX_RETRY_WAIT"):
        max_wait_from_env()
    with pytest.raises(ModelError, match="VERIMAP_MAX_RETRY_WAIT"):
        OpenAIModel("m", base_url="http://127.0.0.1:1/v1")
    monkeypatch.delenv("VERIMAP_MAX_RETRY_WAIT")
    assert max_wait_from_env() == 60.0


async def test_a_429_with_retry_after_20_s_is_waited_out_and_succeeds(http_server, caplog):
    """The goal of issue 42: the 20 s are asked of the sleep, which the test does not spend."""
    http_server.replies = [limited({"retry-after": "20"}), Reply(body=completion("done"))]
    sleeps = Sleeps()
    m = OpenAIModel("m", base_url=http_server.url, api_key="k", sleep=sleeps)
    with caplog.at_level(logging.INFO, logger="verimap"):
        r = await m.request(ask())
    assert r.content == "done" and sleeps.asked == [20.0]
    assert len(http_server.requests) == 2
    assert (r.usage.calls, r.usage.failed_calls) == (2, 1)
    assert "answered HTTP 429; waiting 20 s as it asked (retry 1)" in caplog.text


async def test_a_real_retry_after_of_one_second_is_waited_end_to_end(http_server):
    http_server.replies = [limited({"retry-after": "1"}), Reply(body=completion("done"))]
    m = OpenAIModel("m", base_url=http_server.url, api_key="k")
    t0 = time.monotonic()
    r = await m.request(ask())
    assert r.content == "done"
    assert 1.0 <= time.monotonic() - t0 < 5.0


async def test_retry_after_ms_and_an_http_date_are_honoured(http_server):
    date = formatdate(time.time() + 40, usegmt=True)
    http_server.replies = [
        limited({"retry-after-ms": "1500"}),
        Reply(status=503, body={"error": {"message": "busy"}}, headers={"retry-after": date}),
        Reply(body=completion()),
    ]
    sleeps = Sleeps()
    await OpenAIModel("m", base_url=http_server.url, api_key="k", sleep=sleeps).request(ask())
    assert sleeps.asked[0] == 1.5
    assert 38 <= sleeps.asked[1] <= 40


async def test_a_wait_over_the_bound_fails_at_once_and_says_so(http_server):
    http_server.replies = [limited({"retry-after": "3600"})]
    sleeps = Sleeps()
    m = OpenAIModel("m", base_url=http_server.url, api_key="k", sleep=sleeps, max_retry_wait=60)
    with pytest.raises(ModelError) as ei:
        await m.request(ask())
    assert sleeps.asked == [] and len(http_server.requests) == 1
    assert "HTTP 429" in str(ei.value) and "asked to wait 3600 s, over the 60 s" in str(ei.value)
    assert (ei.value.usage.calls, ei.value.usage.failed_calls) == (1, 1)


async def test_rate_limits_get_more_retries_than_errors_but_the_budget_ends_them(http_server):
    http_server.replies = [limited({"retry-after": "50"})]
    sleeps = Sleeps()
    m = OpenAIModel("m", base_url=http_server.url, api_key="k", sleep=sleeps, max_retries=1)
    with pytest.raises(ModelError, match="300 s budget"):
        await m.request(ask())
    assert sleeps.asked == [50.0] * 6 and len(http_server.requests) == 7


async def test_a_429_without_retry_after_backs_off_and_server_errors_stop_at_max_retries(
    http_server,
):
    http_server.replies = [limited({}), limited({}), Reply(body=completion())]
    sleeps = Sleeps()
    kw = {"api_key": "k", "sleep": sleeps, "backoff_base": 0.5, "max_retries": 0}
    await OpenAIModel("m", base_url=http_server.url, **kw).request(ask())
    assert len(sleeps.asked) == 2 and 0.375 <= sleeps.asked[0] <= 0.625
    http_server.requests.clear()
    http_server.replies = [Reply(status=500, body={"error": {"message": "boom"}})]
    with pytest.raises(ModelError, match="HTTP 500"):
        await OpenAIModel("m", base_url=http_server.url, **kw).request(ask())
    assert len(http_server.requests) == 1
