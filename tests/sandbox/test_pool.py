"""Pool logic with a scripted stand-in worker (a test double, no sandbox needed)."""

import sys
import textwrap

import pytest

from verimap.sandbox import pool as pool_mod
from verimap.sandbox.pool import WorkerHandle, WorkerPool
from verimap.sandbox.worker_module import worker_path

# A fake worker that says hello, then answers jobs according to their "behave" field.
FAKE_WORKER = textwrap.dedent(
    """
    import importlib.util, os, sys, time
    spec = importlib.util.spec_from_file_location("w", sys.argv[1])
    w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
    w.write_frame(1, {"ready": True, "protocol": w.PROTOCOL, "python": "fake"})
    while True:
        job = w.read_frame(0)
        if job is None:
            break
        behave = job.get("behave")
        if behave == "hang":
            time.sleep(600)
        if behave == "die":
            os._exit(3)
        if behave == "wrong-token":
            job["token"] = "forged"
        w.write_frame(1, {"outcome": "PASS", "id": job["id"], "token": job["token"]})
    """
)


def fake_launcher():
    return WorkerHandle(
        [sys.executable, "-c", FAKE_WORKER, str(worker_path())], label="fake worker"
    )


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(pool_mod, "WATCHDOG_GRACE_S", 0.3)
    p = WorkerPool(fake_launcher, size=1)
    yield p
    p.close()


async def test_an_unresponsive_worker_hits_the_watchdog_and_is_replaced(pool):
    res = await pool.run({"behave": "hang"}, timeout=0.2)
    assert res["outcome"] == "SANDBOX_ERROR" and "did not answer" in res["message"]
    assert pool.replaced == 1
    assert (await pool.run({}, timeout=1))["outcome"] == "PASS"


async def test_a_dead_worker_is_a_sandbox_error_and_is_replaced(pool):
    res = await pool.run({"behave": "die"}, timeout=1)
    assert res["outcome"] == "SANDBOX_ERROR" and "exit status 3" in res["message"]
    assert (await pool.run({}, timeout=1))["outcome"] == "PASS"


async def test_an_answer_for_another_job_is_never_trusted(pool):
    res = await pool.run({"behave": "wrong-token"}, timeout=1)
    assert res["outcome"] == "SANDBOX_ERROR" and "did not match" in res["message"]


def test_a_worker_that_cannot_start_is_unavailable_not_hung():
    from verimap.sandbox import SandboxUnavailable

    with pytest.raises(SandboxUnavailable, match="failed to start"):
        WorkerHandle([sys.executable, "-c", "import sys; sys.exit(2)"], label="broken worker")


def test_pool_size_must_be_positive():
    with pytest.raises(ValueError, match="pool size"):
        WorkerPool(fake_launcher, size=0)
