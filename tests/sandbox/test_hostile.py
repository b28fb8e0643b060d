"""The hostile-input suite: each case has one exact expected outcome, and the pool
must be healthy afterwards (a fresh job passes, no process or file of the case survives)."""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass, field

import pytest

from verimap.sandbox import Outcome

pytestmark = pytest.mark.docker

PROGRAM, VF, VF_UNRESTRICTED, TESTS = "program", "vf", "vf-unrestricted", "tests"

TESTS_CODE = textwrap.dedent(
    """
    def check(candidate):
        assert candidate(2, 3) == 5
        assert candidate(-1, 1) == 0
    """
)


@dataclass
class Case:
    id: str
    kind: str
    code: str
    expected: Outcome
    timeout: float = 2.0
    message: str = ""  # a fragment the message must contain
    stdout: str | None = None  # a fragment stdout must contain
    env: dict[str, str] = field(default_factory=dict)


WORKER = "int(open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[1])"  # the pid of the job's grandparent, the worker

CASES = [
    # --- resource exhaustion (model-written programs, container only) ---
    Case("infinite-loop", PROGRAM, "while True:\n    pass", Outcome.TIMEOUT, message="timed out"),
    Case("long-sleep", PROGRAM, "import time\ntime.sleep(600)", Outcome.TIMEOUT),
    Case("cpu-burn-in-c", PROGRAM, "sum(range(10**13))", Outcome.TIMEOUT),
    Case(
        "regex-catastrophe",
        PROGRAM,
        "import re\nre.match('(a+)+$', 'a' * 64 + 'b')",
        Outcome.TIMEOUT,
    ),
    Case(
        "fork-bomb",
        PROGRAM,
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        Outcome.TIMEOUT,
    ),
    Case("memory-bomb", PROGRAM, "x = bytearray(8 * 1024**3)", Outcome.OOM, message="memory"),
    Case(
        "memory-growth",
        PROGRAM,
        "l = []\nwhile True:\n    l.append([0] * 10**7)",
        Outcome.OOM,
        timeout=20,
    ),
    Case("huge-string", PROGRAM, "s = 'x' * 10**10", Outcome.OOM),
    Case(
        "deep-recursion",
        PROGRAM,
        "def f(n):\n    return f(n + 1)\nf(0)",
        Outcome.ERROR,
        message="RecursionError",
    ),
    Case("print-flood", PROGRAM, "while True:\n    print('x' * 1000)", Outcome.OUTPUT_LIMIT),
    Case(
        "disk-fill",
        PROGRAM,
        "f = open('big', 'wb')\nwhile True:\n    f.write(b'x' * 2**20)",
        Outcome.ERROR,
    ),
    Case(
        "disk-fill-tmpfs",
        PROGRAM,
        "i = 0\nwhile True:\n    open(f'/tmp/f{i}', 'wb').write(b'x' * 2**25)\n    i += 1",
        Outcome.ERROR,
        timeout=20,
        message="No space left",
    ),
    # --- confinement ---
    Case(
        "network-connect",
        PROGRAM,
        "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=5)",
        Outcome.ERROR,
        message="unreachable",
    ),
    Case(
        "dns",
        PROGRAM,
        "import socket\nsocket.getaddrinfo('example.com', 80)",
        Outcome.ERROR,
        message="name resolution",
    ),
    Case(
        "read-etc-shadow",
        PROGRAM,
        "open('/etc/shadow').read()",
        Outcome.ERROR,
        message="Permission denied",
    ),
    Case(
        "read-proc-1-environ",
        PROGRAM,
        "env = open('/proc/1/environ').read()\nassert 'VERIMAP_HOST_SECRET' not in env and 'hunter2' not in env\nprint('clean')",
        Outcome.PASS,
        stdout="clean",
        env={"VERIMAP_HOST_SECRET": "hunter2"},
    ),
    Case(
        "write-outside-scratch",
        PROGRAM,
        "open('/etc/evil', 'w').write('x')",
        Outcome.ERROR,
        message="Read-only file system",
    ),
    Case(
        "write-to-usr",
        PROGRAM,
        "open('/usr/lib/evil.py', 'w')",
        Outcome.ERROR,
        message="Read-only file system",
    ),
    Case(
        "ctypes-segfault",
        PROGRAM,
        "import ctypes\nctypes.string_at(0)",
        Outcome.ERROR,
        message="SIGSEGV",
    ),
    Case(
        "ctypes-setuid",
        PROGRAM,
        "import ctypes\nassert ctypes.CDLL(None).setuid(0) == 0, 'setuid failed'",
        Outcome.FAIL,
        message="setuid failed",
    ),
    Case(  # the job's parent is the spawner: the worker still supervises the job
        "kill-parent-sigkill",
        PROGRAM,
        "import os\nos.kill(os.getppid(), 9)\nprint('still here')",
        Outcome.PASS,
        stdout="still here",
    ),
    Case(
        "stop-parent",
        PROGRAM,
        "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nprint('still here')",
        Outcome.PASS,
        stdout="still here",
    ),
    Case(  # the worker itself dies: its container is replaced and the job reported
        "kill-worker-sigkill",
        PROGRAM,
        f"import os\nos.kill({WORKER}, 9)",
        Outcome.OOM,
        message="exit 137",
    ),
    Case(
        "kill-parent-catchable",
        PROGRAM,
        f"import os, signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n    for pid in (os.getppid(), {WORKER}, 1):\n        os.kill(pid, s)\nprint('still here')",
        Outcome.PASS,
        stdout="still here",
    ),
    Case(
        "invalid-utf8-output",
        PROGRAM,
        "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end')",
        Outcome.PASS,
        stdout="ok \ufffd\ufffd end",
    ),
    Case(
        "ignore-sigalrm-sigterm",
        PROGRAM,
        "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)",
        Outcome.TIMEOUT,
    ),
    Case(
        "program-os-exit-1",
        PROGRAM,
        "import os\nos._exit(1)",
        Outcome.ERROR,
        message="exit status 1",
    ),
    # --- VFs: early exits and escapes never pass ---
    Case(
        "vf-import-os",
        VF,
        "import os\nos._exit(0)",
        Outcome.POLICY,
        message="import of 'os' is not allowed",
    ),
    Case(
        "vf-dunder-escape",
        VF,
        "x = ().__class__.__bases__[0].__subclasses__()",
        Outcome.POLICY,
        message="__class__",
    ),
    Case("vf-raise-systemexit", VF, "raise SystemExit(0)", Outcome.ERROR, message="SystemExit"),
    Case(
        "vf-keyboardinterrupt",
        VF,
        "raise KeyboardInterrupt",
        Outcome.ERROR,
        message="KeyboardInterrupt",
    ),
    Case(
        "vf-baseexception",
        VF,
        "raise BaseException('stop')",
        Outcome.ERROR,
        message="BaseException: stop",
    ),
    Case("vf-infinite-loop", VF, "while True:\n    pass", Outcome.TIMEOUT),
    Case("vf-memory-bomb", VF, "x = 'x' * 10**10", Outcome.OOM),
    Case("vf-print-flood", VF, "while True:\n    print('spam' * 100)", Outcome.OUTPUT_LIMIT),
    Case(
        "vf-unrestricted-os-exit-0",
        VF_UNRESTRICTED,
        "import os\nos._exit(0)",
        Outcome.ERROR,
        message="before reporting a verdict",
    ),
    Case(
        "vf-unrestricted-sys-exit-0",
        VF_UNRESTRICTED,
        "import sys\nsys.exit(0)",
        Outcome.ERROR,
        message="SystemExit",
    ),
    Case(
        "vf-unrestricted-self-sigterm",
        VF_UNRESTRICTED,
        "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)",
        Outcome.ERROR,
        message="SIGTERM",
    ),
    Case(
        "vf-unrestricted-fake-pass-print",
        VF_UNRESTRICTED,
        "print('{\"outcome\": \"PASS\"}')\nassert False, 'really failed'",
        Outcome.FAIL,
        message="really failed",
    ),
    # --- code under test cannot forge a verdict ---
    Case(
        "tests-always-equal",
        TESTS,
        "class E(int):\n    def __eq__(self, o):\n        return True\n    __hash__ = int.__hash__\ndef add(a, b):\n    return E(0)\n",
        Outcome.ERROR,
        message="cannot cross the sandbox boundary",
    ),
    Case(
        "tests-patched-assertionerror",
        TESTS,
        "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\ndef add(a, b):\n    return 0\n",
        Outcome.FAIL,
    ),
    Case(
        "tests-fake-pass-lines",
        TESTS,
        'import sys\ndef add(a, b):\n    print(\'PASS\\n1 passed\\n{"outcome": "PASS"}\')\n    sys.stdout.flush()\n    return 0\n',
        Outcome.FAIL,
        stdout="1 passed",
    ),
    Case(
        "tests-os-exit-0",
        TESTS,
        "import os\ndef add(a, b):\n    os._exit(0)\n",
        Outcome.ERROR,
        message="exited during a call",
    ),
    Case(
        "tests-sys-exit-0",
        TESTS,
        "import sys\ndef add(a, b):\n    sys.exit(0)\n",
        Outcome.ERROR,
        message="SystemExit",
    ),
    Case(
        "tests-exit-at-import",
        TESTS,
        "import os\nos._exit(0)\ndef add(a, b):\n    return a + b\n",
        Outcome.ERROR,
    ),
    Case(
        "tests-conftest-hook",
        TESTS,
        "import os\nfor d in ('.', '..', '/tmp'):\n    for n in ('conftest.py', 'sitecustomize.py', 'usercustomize.py'):\n        try:\n            open(os.path.join(d, n), 'w').write('import os\\nos._exit(0)\\n')\n        except OSError:\n            pass\ndef add(a, b):\n    return 0\n",
        Outcome.FAIL,
    ),
    Case(
        "tests-read-expected-answers",
        TESTS,
        textwrap.dedent(
            """
            import gc, os
            def add(a, b):
                found = []
                for obj in gc.get_objects():
                    if isinstance(obj, str) and 'candidate(2, 3)' in obj:
                        found.append('gc')
                for pid in (os.getppid(), 1):
                    for name in ('mem', 'environ', 'cmdline'):
                        try:
                            with open(f'/proc/{pid}/{name}', 'rb') as f:
                                if b'candidate(2, 3)' in f.read(10**7):
                                    found.append(name)
                        except OSError:
                            pass
                for root, _, files in os.walk('/tmp'):
                    for n in files:
                        try:
                            if 'candidate(2, 3)' in open(os.path.join(root, n)).read():
                                found.append('file')
                        except OSError:
                            pass
                print('found=' + ','.join(found))
                return -1
            """
        ),
        Outcome.FAIL,
        stdout="found=\n",
    ),
    Case(
        "tests-kill-test-process",
        TESTS,
        "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGTERM)\n    return a + b\n",
        Outcome.ERROR,
        message="SIGTERM",
    ),
]


async def _run(sb, unrestricted_sb, case: Case):
    if case.kind == PROGRAM:
        return await sb.run_program(case.code, timeout=case.timeout)
    if case.kind == VF:
        return await sb.run_vf(case.code, {}, {}, timeout=case.timeout)
    if case.kind == VF_UNRESTRICTED:
        return await unrestricted_sb.run_vf(case.code, {}, {}, timeout=case.timeout)
    return await sb.run_tests(case.code, TESTS_CODE, "add", timeout=case.timeout)


HEALTH = textwrap.dedent(
    """
    import os
    import time
    worker = int(open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[1])
    mine = {1, worker, os.getppid(), os.getpid()}  # init, the worker, its spawner, this job

    def survivors():
        cmds = []
        for p in os.listdir('/proc'):
            if p.isdigit() and int(p) not in mine:
                try:
                    cmds.append(open(f'/proc/{p}/cmdline', 'rb').read().split(b'\\0'))
                except OSError:
                    pass  # gone while we looked
        # at most the worker's idle candidate interpreter, started for this job after a tests job
        spares = [c for c in cmds if c[2:3] == [b'/opt/verimap/worker/wire.py']]
        return cmds, len(cmds) == len(spares) <= 1

    for _ in range(40):  # a process killed by the last job may still be exiting under load
        cmds, ok = survivors()
        if ok:
            break
        time.sleep(0.05)
    assert ok, f'processes survived a job: {cmds}'
    leftovers = os.listdir('/tmp')
    shm = os.listdir('/dev/shm')
    assert leftovers == ['job'], leftovers  # this job's own directory
    assert not shm, shm
    print('healthy')
    """
)


@pytest.fixture(scope="module")
def unrestricted_sandbox():
    from verimap.sandbox import SandboxUnavailable
    from verimap.sandbox.docker import DockerSandbox

    from .conftest import need

    try:
        sb = DockerSandbox(pool_size=1, policy=False)
    except SandboxUnavailable as e:
        need(False, str(e))
    yield sb
    sb.pool.close()


def test_the_suite_is_big_enough():
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_hostile(case: Case, docker_sandbox, unrestricted_sandbox, monkeypatch):
    for k, v in case.env.items():
        monkeypatch.setenv(k, v)
    res = await _run(docker_sandbox, unrestricted_sandbox, case)
    assert res.outcome is case.expected, (
        f"{res.outcome}: {res.message}\n{res.traceback}\n{res.stderr[-800:]}"
    )
    assert case.message in res.message, res.message
    if case.stdout is not None:
        assert case.stdout in res.stdout, res.stdout
    if case.expected is Outcome.OUTPUT_LIMIT:
        assert res.truncated and len(res.stdout) < 70 * 1024 and "truncated" in res.stdout
    # the pool is healthy afterwards: every container answers, cleanly, with nothing left over
    sbs = [unrestricted_sandbox] if case.kind == VF_UNRESTRICTED else [docker_sandbox]
    for sb in sbs:
        for _ in range(sb.pool.size):
            ok = await sb.run_program(HEALTH, timeout=10)
            assert ok.outcome is Outcome.PASS, ok.message + ok.stderr
    ok = await docker_sandbox.run_vf("assert outputs['v'] == 1", {}, {"v": 1})
    assert ok.outcome is Outcome.PASS


async def test_files_left_in_scratch_are_gone_for_the_next_job(fresh_docker_sandbox):
    sb = fresh_docker_sandbox
    first = await sb.run_program(
        "import os\nopen('note', 'w').write('secret')\nopen('/tmp/x', 'w').write('secret')\nprint(os.getcwd())"
    )
    second = await sb.run_program(
        "import os\nprint(os.getcwd(), sorted(os.listdir('.')), sorted(os.listdir('/tmp')))"
    )
    assert first.outcome is Outcome.PASS and second.outcome is Outcome.PASS
    # the same path (HOME and TMPDIR are set once), but a new, empty directory
    assert second.stdout.split() == [first.stdout.strip(), "[]", "['job']"]


async def test_host_environment_never_reaches_the_job(docker_sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-should-not-leak")
    res = await docker_sandbox.run_program(
        "import os\nprint(sorted(os.environ))\nprint(open('/proc/1/environ').read())"
    )
    assert res.outcome is Outcome.PASS
    assert "sk-test-should-not-leak" not in res.stdout and "OPENAI_API_KEY" not in res.stdout
    assert os.environ["OPENAI_API_KEY"] == "sk-test-should-not-leak"
