"""A client that hangs up stops its generation: the middleware's logic, then the real server."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import httpx
import pytest

from verimap.local.disconnect import CLIENT_GONE, STOPPED_MESSAGE, CancelOnDisconnect


def _receiver(messages: list[dict], then_hang_up: asyncio.Event):
    async def receive() -> dict:
        if messages:
            return messages.pop(0)
        await then_hang_up.wait()
        return {"type": "http.disconnect"}

    return receive


async def _sent(_message: dict) -> None:
    return None


async def test_a_hang_up_after_the_body_marks_the_request_and_threads_see_it():
    from starlette.concurrency import run_in_threadpool

    seen: list[bool] = []
    hang_up = asyncio.Event()

    async def app(scope, receive, send):
        await receive()  # the body
        gone = await run_in_threadpool(CLIENT_GONE.get)  # what a worker thread's completion reads
        assert gone is not None and not gone.is_set()
        hang_up.set()
        for _ in range(100):
            if gone.is_set():
                break
            await asyncio.sleep(0.01)
        seen.append(gone.is_set())

    body = [{"type": "http.request", "body": b"{}", "more_body": False}]
    await CancelOnDisconnect(app)(
        {"type": "http", "method": "POST"}, _receiver(body, hang_up), _sent
    )
    assert seen == [True]
    assert CLIENT_GONE.get() is None


async def test_a_client_that_stays_is_never_marked_and_gets_do_not_pass_through():
    seen: list[object] = []

    async def app(scope, receive, send):
        message = await receive()
        seen.append((message["type"], CLIENT_GONE.get()))

    stays = asyncio.Event()
    body = [{"type": "http.request", "body": b"{}", "more_body": False}]
    await CancelOnDisconnect(app)({"type": "http", "method": "GET"}, _receiver(body, stays), _sent)
    assert seen == [("http.request", None)]

    async def post(scope, receive, send):
        await receive()
        await asyncio.sleep(0.05)
        gone = CLIENT_GONE.get()
        seen.append(gone is not None and gone.is_set())

    body = [{"type": "http.request", "body": b"{}", "more_body": False}]
    await CancelOnDisconnect(post)(
        {"type": "http", "method": "POST"}, _receiver(body, stays), _sent
    )
    assert seen[-1] is False


@pytest.mark.localmodel
def test_the_real_server_stops_generating_for_a_client_that_hung_up(local_server):
    """Without the middleware the server writes all 2,000 tokens for nobody (minutes here), and
    the next request waits behind them."""
    log = Path(local_server.log_path)
    before = sum(
        log.read_text(errors="replace").count(m) for m in ("client hung up", "before llm invoked")
    )
    auth = {"Authorization": f"Bearer {local_server.token}"}
    long = {
        "model": local_server.alias,
        "messages": [{"role": "user", "content": "Write a long essay on the history of numbers."}],
        "max_tokens": 2000,
        "temperature": 0,
    }
    url = f"{local_server.base_url}/chat/completions"
    # Gives up after 1 s: no reply is written that fast, and a hang-up before the first token
    # must stop the generation as well.
    hangs_up = httpx.Client(timeout=httpx.Timeout(30, read=1.0), trust_env=False)
    with hangs_up, pytest.raises(httpx.ReadTimeout):
        hangs_up.post(url, json=long, headers=auth)
    # Stopped at a token, or (a server slow to take the request) never started: llama-cpp-python
    # itself refuses a request whose client left before the model was called.
    ended = re.compile(
        r"client hung up; generation stopped after (\d+) tokens|"
        r"Disconnected from client \(via refresh/close\) before llm invoked()"
    )
    deadline = time.monotonic() + 60
    found: list[tuple[str, str]] = []
    while time.monotonic() < deadline and len(found) <= before:
        found = ended.findall(log.read_text(errors="replace"))
        time.sleep(0.2)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    assert len(found) == before + 1, f"the server went on generating for a gone client:\n{tail}"
    tokens = found[-1][0]
    assert not tokens or int(tokens) < 2000
    short = {**long, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
    with httpx.Client(timeout=60, trust_env=False) as client:
        reply = client.post(url, json=short, headers=auth)
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"]
    assert not tokens or STOPPED_MESSAGE.format(n=tokens) in log.read_text(errors="replace")
