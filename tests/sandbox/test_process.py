"""The process backend (no Docker): same outcomes, weaker isolation, a loud warning."""

import os
import secrets
import subprocess
import sys
import time

import pytest

from verimap.sandbox import Outcome
from verimap.sandbox.process import ProcessSandbox, unshare_prefix


def test_creating_it_warns_loudly():
    with pytest.warns(RuntimeWarning, match="isolated far less"):
        sb = ProcessSandbox(pool_size=1)
    sb.pool.close()


async def test_network_is_blocked_where_unshare_is_permitted(process_sandbox):
    if not unshare_prefix():
        pytest.skip("unshare is not permitted on this machine")
    res = await process_sandbox.run_program(
        "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=3)"
    )
    assert res.outcome is Outcome.ERROR and "unreachable" in res.message


async def test_no_host_environment(process_sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-process-should-not-leak")
    res = await process_sandbox.run_program("import os\nprint(dict(os.environ))")
    assert res.outcome is Outcome.PASS and "sk-process-should-not-leak" not in res.stdout


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ("x = bytearray(8 * 1024**3)", Outcome.OOM),
        ("while True:\n    print('x' * 1000)", Outcome.OUTPUT_LIMIT),
        ("import time\ntime.sleep(60)", Outcome.TIMEOUT),
        ("f = open('big', 'wb')\nwhile True:\n    f.write(b'x' * 2**20)", Outcome.ERROR),
        ("import os\nos._exit(0)", Outcome.PASS),
    ],
)
async def test_limits(process_sandbox, code, outcome):
    res = await process_sandbox.run_program(code, timeout=2)
    assert res.outcome is outcome, res.message


@pytest.fixture
def one_worker():
    """A single worker, so the next job is known to run after the previous one's cleanup."""
    with pytest.warns(RuntimeWarning):
        sb = ProcessSandbox(pool_size=1)
    yield sb
    sb.pool.close()


async def test_processes_a_job_leaves_behind_are_killed(one_worker):
    process_sandbox = one_worker
    marker = secrets.token_hex(8)
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', '300', '{marker}'])\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
    )
    assert (await process_sandbox.run_program(code)).outcome is Outcome.PASS
    await process_sandbox.run_program("pass")  # the worker has cleaned up before answering this
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    alive.append(pid)
        except OSError:
            pass
    assert alive == []


async def test_scratch_is_fresh_per_job(one_worker):
    process_sandbox = one_worker
    first = await process_sandbox.run_program(
        "import os\nopen('note', 'w').write('x')\nprint(os.getcwd())"
    )
    second = await process_sandbox.run_program("import os\nprint(os.getcwd(), os.listdir('.'))")
    # the same path (HOME and TMPDIR are set once), but a new, empty directory
    assert second.stdout.split() == [first.stdout.strip(), "[]"]
    assert not os.path.exists(os.path.join(first.stdout.strip(), "note"))


def test_workers_clean_up_after_themselves_when_the_host_dies():
    script = (
        "import asyncio, os, sys, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "from verimap.sandbox.process import ProcessSandbox\n"
        "sb = ProcessSandbox(pool_size=1)\n"
        "res = asyncio.run(sb.run_program('import os\\nprint(os.getcwd())'))\n"
        "print(res.stdout, flush=True)\n"
        "os._exit(0)  # no close(), no atexit: the worker only sees its stdin close\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    jobdir = out.stdout.strip()
    scratch_root = os.path.dirname(os.path.dirname(jobdir))
    assert os.path.basename(scratch_root).startswith("verimap-sandbox-"), out
    for _ in range(50):
        if not os.path.exists(scratch_root):
            break
        time.sleep(0.1)
    assert not os.path.exists(scratch_root)
