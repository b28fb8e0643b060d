"""A pool of long-lived workers (containers or host processes) shared by asyncio tasks.

Each worker answers one job at a time over a pipe or socket. With a worker idle,
the calling event loop writes the job and awaits the answer on the worker's fd;
starting a worker, waiting for a busy one and writing a big job are blocking and
run on a private thread pool (one thread per worker), so the pool works from any
event loop (pytest's per-test loops, `asyncio.run` in sync wrappers) and from
several tasks at once. A worker that dies, breaks the protocol or misses the
host-side watchdog is killed and replaced; its job is reported, never lost.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import queue
import secrets
import select
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from verimap.base.sandbox import SandboxUnavailable
from verimap.sandbox.worker import wire
from verimap.sandbox.worker.constants import PROTOCOL

WATCHDOG_GRACE_S = 5.0
START_TIMEOUT_S = 60.0
INLINE_FRAME_MAX = 16 * 1024  # fits an empty pipe or socket buffer: writing it never blocks
_WAIT = object()  # no worker taken from the idle queue yet: wait for one
MISMATCH = {"outcome": "SANDBOX_ERROR", "message": "worker answer did not match the job; replaced"}


class WorkerLost(RuntimeError):
    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.exit_code = exit_code


class WorkerHandle:
    """One running worker process (for Docker: the `docker attach` client attached to it)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        stop: Callable[[], None] | None = None,
        label: str = "worker",
        start_timeout: float = START_TIMEOUT_S,
        on_close: Callable[[], None] | None = None,
        socket_path: str | None = None,
    ):
        """Start the worker and wait for its hello. The first line it reads is a one-time
        token, which its hello must carry back. With `socket_path` the worker then connects
        to a Unix socket there (bind-mounted into its container) instead of talking over
        stdin/stdout, which otherwise pass through the docker client, daemon and shim.
        `stop` ends what killing the process alone would not (its container)."""
        self.label = label
        self.on_close = on_close
        self.jobs = 0
        self.stop = stop
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the worker)
        self._buf = bytearray()
        self._sock_fd: int | None = None
        listener = None
        if socket_path is not None:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(socket_path)
            os.chmod(socket_path, 0o666)  # the container's unprivileged uid must connect
            listener.listen(1)
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL if listener else subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + start_timeout
        token = secrets.token_hex(16)
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(token.encode() + b"\n")
            self.proc.stdin.flush()
            if listener is not None:
                self._sock_fd = self._accept(listener, deadline)
            hello = self._read(deadline)
        except (WorkerLost, TimeoutError, OSError) as e:
            self.kill()
            raise SandboxUnavailable(f"{label} failed to start: {e or 'timed out'}") from None
        finally:
            if listener is not None and socket_path is not None:
                listener.close()
                with contextlib.suppress(OSError):
                    os.unlink(socket_path)
        if not hello.get("ready") or hello.get("protocol") != PROTOCOL:
            self.kill()
            raise SandboxUnavailable(f"{label} spoke an unexpected protocol: {hello!r}")
        if hello.get("token") != token:
            self.kill()
            raise SandboxUnavailable(f"{label}: the worker did not authenticate (token)")
        self.python = hello.get("python", "?")
        self.magic: str | None = hello.get("magic")

    def _accept(self, listener: socket.socket, deadline: float) -> int:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the worker did not connect")
            ready, _, _ = select.select([listener], [], [], min(remaining, 0.2))
            if ready:
                conn, _ = listener.accept()
                return conn.detach()
            if self.proc.poll() is not None:
                raise self._lost("exited before connecting")

    @property
    def _rfd(self) -> int:
        if self._sock_fd is not None:
            return self._sock_fd
        assert self.proc.stdout is not None  # a pipe whenever there is no socket
        return self.proc.stdout.fileno()

    @property
    def _wfd(self) -> int:
        if self._sock_fd is not None:
            return self._sock_fd
        assert self.proc.stdin is not None
        return self.proc.stdin.fileno()

    def stderr_tail(self, limit: int = 2000) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            return self._stderr.read().decode("utf-8", "replace")[-limit:].strip()
        return ""

    def _lost(self, what: str) -> WorkerLost:
        code = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = self.proc.wait(timeout=5)
        tail = self.stderr_tail()
        msg = f"{self.label} {what} (exit status {code})" + (f": {tail}" if tail else "")
        return WorkerLost(msg, code)

    def take_frame(self) -> dict[str, Any] | None:
        """The next whole frame received so far, if there is one."""
        head = wire.FRAME.size
        if len(self._buf) < head:
            return None
        (size,) = wire.FRAME.unpack(bytes(self._buf[:head]))
        if size > wire.MAX_FRAME:
            raise WorkerLost(f"{self.label} sent an oversized frame ({size} bytes)")
        need = head + size
        if len(self._buf) < need:
            return None
        body = bytes(self._buf[head:need])
        del self._buf[:need]
        return json.loads(body)

    def receive(self) -> bool:
        """Read what the worker sent (the fd is readable); False at end of file."""
        chunk = os.read(self._rfd, 1 << 20)
        self._buf += chunk
        return bool(chunk)

    def _read(self, deadline: float) -> dict[str, Any]:
        while True:
            frame = self.take_frame()
            if frame is not None:
                return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self._rfd], [], [], remaining)
            if ready and not self.receive():
                raise self._lost("exited")

    def send(self, data: bytes) -> None:
        try:
            wire.write_all(self._wfd, data)
        except OSError:
            raise self._lost("is gone") from None
        self.jobs += 1

    def request(self, data: bytes, deadline: float) -> dict[str, Any]:
        self.send(data)
        return self._read(deadline)

    def kill(self) -> None:
        if self.stop is not None:
            with contextlib.suppress(Exception):
                self.stop()
        with contextlib.suppress(Exception):
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self._sock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._sock_fd)
            self._sock_fd = None
        for stream in (self.proc.stdin, self.proc.stdout, self._stderr):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.close()
        if self.on_close is not None:
            with contextlib.suppress(Exception):
                self.on_close()


_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


class WorkerPool:
    """`size` warm workers; the idle queue holds handles or None (a free slot to fill)."""

    def __init__(
        self, launcher: Callable[[], WorkerHandle], *, size: int = 2, recycle_after: int = 1000
    ):
        if size < 1:
            raise ValueError("pool size must be >= 1")
        self.launcher = launcher
        self.size = size
        self.recycle_after = recycle_after
        self._idle: queue.Queue[WorkerHandle | None] = queue.Queue()
        for _ in range(size):
            self._idle.put(None)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.replaced = 0
        self.worker_magic: str | None = None  # bytecode magic of the workers' Python, once known
        _POOLS.add(self)

    @property
    def executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._closed = False
                self._executor = ThreadPoolExecutor(self.size, thread_name_prefix="verimap-sandbox")
            return self._executor

    def _acquire(self, slot: object = _WAIT) -> WorkerHandle:
        """A worker for one job: `slot` as taken from the idle queue, else wait for one."""
        taken = self._idle.get() if slot is _WAIT else slot
        if isinstance(taken, WorkerHandle):
            return taken
        try:
            handle = self.launcher()
        except BaseException:
            self._idle.put(None)
            raise
        self.worker_magic = handle.magic
        return handle

    def _release(self, handle: WorkerHandle, healthy: bool) -> None:
        if healthy and not self._closed and handle.jobs < self.recycle_after:
            self._idle.put(handle)
            return
        if not healthy:
            self.replaced += 1
        self._idle.put(None)
        threading.Thread(target=handle.kill, daemon=True).start()

    @staticmethod
    def _stamp(job: dict[str, Any], timeout: float) -> dict[str, Any]:
        return {
            **job,
            "id": secrets.token_hex(4),
            "token": secrets.token_hex(16),
            "timeout": timeout,
        }

    @staticmethod
    def _failure(handle: WorkerHandle, timeout: float, e: Exception) -> dict[str, Any]:
        if isinstance(e, TimeoutError):
            return {
                "outcome": "SANDBOX_ERROR",
                "message": f"{handle.label} did not answer within {timeout + WATCHDOG_GRACE_S:g}s; "
                "it was killed and replaced",
            }
        if isinstance(e, WorkerLost) and e.exit_code == 137:
            return {
                "outcome": "OOM",
                "message": f"{e} (exit 137: killed, counted as OOM); replaced",
            }
        return {"outcome": "SANDBOX_ERROR", "message": f"{e}; replaced"}

    @staticmethod
    def _matches(job: dict[str, Any], res: dict[str, Any]) -> bool:
        return res.get("token") == job["token"] and res.get("id") == job["id"]

    def run_blocking(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        job = self._stamp(job, timeout)
        return self._run_on(_WAIT, job, wire.frame_bytes(job), timeout)

    def _run_on(
        self, slot: object, job: dict[str, Any], data: bytes, timeout: float
    ) -> dict[str, Any]:
        """Run a stamped job (`data`: its frame) on `slot`, or on the next idle worker."""
        handle = self._acquire(slot)
        healthy = False
        try:
            deadline = time.monotonic() + timeout + WATCHDOG_GRACE_S
            try:
                res = handle.request(data, deadline)
            except (TimeoutError, WorkerLost) as e:
                return self._failure(handle, timeout, e)
            healthy = self._matches(job, res)
            return res if healthy else dict(MISMATCH)
        finally:
            self._release(handle, healthy)

    async def run(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Run a job on a worker; never raises for what the worker does.

        With an idle worker at hand, the event loop writes the job and waits for the
        answer on the worker's fd itself; a pool thread would cost two thread
        wake-ups per job (about 0.17 ms here, a tenth of a VF). A worker to start,
        a busy pool or a big job go through a pool thread, which may block.
        """
        loop = asyncio.get_running_loop()
        try:
            slot: object = self._idle.get_nowait()
        except queue.Empty:
            slot = _WAIT
        job = self._stamp(job, timeout)
        data = wire.frame_bytes(job)
        if isinstance(slot, WorkerHandle) and len(data) <= INLINE_FRAME_MAX:
            return await self._run_on_loop(loop, slot, job, data, timeout)
        return await loop.run_in_executor(self.executor, self._run_on, slot, job, data, timeout)

    async def _run_on_loop(
        self,
        loop: asyncio.AbstractEventLoop,
        handle: WorkerHandle,
        job: dict[str, Any],
        data: bytes,
        timeout: float,
    ) -> dict[str, Any]:
        done: asyncio.Future[dict[str, Any] | None] = loop.create_future()

        def readable() -> None:
            if done.done():
                return
            try:
                more = handle.receive()
                frame = handle.take_frame()
            except OSError as e:
                done.set_exception(WorkerLost(f"{handle.label}: reading its answer failed: {e}"))
            except WorkerLost as e:
                done.set_exception(e)
            else:
                if frame is not None:
                    done.set_result(frame)
                elif not more:
                    done.set_result(None)  # end of file: the worker is gone

        deadline = time.monotonic() + timeout + WATCHDOG_GRACE_S
        healthy, ours = False, True
        try:
            handle.send(data)  # a small frame into an empty pipe or socket: never blocks
            loop.add_reader(handle._rfd, readable)
            try:
                res = await asyncio.wait_for(done, timeout + WATCHDOG_GRACE_S)
            finally:
                loop.remove_reader(handle._rfd)
            if res is None:
                raise await loop.run_in_executor(None, handle._lost, "exited")
            healthy = self._matches(job, res)
            return res if healthy else dict(MISMATCH)
        except (TimeoutError, WorkerLost) as e:
            return self._failure(handle, timeout, e)
        except asyncio.CancelledError:
            if not self._closed:  # the job still runs: a pool thread takes its answer
                self.executor.submit(self._finish_cancelled, handle, job, deadline)
                ours = False
            raise
        finally:
            if ours:
                self._release(handle, healthy)

    def _finish_cancelled(self, handle: WorkerHandle, job: dict[str, Any], deadline: float) -> None:
        healthy = False
        try:
            healthy = self._matches(job, handle._read(deadline))
        except Exception:
            pass
        finally:
            self._release(handle, healthy)

    def warm(self) -> None:
        """Start every worker now instead of on first use."""
        handles = [self._acquire() for _ in range(self.size)]
        for h in handles:
            self._release(h, True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        drained = []
        while True:
            try:
                drained.append(self._idle.get_nowait())
            except queue.Empty:
                break
        threads = []
        for h in drained:
            if h is not None:
                t = threading.Thread(target=h.kill, daemon=True)
                t.start()
                threads.append(t)
        for t in threads:
            t.join(timeout=30)
        for _ in range(self.size):
            self._idle.put(None)


@atexit.register
def _close_all() -> None:
    for pool in list(_POOLS):
        with contextlib.suppress(Exception):
            pool.close()
