"""Shared test fixtures. Each section belongs to one area; add yours as a new section."""

import multiprocessing
import warnings
from collections.abc import Callable, Iterator
from multiprocessing.pool import Pool
from typing import Any

import pytest

from verimap.sandbox import SandboxUnavailable
from verimap.testing import need

# ---- local model server (owner: local-model area) ---------------------------------------------
# Session-scoped fixtures `local_model_file`, `local_server`, `local_model`, `local_models` for
# tests marked `localmodel` (see verimap/local/pytest_plugin.py).
pytest_plugins = ["verimap.local.pytest_plugin"]
# ---- end local model server ------------------------------------------------------------------


# ---- sandboxes (owner: sandbox area; used by checks, methods and sandbox tests) ----------------
def docker_pool(size: int) -> Iterator:
    """A Docker sandbox with `size` warm containers, closed after; off CI a missing daemon or
    image skips, on CI it fails."""
    from verimap.sandbox.docker import DockerSandbox

    try:
        sb = DockerSandbox(pool_size=size)
    except SandboxUnavailable as e:
        need(False, str(e))
    yield sb
    sb.pool.close()


@pytest.fixture(scope="session")
def docker_sandbox():
    """One shared warm pool for the session (like get_sandbox("docker") in a real run)."""
    yield from docker_pool(2)


@pytest.fixture(scope="session")
def process_sandbox():
    from verimap.sandbox.process import ProcessSandbox

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sb = ProcessSandbox(pool_size=2)
    yield sb
    sb.pool.close()


# ---- end sandboxes -------------------------------------------------------------------------


# ---- calls that may never return (owner: calculator area) ------------------------------------
class Bounded:
    """Runs a call in a spawned process and waits at most `seconds` for it, so a test of code
    that could run for hours on a hostile input (a huge factorial computed in one C call, which no
    signal or thread can stop) fails in bounded time instead of hanging. `fn` must be importable
    by name (a module-level function) and its arguments and result picklable."""

    def __init__(self) -> None:
        self._pool: Pool | None = None

    def __call__(self, seconds: float, fn: Callable[..., Any], *args: Any) -> Any:
        if self._pool is None:
            self._pool = multiprocessing.get_context("spawn").Pool(1)
        try:
            return self._pool.apply_async(fn, args).get(seconds)
        except multiprocessing.TimeoutError:
            self.close()
            pytest.fail(f"{fn.__name__}{args!r:.200} did not return within {seconds} s")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


@pytest.fixture(scope="session")
def bounded() -> Iterator[Bounded]:
    b = Bounded()
    yield b
    b.close()


# ---- end calls that may never return ---------------------------------------------------------
