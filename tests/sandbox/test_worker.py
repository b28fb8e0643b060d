"""Properties of the worker package itself (it runs inside the container, stdlib only)."""

import json
import os
import subprocess
import sys

import pytest

from verimap.sandbox.launch import BOOT, PACKAGE, WORKER_DIR
from verimap.sandbox.worker import constants, jobs, restricted, unix, wire

# Loads the package as a worker process does (launch.BOOT, without starting it), then
# binds its modules; sys.argv[1] is the package directory.
LOADER = (
    BOOT.split("; from ")[0]
    + "\nfrom verimap_worker import jobs, restricted, spawner, supervisor, unix, wire\n"
)


def test_the_package_loads_alone_and_with_no_module_with_a_costly_at_fork_hook():
    """threading and random register at-fork hooks that run in every job's child;
    measured at ~65 page faults (0.4 ms of CPU) per job on the build VM. Nothing of
    verimap (pydantic and the rest would sit in every job process) loads either."""
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n" + LOADER + "import verimap_worker.serve\n"
        "new = set(sys.modules) - before\n"
        "print(sorted({'threading', 'random', 'tempfile', 'subprocess'} & new))\n"
        "print(sorted(m for m in new if m.startswith(('verimap.', 'pydantic'))))\n"
        f"print(sorted(m.split('.')[1] for m in new if m.startswith('{PACKAGE}.')))\n"
    )
    out = subprocess.run(  # -S: no site .pth files preloading modules, like the image
        [sys.executable, "-I", "-S", "-c", probe, str(WORKER_DIR)],
        capture_output=True,
        text=True,
        check=True,
    )
    hooks, verimap, modules = out.stdout.splitlines()
    assert hooks == verimap == "[]"
    assert eval(modules) == sorted(p.stem for p in WORKER_DIR.glob("*.py") if p.stem != "__init__")


def run_with_worker(probe: str, workdir) -> subprocess.CompletedProcess:
    """Run `probe` in a fresh interpreter with the worker package loaded as a worker process
    loads it (its modules bound), `sys.argv[2]` naming `workdir`: for what must not touch
    the test process."""
    return subprocess.run(
        [sys.executable, "-I", "-c", LOADER + probe, str(WORKER_DIR), str(workdir)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_fresh_dir_makes_distinct_private_directories(tmp_path):
    made = {unix.fresh_dir(str(tmp_path), "job-") for _ in range(50)}
    assert len(made) == 50
    for path in made:
        assert path.startswith(str(tmp_path / "job-"))
        assert (tmp_path / path).stat().st_mode & 0o777 == 0o700


DRIVER = """
import json, os
unix.set_subreaper()  # as serve() does
worker = supervisor.Supervisor(False, sys.argv[2])
if len(sys.argv) > 3:  # something in the way of the usual job directory
    open(os.path.join(sys.argv[2], 'job'), 'w').close()
worker.prefork()
out = []
for code in json.loads(sys.stdin.read()):
    spawner = worker.spawner.pid
    res = worker.run({'kind': 'program', 'code': code, 'timeout': 10})
    worker.cleanup()
    res['spawner_before'], res['spawner_after'] = spawner, worker.spawner.pid
    out.append(res)
worker.shutdown(remove_root=True)
print(json.dumps(out))
"""


def run_jobs(tmp_path, *programs: str, blocked: bool = False) -> list[dict]:
    """Run programs one after another on a real worker (as this user, no container)."""
    import json

    argv = [sys.executable, "-I", "-c", LOADER + DRIVER, str(WORKER_DIR), str(tmp_path / "scratch")]
    proc = subprocess.run(
        argv + (["blocked"] if blocked else []),
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(proc.stdout)


def test_job_processes_come_from_the_spawner_and_their_status_is_relayed(tmp_path):
    """The worker never forks a job itself; exit statuses and signals still reach it exactly."""
    parent, exit3, segv = run_jobs(
        tmp_path,
        "import os\nprint(os.getppid(), os.getpid())",
        "import os\nos._exit(3)",
        "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)",
    )
    ppid = int(parent["stdout"].split()[0])
    assert parent["outcome"] == "PASS" and ppid == parent["spawner_before"]
    assert exit3["outcome"] == "ERROR" and exit3["message"] == "exit status 3"
    assert segv["outcome"] == "ERROR" and "SIGSEGV" in segv["message"]


def test_a_killed_spawner_is_replaced_and_a_stopped_one_resumed(tmp_path):
    killed, after_kill, stopped, after_stop = run_jobs(
        tmp_path,
        "import os\nos.kill(os.getppid(), 9)\nprint('still here')",
        "print('next')",
        "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nprint('still here')",
        "print('next')",
    )
    assert killed["outcome"] == "PASS" and killed["stdout"] == "still here\n"
    assert killed["spawner_after"] != killed["spawner_before"]
    assert after_kill["outcome"] == "PASS" and after_kill["stdout"] == "next\n"
    assert stopped["outcome"] == "PASS"
    assert stopped["spawner_after"] == stopped["spawner_before"]  # resumed, not replaced
    assert after_stop["outcome"] == "PASS" and after_stop["stdout"] == "next\n"


def test_processes_a_job_leaves_behind_are_killed_before_the_next_job(tmp_path):
    note = tmp_path / "left.pid"
    left, probe = run_jobs(
        tmp_path,
        "import os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    os.setsid()\n    time.sleep(60)\n"
        f"open({str(note)!r}, 'w').write(str(pid))",
        "import os\n"
        f"pid = int(open({str(note)!r}).read())\n"
        "try:\n    os.kill(pid, 0)\n    print('alive')\n"
        "except ProcessLookupError:\n    print('gone')",
    )
    assert left["outcome"] == "PASS"
    assert probe["outcome"] == "PASS" and probe["stdout"] == "gone\n"


def test_a_spawner_dead_before_a_request_does_not_take_the_worker_down(tmp_path):
    """The worker runs with SIGPIPE at its default (so it dies with its host); a request to
    a spawner that died after the liveness check must end in SpawnerGone (the worker then
    starts another), not in SIGPIPE: a SOCK_SEQPACKET send to a closed peer raises none."""
    probe = (
        "import os, signal\n"
        "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
        "s = spawner.Spawner(sys.argv[2])\n"
        "os.kill(s.pid, signal.SIGKILL)\n"
        "os.waitpid(s.pid, 0)\n"
        "r, wr = os.pipe()\n"
        "try:\n"
        "    s.spawn({'job': r}, sys.argv[2], sys.argv[2])\n"
        "except spawner.SpawnerGone as e:\n"
        "    print('gone:', e)\n"
    )
    out = run_with_worker(probe, tmp_path)
    assert out.returncode == 0, (out.returncode, out.stderr)
    assert out.stdout.startswith("gone: the spawner died")


def test_a_job_process_takes_the_prebuilt_vf_namespace_once(monkeypatch):
    monkeypatch.setattr(restricted, "_SPENT", [])
    restricted.prebuild()
    prebuilt = restricted._VF_GLOBALS
    assert prebuilt is not None
    assert restricted.take_namespace() is prebuilt
    second = restricted.take_namespace()  # a second VF in the same process gets its own
    assert second is not prebuilt and second.keys() == prebuilt.keys()


@pytest.mark.parametrize("blocked", [False, True])
def test_home_and_tmpdir_are_the_jobs_fresh_scratch(tmp_path, blocked):
    # the spawner sets them once for the usual path; a job elsewhere sets its own
    where = "import os\nprint(os.environ['HOME'], os.environ['TMPDIR'], os.getcwd())"
    results = run_jobs(tmp_path, where, where, blocked=blocked)
    for res in results:
        home, tmpdir, cwd = res["stdout"].split()
        assert home == tmpdir == cwd and os.path.isabs(cwd)
        assert cwd.endswith(os.sep + os.path.join("job", "work")) != blocked
    assert blocked or results[0]["stdout"] == results[1]["stdout"]


def test_a_taken_vf_namespace_is_kept_until_the_process_exits(monkeypatch):
    # freeing it would write to every object it holds: page copies while the worker waits
    monkeypatch.setattr(restricted, "_VF_GLOBALS", restricted.restricted_globals())
    monkeypatch.setattr(restricted, "_SPENT", [])
    taken = [restricted.take_namespace(), restricted.take_namespace()]
    assert [id(ns) for ns in restricted._SPENT] == [id(ns) for ns in taken]


def test_the_warm_up_runs_the_usual_vf_path_and_leaves_the_vf_namespace_alone(tmp_path):
    # a warm-up that failed would fail silently (a job must not): check it runs through
    probe = (
        "import linecache\n"
        "restricted.prebuild()\n"
        "prebuilt = restricted._VF_GLOBALS\n"
        "before = dict(prebuilt)\n"
        "ok = jobs.warm_up(sys.argv[2], sys.argv[2])\n"
        "print(ok, restricted._VF_GLOBALS is prebuilt and prebuilt == before,"
        " '<vf>' in linecache.cache)\n"
    )
    out = run_with_worker(probe, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "False"]


def test_the_warm_up_vf_takes_the_branch_a_checked_vf_takes():
    # the host sends bytecode when the worker reads its Python's: warm that branch
    from verimap.sandbox.policy import vf_job_code

    sent = vf_job_code("assert True", constants.MAGIC)
    warm = json.loads(jobs.WARM_FRAME[wire.FRAME.size :])
    assert warm["kind"] == "vf" and sent.keys() <= warm.keys() and warm["magic"] == constants.MAGIC
