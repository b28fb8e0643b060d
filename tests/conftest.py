"""Shared test fixtures. Each section belongs to one area; add yours as a new section."""

import warnings
from collections.abc import Iterator

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
