"""verimap's own models (`verimap.local.endpoint.connect`), opened once for the samples of an eval.

Inspect runs a solver once per sample and offers no hook at the end of an eval that a solver
can count on, while `connect()` may start the local llama.cpp server, which takes seconds and a
few hundred MB: starting one per sample, or one per concurrent sample, would be waste. So the
first sample that needs the models opens them, later ones share them, and when the last one
has let go they are closed after `LINGER_S` unless another sample takes them first. An eval
that ends while they linger closes them on the way out: the event loop cancels the waiting
task at shutdown, and closing is what its cancellation does. One set per event loop, since a
model's HTTP client belongs to the loop that made it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

from verimap.base.protocols import Model

# Long enough to bridge the gap between samples run one at a time.
LINGER_S = 30.0


class SharedModels:
    def __init__(self, **endpoint: Any) -> None:
        self.endpoint = endpoint
        self.models: dict[str, Model] | None = None
        self.users = 0
        self._stack: AsyncExitStack | None = None
        self._lock = asyncio.Lock()
        self._closer: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[dict[str, Model]]:
        async with self._lock:
            if self.models is None:
                from verimap.local.endpoint import connect

                stack = AsyncExitStack()
                self.models = await stack.enter_async_context(connect(**self.endpoint))
                self._stack = stack
            self.users += 1
            models = self.models
        try:
            yield models
        finally:
            self.users -= 1
            if self.users == 0 and self._closer is None:
                self._closer = asyncio.get_running_loop().create_task(self._close_later())

    async def _close_later(self) -> None:
        try:
            await asyncio.sleep(LINGER_S)
        finally:
            self._closer = None
            if self.users == 0:
                await self.aclose()

    async def aclose(self) -> None:
        async with self._lock:
            stack, self._stack, self.models = self._stack, None, None
            if stack is not None:
                await stack.aclose()


_BY_LOOP: dict[asyncio.AbstractEventLoop, SharedModels] = {}


def shared_models() -> SharedModels:
    """The shared models of the running event loop (opened on first use)."""
    loop = asyncio.get_running_loop()
    for old in [lp for lp in _BY_LOOP if lp.is_closed()]:
        del _BY_LOOP[old]
    if loop not in _BY_LOOP:
        _BY_LOOP[loop] = SharedModels()
    return _BY_LOOP[loop]
