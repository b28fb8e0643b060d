"""A Docker daemon that cannot be reached is a named error with its cause and fix, never a hang.

No daemon needed: DOCKER_HOST points at sockets made to fail in each way.
"""

import shutil
import socket
import time

import pytest
import requests
import urllib3

from verimap.sandbox import SandboxUnavailable, get_sandbox
from verimap.sandbox.daemon import DockerUnavailable, check_daemon, unavailable
from verimap.sandbox.docker import DockerSandbox


@pytest.fixture
def dead_socket(monkeypatch, tmp_path):
    from verimap.sandbox import docker

    path = tmp_path / "docker.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    docker._checked.cache_clear()  # as in a fresh process: an earlier check passed on a live daemon
    return path


def test_no_socket_names_the_address_the_cause_and_the_fix(dead_socket):
    start = time.monotonic()
    with pytest.raises(DockerUnavailable) as info:
        check_daemon()
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert message.startswith("Docker daemon not running or not reachable at unix://")
    assert str(dead_socket) in message and "(No such file or directory)" in message
    assert "start dockerd" in message and "--sandbox process" in message


def test_a_socket_nobody_listens_on_is_refused(dead_socket):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(dead_socket))  # bound, never listening: connecting is refused
        with pytest.raises(DockerUnavailable, match=r"\(Connection refused\); start dockerd"):
            check_daemon()


def test_a_daemon_that_never_answers_times_out(dead_socket):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(dead_socket))
        s.listen(8)  # connections queue up, nothing is ever read or answered
        start = time.monotonic()
        with pytest.raises(DockerUnavailable, match=r"did not answer within 0\.5s at unix://"):
            check_daemon(timeout=0.5)
        assert time.monotonic() - start < 5


def test_permission_denied_says_how_to_get_access():
    # as root the socket's permissions cannot be made to fail: the error chain the SDK raises
    inner = PermissionError(13, "Permission denied")
    err = requests.exceptions.ConnectionError(
        urllib3.exceptions.ProtocolError("Connection aborted.", inner)
    )
    message = str(unavailable(err))
    assert "(permission denied on its socket)" in message and "docker group" in message


def test_the_error_is_a_sandbox_unavailable_and_no_cause_is_lost():
    err = unavailable(RuntimeError("something unforeseen"))
    assert isinstance(err, SandboxUnavailable)
    assert "(something unforeseen)" in str(err)


def test_get_sandbox_docker_raises_it_and_auto_falls_back(dead_socket):
    with pytest.raises(DockerUnavailable, match="start dockerd"):
        get_sandbox("docker", shared=False)
    with pytest.warns(RuntimeWarning, match="isolated far less"):
        assert get_sandbox("auto", shared=False).kind == "process"


async def test_a_daemon_gone_after_the_check_fails_the_job_with_the_same_error(dead_socket):
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed")
    sb = DockerSandbox(check=False, pool_size=1, image="verimap-sandbox:any")
    try:
        with pytest.raises(DockerUnavailable, match="not running or not reachable"):
            await sb.run_vf("assert True", {}, {})
        assert sb.transport == "socket"  # an unreachable daemon is no reason to change transport
    finally:
        await sb.aclose()
