"""Docker backend specifics: confinement, availability errors, pool lifecycle."""

import asyncio
import subprocess
import time

import pytest

from verimap.sandbox import Outcome, SandboxUnavailable, daemon, get_sandbox
from verimap.sandbox.docker import DockerSandbox
from verimap.sandbox.launch import WORKER_DIR, WORKER_IN_IMAGE

pytestmark = pytest.mark.docker

CONTAINER_ID = (
    "print(open('/proc/self/cgroup').read().strip().splitlines()[-1].rsplit('/', 1)[-1][:12])"
)


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


def test_the_container_config_confines():
    config = DockerSandbox(check=False).container_config("x")
    assert config["network_mode"] == "none" and config["read_only"] is True
    assert config["cap_drop"] == ["ALL"] and config["security_opt"] == ["no-new-privileges"]
    assert config["init"] is True and config["pids_limit"] == 128
    assert config["mem_limit"] == config["memswap_limit"] == "1024m"
    assert config["user"] == "10001:10001" and config["auto_remove"] is True
    assert "environment" not in config


async def test_the_daemon_applied_the_confinement(fresh_docker_sandbox):
    """What the daemon reports for a live container (SDK inspect), not what we asked for."""
    sb = fresh_docker_sandbox
    assert (await sb.run_program("pass")).outcome is Outcome.PASS
    (handle,) = [h for h in sb.pool._idle.queue if h is not None]
    attrs = daemon.client().api.inspect_container(handle.label.split()[-1])
    host, config = attrs["HostConfig"], attrs["Config"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Init"] is True and host["PidsLimit"] == 128 and host["AutoRemove"] is True
    assert host["Memory"] == host["MemorySwap"] == 1024 * 1024 * 1024
    assert host["NanoCpus"] == 10**9 and host["LogConfig"]["Type"] == "none"
    assert host["Tmpfs"] == {"/tmp": "rw,nosuid,nodev,noexec,size=256m,mode=1777"}
    assert config["User"] == "10001:10001" and config["OpenStdin"] and config["StdinOnce"]
    image_env = {"PATH", "LANG", "OPENBLAS_NUM_THREADS", "PYTHONDONTWRITEBYTECODE"}
    assert {v.split("=")[0] for v in config["Env"] or []} <= image_env  # nothing of the host's


async def test_the_worker_loads_from_bytecode_compiled_into_the_image(docker_sandbox):
    # compiling the worker at each start left ~3 MB of garbage in the worker and the spawner
    check = (
        "import glob, importlib.util as u\n"
        f"sources = sorted(glob.glob({WORKER_IN_IMAGE!r} + '/*.py'))\n"
        "for path in sources:\n"
        "    pyc = open(u.cache_from_source(path), 'rb').read(16)\n"
        "    ok = pyc[:4] == u.MAGIC_NUMBER and pyc[8:16] == u.source_hash(open(path, 'rb').read())\n"
        "    print(ok, int.from_bytes(pyc[4:8], 'little'))\n"
    )
    res = await docker_sandbox.run_program(check)
    assert res.outcome == Outcome.PASS, res
    modules = res.stdout.splitlines()
    assert len(modules) == len(list(WORKER_DIR.glob("*.py")))  # the whole package
    assert set(modules) == {"True 3"}  # flags 3: a checked source hash


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
