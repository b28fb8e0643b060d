"""Docker backend specifics: confinement flags, availability errors, pool lifecycle."""

import asyncio
import subprocess
import time

import pytest

from verimap.sandbox import Outcome, SandboxUnavailable, get_sandbox
from verimap.sandbox.docker import DockerSandbox, check_daemon

pytestmark = pytest.mark.docker

CONTAINER_ID = (
    "print(open('/proc/self/cgroup').read().strip().splitlines()[-1].rsplit('/', 1)[-1][:12])"
)


def test_unreachable_daemon_is_reported_not_hung(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    start = time.monotonic()
    with pytest.raises(SandboxUnavailable, match="Docker daemon not running or not reachable"):
        check_daemon()
    assert time.monotonic() - start < 10


def test_missing_image_names_the_build_command(docker_sandbox):
    with pytest.raises(
        SandboxUnavailable,
        match=r"verimap-sandbox:missing is missing.*verimap sandbox build --offline",
    ):
        get_sandbox("docker", image="verimap-sandbox:missing")


def test_get_sandbox_is_cheap_and_shared(docker_sandbox):
    start = time.monotonic()
    boxes = {id(get_sandbox("docker")) for _ in range(200)}
    assert len(boxes) == 1
    assert time.monotonic() - start < 2
    assert get_sandbox("auto").kind == "docker"


def test_container_flags_confine():
    args = DockerSandbox(check=False).container_args("x")
    joined = " ".join(args)
    for flag in (
        "--network none",
        "--read-only",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--init",
        "--pids-limit 128",
        "--memory 1024m --memory-swap 1024m",
        "--user 10001:10001",
    ):
        assert flag in joined
    assert "-e" not in args and "--env" not in args and "--env-file" not in args


async def test_the_worker_loads_from_bytecode_compiled_into_the_image(docker_sandbox):
    # compiling worker.py at each start left ~3 MB of garbage in the worker and the spawner
    check = (
        "import importlib.util as u\n"
        "src = open('/opt/verimap/worker.py', 'rb').read()\n"
        "pyc = open(u.cache_from_source('/opt/verimap/worker.py'), 'rb').read(16)\n"
        "print(pyc[:4] == u.MAGIC_NUMBER, int.from_bytes(pyc[4:8], 'little'),"
        " pyc[8:16] == u.source_hash(src))"
    )
    res = await docker_sandbox.run_program(check)
    assert res.outcome == Outcome.PASS, res
    assert res.stdout.split() == ["True", "3", "True"]  # flags 3: a checked source hash


async def test_job_processes_come_from_a_spawner_without_the_supervisors_modules(docker_sandbox):
    # the spawner forks before the worker imports these, so no job process carries them
    res = await docker_sandbox.run_program(
        "import sys\nprint([m for m in ('ast', 'shutil') if m in sys.modules])"
    )
    assert res.outcome == Outcome.PASS, res
    assert res.stdout.strip() == "[]"


async def test_containers_are_recycled_after_n_jobs():
    sb = DockerSandbox(pool_size=1, recycle_after=3)
    try:
        ids = [(await sb.run_program(CONTAINER_ID)).stdout.strip() for _ in range(7)]
    finally:
        await sb.aclose()
    assert len(set(ids[0:3])) == 1 and len(set(ids[3:6])) == 1 and ids[0] != ids[3] != ids[6]


async def test_a_killed_container_is_replaced_and_its_job_reported(fresh_docker_sandbox):
    sb = fresh_docker_sandbox
    before = (await sb.run_program(CONTAINER_ID)).stdout.strip()
    worker = "int(open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[1])"
    res = await sb.run_program(f"import os\nos.kill({worker}, 9)")
    after = await sb.run_program(CONTAINER_ID)
    assert res.outcome is Outcome.OOM and "replaced" in res.message
    assert after.outcome is Outcome.PASS and after.stdout.strip() != before
    assert sb.pool.replaced == 1


async def test_close_removes_every_container():
    sb = DockerSandbox(pool_size=2)
    await asyncio.gather(*(sb.run_program("pass") for _ in range(4)))
    names = [f"name={h.label.split()[-1]}" for h in list(sb.pool._idle.queue) if h is not None]
    assert len(names) == 2
    await sb.aclose()
    for name in names:
        out = subprocess.run(
            ["docker", "ps", "-aq", "--filter", name], capture_output=True, text=True
        )
        assert out.stdout.strip() == ""
    # a closed pool restarts lazily on next use
    assert (await sb.run_program("pass")).outcome is Outcome.PASS
    await sb.aclose()


async def test_pool_serves_concurrent_tasks_with_mixed_outcomes(docker_sandbox):
    jobs = [docker_sandbox.run_program("print(1)") for _ in range(6)]
    jobs += [docker_sandbox.run_program("import time\ntime.sleep(5)", timeout=1) for _ in range(2)]
    jobs += [docker_sandbox.run_vf("assert False", {}, {}) for _ in range(4)]
    res = await asyncio.gather(*jobs)
    assert [r.outcome for r in res] == [Outcome.PASS] * 6 + [Outcome.TIMEOUT] * 2 + [
        Outcome.FAIL
    ] * 4


@pytest.mark.parametrize("transport", ["socket", "stdio"])
async def test_both_transports_work(transport):
    sb = DockerSandbox(pool_size=1, transport=transport)
    try:
        ok = await sb.run_vf("assert outputs['v'] == 1", {}, {"v": 1})
        bad = await sb.run_vf("assert outputs['v'] == 2", {}, {"v": 1})
        # the socket is gone once the worker connected: a job cannot talk to the host
        probe = await sb.run_program("import os\nprint(os.path.exists('/run/verimap/worker.sock'))")
    finally:
        await sb.aclose()
    assert sb.transport == transport
    assert ok.outcome is Outcome.PASS and bad.outcome is Outcome.FAIL
    assert probe.stdout.strip() == "False"


async def test_an_unusable_socket_falls_back_to_stdio(monkeypatch):
    """E.g. a daemon in another mount namespace cannot see the socket directory."""
    sb = DockerSandbox(pool_size=1, transport="socket")
    real_launch = sb._launch_with

    def socket_fails(transport):
        if transport == "socket":
            raise SandboxUnavailable("container failed to start: simulated unreachable socket")
        return real_launch(transport)

    monkeypatch.setattr(sb, "_launch_with", socket_fails)
    try:
        res = await sb.run_program("print('ok')")
    finally:
        await sb.aclose()
    assert res.outcome is Outcome.PASS and res.stdout == "ok\n"
    assert sb.transport == "stdio"
