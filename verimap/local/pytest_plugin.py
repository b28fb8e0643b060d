"""Pytest fixtures for tests on the real local model server (marker `localmodel`).

Load it with `pytest_plugins = ["verimap.local.pytest_plugin"]` in the root
conftest. One server per test session, on the catalog's smallest model unless
`VERIMAP_MODEL_FILE` / `VERIMAP_TEST_MODEL` say otherwise. When the runtime or
weights are missing, tests skip with the command that installs them, except
under CI (`CI` set), where they fail: CI must exercise the real path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from verimap.base.env import getenv
from verimap.llm.openai_model import OpenAIModel
from verimap.local import catalog, server, weights

TEST_MODEL = "qwen2.5-coder-0.5b"


def unavailable(reason: str) -> None:
    """Fail under CI, skip elsewhere: the service is part of CI, optional on a laptop."""
    if getenv("CI"):
        pytest.fail(f"local model unavailable under CI: {reason}", pytrace=False)
    pytest.skip(f"local model unavailable: {reason}")


@pytest.fixture(scope="session")
def local_model_file() -> Path:
    """The GGUF file the local-model tests serve."""
    env = getenv("VERIMAP_MODEL_FILE")
    if env:
        p = Path(env).expanduser()
        if not p.is_file():
            unavailable(f"VERIMAP_MODEL_FILE={p} does not exist")
        return p
    m = catalog.lookup(getenv("VERIMAP_TEST_MODEL", TEST_MODEL))
    if not weights.is_ready(m):
        unavailable(f"{m.name} is not pulled; run `verimap model pull --model {m.name}`")
    return catalog.model_path(m)


@pytest.fixture(scope="session")
def local_server(local_model_file: Path) -> Iterator[server.ServerInfo]:
    """A server started for this session and stopped at its end."""
    if not server.runtime_available():
        unavailable(server.INSTALL_HINT)
    alias = getenv("VERIMAP_TEST_MODEL", TEST_MODEL)
    info = server.start_server(local_model_file, alias=alias, keep=False, timeout=120)
    try:
        yield info
    finally:
        server.stop_server(info)


@pytest.fixture
async def local_model(local_server: server.ServerInfo) -> AsyncIterator[OpenAIModel]:
    """An `OpenAIModel` on the session's server (llama.cpp dialect)."""
    m = OpenAIModel(
        local_server.alias,
        base_url=local_server.base_url,
        api_key=local_server.token,
        local=True,
        max_retries=2,
    )
    try:
        yield m
    finally:
        await m.aclose()


@pytest.fixture(scope="module")
def default_model_server() -> Iterator[server.ServerInfo]:
    """The catalog's default model, for the few tests of judgement the smallest model
    cannot pass (it calls "Berlin" Paris); started per module, so its memory is freed after."""
    m = catalog.lookup(catalog.DEFAULT_MODEL)
    if not weights.is_ready(m):
        unavailable(f"{m.name} is not pulled; run `verimap model pull --model {m.name}`")
    if not server.runtime_available():
        unavailable(server.INSTALL_HINT)
    info = server.start_server(catalog.model_path(m), alias=m.name, keep=False, timeout=180)
    try:
        yield info
    finally:
        server.stop_server(info)


@pytest.fixture
async def default_local_model(
    default_model_server: server.ServerInfo,
) -> AsyncIterator[OpenAIModel]:
    m = OpenAIModel(
        default_model_server.alias,
        base_url=default_model_server.base_url,
        api_key=default_model_server.token,
        local=True,
        max_retries=2,
        max_tokens_cap=512,
    )
    try:
        yield m
    finally:
        await m.aclose()


@pytest.fixture
def local_models(local_model: OpenAIModel) -> dict[str, OpenAIModel]:
    """The local model in every role, as `verimap.build` takes it."""
    return {"planner": local_model, "executor": local_model, "judge": local_model}
