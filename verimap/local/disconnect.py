"""A client that hangs up stops the generation it asked for (inside the local server).

llama-cpp-python runs a non-streamed completion in a worker thread to its end, whether or not
anyone is still waiting: a `verimap run` stopped with Ctrl-C, or a benchmark killed mid-request,
left the kept server generating for minutes, and the next command's first call waited behind
it (362 s once, eval/results.md). The server answers one request at a time, so
that wait is anyone's. Here an ASGI middleware notices the client's disconnect and sets a flag
the request carries in a context variable (worker threads run in a copy of the request's
context), and every completion is given one more stopping criterion that reads it: generation
stops at the next token. The prompt's evaluation is not interrupted; it takes seconds, not
minutes.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Set while a request's client is known to have gone; None outside a request.
CLIENT_GONE: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "verimap_client_gone", default=None
)
STOPPED_MESSAGE = "verimap: the client hung up; generation stopped after {n} tokens"


class CancelOnDisconnect:
    """Watches each POST's connection once its body has been read, and marks the request's
    `CLIENT_GONE` when the client disconnects before the response is complete."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        gone = threading.Event()
        read = asyncio.Event()
        token = CLIENT_GONE.set(gone)

        async def receive_body() -> Message:
            message = await receive()
            if message.get("type") == "http.disconnect":
                gone.set()
            elif not message.get("more_body", False):
                read.set()
            return message

        async def watch() -> None:
            await read.wait()
            while True:
                message = await receive()
                if message.get("type") == "http.disconnect":
                    gone.set()
                    return

        watcher = asyncio.ensure_future(watch())
        try:
            await self.app(scope, receive_body, send)
        finally:
            watcher.cancel()
            CLIENT_GONE.reset(token)


def stop_when_client_gone() -> None:
    """Give every completion of the runtime a stopping criterion that ends it once its
    request's client has gone; outside a request (no flag) completions run as before."""
    try:
        from llama_cpp import Llama, StoppingCriteriaList
    except ImportError:
        return
    complete = Llama.create_completion

    def create_completion(self: Llama, *args: Any, **kwargs: Any) -> Any:
        gone = CLIENT_GONE.get()
        if gone is None:
            return complete(self, *args, **kwargs)
        made, said = 0, False  # the runtime asks again after a stop: say it once

        def client_gone(_ids: Any, _logits: Any) -> bool:
            nonlocal made, said
            if not gone.is_set():
                made += 1
                return False
            if not said:
                said = True
                print(STOPPED_MESSAGE.format(n=made), file=sys.stderr, flush=True)
            return True

        criteria = list(kwargs.get("stopping_criteria") or [])
        kwargs["stopping_criteria"] = StoppingCriteriaList([*criteria, client_gone])
        return complete(self, *args, **kwargs)

    Llama.create_completion = create_completion  # type: ignore[method-assign]
