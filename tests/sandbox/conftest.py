"""Fixtures for the sandbox tests.

Docker tests need a daemon and the sandbox image. Off CI they skip with the
reason; on CI (`CI` set) a missing service is a failure, never a skip.
"""

from __future__ import annotations

import pytest

from tests.conftest import docker_pool
from verimap.testing import need


@pytest.fixture
def fresh_docker_sandbox():
    """A private single-container pool, for tests that damage or count containers."""
    yield from docker_pool(1)


@pytest.fixture(params=["process", pytest.param("docker", marks=pytest.mark.docker)])
def any_sandbox(request):
    """Both backends: the semantics of outcomes must not depend on the backend."""
    if request.param == "docker":
        return request.getfixturevalue("docker_sandbox")
    return request.getfixturevalue("process_sandbox")


def humaneval_file():
    """The whole HumanEval, resolved as the eval harness does (never the 10-task sample)."""
    from verimap.evals.data import MANIFEST, DataError, resolve

    try:
        src = resolve("humaneval")
    except DataError as e:
        need(False, str(e))
    need(not src.is_sample, f"only the HumanEval sample was found ({src.root})")
    return src.files[MANIFEST["humaneval"][0]]
