"""`verimap sandbox build|doctor` against the real daemon."""

import pytest
from click.testing import CliRunner

from verimap.cli import main

pytestmark = pytest.mark.docker


def test_build_is_a_no_op_when_the_image_exists(docker_sandbox):
    from verimap.sandbox.image import image_tag

    result = CliRunner().invoke(main, ["sandbox", "build", "--offline"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == image_tag()
    assert "already present" in result.output


def test_doctor_reports_every_confinement_check(docker_sandbox):
    result = CliRunner().invoke(main, ["sandbox", "doctor", "--sandbox", "docker"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "backend: docker" and lines[1].startswith("daemon: Docker ")
    checks = {ln.split(":")[0] for ln in lines if ln.startswith(("ok", "FAIL"))}
    for name in (
        "network blocked",
        "root filesystem read-only",
        "non-root user",
        "memory limit",
        "pids limit",
        "no host environment",
    ):
        assert f"ok   {name}" in checks
    assert not any(ln.startswith("FAIL") for ln in lines)


def test_doctor_says_why_the_backend_is_unavailable(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    result = CliRunner().invoke(main, ["sandbox", "doctor", "--sandbox", "docker"])
    assert result.exit_code == 1
    assert "UNAVAILABLE" in result.output and "not running or not reachable" in result.output
