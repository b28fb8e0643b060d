"""Pool logic with a scripted stand-in worker (a test double, no sandbox needed)."""

import asyncio
import sys
import textwrap

import pytest

from verimap.sandbox import pool as pool_mod
from verimap.sandbox.launch import WORKER_DIR
from verimap.sandbox.pool import WorkerHandle, WorkerPool
from verimap.sandbox.worker.constants import PROTOCOL

# A fake worker that reads the token line, says hello (with the token, or a forged one when
# told to), then answers jobs according to their "behave" field.
FAKE_WORKER = textwrap.dedent(
    """
    import importlib.util, os, sys, time
    spec = importlib.util.spec_from_file_location("wire", sys.argv[1])
    w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
    token = b""
    while not token.endswith(b"\\n"):
        token += os.read(0, 1)
    if sys.argv[3:] == ["forge"]:
        token = b"forged"
    hello = {"ready": True, "protocol": int(sys.argv[2]), "python": "fake"}
    w.write_frame(1, {**hello, "token": token.decode().strip()})
    while True:
        job = w.read_frame(0)
        if job is None:
            break
        behave = job.get("behave")
        if behave == "hang":
            time.sleep(600)
        if behave == "die":
            os._exit(3)
        if behave == "slow":
            time.sleep(0.3)
        if behave == "wrong-token":
            job["token"] = "forged"
        w.write_frame(1, {"outcome": "PASS", "id": job["id"], "token": job["token"]})
    """
)


def fake_launcher(*extra: str) -> WorkerHandle:
    argv = [sys.executable, "-c", FAKE_WORKER, str(WORKER_DIR / "wire.py"), str(PROTOCOL)]
    return WorkerHandle([*argv, *extra], label="fake worker")


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


def test_a_worker_whose_hello_lacks_the_token_is_refused():
    from verimap.sandbox import SandboxUnavailable

    fake_launcher().kill()  # the same worker with the token it was sent starts
    with pytest.raises(SandboxUnavailable, match="did not authenticate"):
        fake_launcher("forge")


def test_pool_size_must_be_positive():
    with pytest.raises(ValueError, match="pool size"):
        WorkerPool(fake_launcher, size=0)


@pytest.fixture
def warm_pool(pool):
    pool.warm()  # an idle worker at hand: jobs go through the event loop, not a pool thread
    return pool


async def test_an_idle_worker_is_driven_from_the_event_loop(warm_pool, monkeypatch):
    def no_thread(slot, job, data, timeout):
        raise AssertionError("went through a pool thread")

    monkeypatch.setattr(warm_pool, "_run_on", no_thread)
    assert [(await warm_pool.run({}, timeout=1))["outcome"] for _ in range(3)] == ["PASS"] * 3


async def test_a_big_job_goes_through_a_pool_thread(warm_pool, monkeypatch):
    calls = []
    run_on = warm_pool._run_on

    def spy(slot, job, data, timeout):
        calls.append(job)
        return run_on(slot, job, data, timeout)

    monkeypatch.setattr(warm_pool, "_run_on", spy)
    res = await warm_pool.run({"payload": "x" * (pool_mod.INLINE_FRAME_MAX + 1)}, timeout=1)
    assert res["outcome"] == "PASS" and len(calls) == 1


@pytest.mark.parametrize(
    ("behave", "message"),
    [("hang", "did not answer"), ("die", "exit status 3"), ("wrong-token", "did not match")],
)
async def test_on_the_event_loop_failures_are_reported_and_the_worker_replaced(
    warm_pool, behave, message
):
    res = await warm_pool.run({"behave": behave}, timeout=0.2)
    assert res["outcome"] == "SANDBOX_ERROR" and message in res["message"], res
    assert warm_pool.replaced == 1
    assert (await warm_pool.run({}, timeout=1))["outcome"] == "PASS"


async def test_a_cancelled_job_frees_its_worker_once_the_answer_came(warm_pool):
    task = asyncio.create_task(warm_pool.run({"behave": "slow"}, timeout=5))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the late answer is read and the worker reused, not killed and replaced
    assert (await warm_pool.run({}, timeout=5))["outcome"] == "PASS"
    assert warm_pool.replaced == 0


async def test_sequential_jobs_start_and_use_every_worker(monkeypatch):
    # jobs go to the worker idle longest, so one's cleanup overlaps the other's job
    p = WorkerPool(fake_launcher, size=2)
    try:
        used = set()
        for _ in range(6):
            assert (await p.run({}, timeout=2))["outcome"] == "PASS"
            handles = list(p._idle.queue)
            used.update(id(h) for h in handles if h is not None)
        assert len(used) == 2 and None not in p._idle.queue
    finally:
        p.close()
