"""The supervisor: one job at a time, each on a process the spawner forked in advance.

It sends the job, enforces the wall timeout, caps output, and before it takes the
next job kills every process the job left behind (it is their subreaper) and
wipes scratch, so nothing of one job reaches the next.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import time

from . import jobs, unix, verdicts, wire
from .candidate import spawn_candidate
from .spawner import Spawner, SpawnerGone


class Supervisor:
    """Runs one job at a time on a pre-forked job process, then cleans up after it.

    `container`: the worker is alone in its container, so every process but init,
    itself and its spawner is a leftover, and /tmp and /dev/shm are wiped after
    each job; on the host only its own descendants are.
    """

    def __init__(self, container: bool, scratch_root: str):
        self.container = container
        self.scratch_root = scratch_root
        self.pid = os.getpid()
        # the pre-forked job process: (pid, job pipe, job dir, output pipes by name)
        self.next: tuple[int, int, str, dict[str, int]] | None = None
        self.current: tuple[int, str] | None = None  # the running or last job's (pid, dir)
        self.want_spare = False  # pre-start a candidate interpreter (after a tests job)
        self.spare_proc = None
        os.makedirs(scratch_root, exist_ok=True)
        # forked first, while this process holds little (see Spawner)
        self.spawner: Spawner | None = Spawner(self._scratch(self._jobdir()))

    # -- cleanup ---------------------------------------------------------------

    def _descendants(self) -> list[int]:
        """Every process a job may have left, living or not yet reaped.

        The spawner is not one, nor are its reaped-at-next-spawn zombies (earlier
        job processes, already dead); a job process of its that still lives is.
        """
        spawner = self.spawner.pid if self.spawner is not None else None
        try:
            fd = os.open(f"/proc/{self.pid}/task/{self.pid}/children", os.O_RDONLY)
            try:
                children = os.read(fd, 65536).split()
            finally:
                os.close(fd)
        except OSError:
            children = None
        if children is not None and all(int(c) == spawner for c in children):
            # Orphans come to us (the subreaper) and the job process was killed, so
            # with no child but the spawner nothing is left: skip reading all of /proc.
            return []
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            rest = stat[stat.rfind(b")") + 2 :].split()
            pid, ppid = int(entry), int(rest[1])
            if not (ppid == spawner and rest[0] == b"Z"):
                parents[pid] = ppid
        if self.container:
            return [p for p in parents if p not in (1, self.pid, spawner)]
        found: list[int] = []
        frontier = [self.pid]
        while frontier:
            cur = frontier.pop()
            kids = [p for p, pp in parents.items() if pp == cur]
            found.extend(k for k in kids if k != spawner)
            frontier.extend(kids)
        return found

    def kill_leftovers(self, pgid: int | None) -> None:
        """Kill every process a job left behind, then reap them (we are their subreaper).

        The job's own child is awaited on its pidfd rather than polled: a SIGKILLed
        process is gone within microseconds, and a fixed poll interval was most of the
        per-job cost.
        """
        if pgid:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
            self._await_exit(pgid, 1.0)
        for _ in range(5):
            pids = self._descendants()
            if not pids:
                break
            for p in pids:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            deadline = time.monotonic() + 0.2
            for p in pids:
                self._await_exit(p, max(0.0, deadline - time.monotonic()))
        self._reap()

    @staticmethod
    def _await_exit(pid: int, wait_s: float) -> None:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.poll(wait_s * 1000)
        finally:
            os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)

    @staticmethod
    def _reap() -> None:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass

    def wipe(self, jobdir: str) -> None:
        import shutil

        try:  # most jobs leave scratch empty: a few syscalls instead of rmtree's thirty
            fd = os.open(jobdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                os.rmdir(os.path.basename(self._scratch(jobdir)), dir_fd=fd)
            finally:
                os.close(fd)
            os.rmdir(jobdir)
        except OSError:  # not empty, a symlink, gone: rmtree copes (and never follows links)
            shutil.rmtree(jobdir, ignore_errors=True)
        if self.container:
            for root in ("/tmp", "/dev/shm"):
                try:
                    entries = os.listdir(root)
                except OSError:
                    continue
                for name in entries:
                    path = os.path.join(root, name)
                    try:
                        if os.path.isdir(path) and not os.path.islink(path):
                            shutil.rmtree(path, ignore_errors=True)
                        else:
                            os.unlink(path)
                    except OSError:
                        pass

    # -- one job ---------------------------------------------------------------

    def prefork(self) -> None:
        """Have the next job's process forked now, while nobody waits for it."""
        jobdir = self._jobdir()
        try:  # the usual path, whose HOME and TMPDIR the spawner set once for all jobs
            os.mkdir(jobdir, 0o700)
        except OSError:  # something is in the way (cleanup wipes it before the next job)
            jobdir = unix.fresh_dir(self.scratch_root, "job-")
        scratch = self._scratch(jobdir)
        os.mkdir(scratch)
        job_r, job_w = os.pipe()
        pipes = {name: os.pipe() for name in ("stdout", "stderr", "result")}
        child_fds = {"job": job_r, **{k: w for k, (_r, w) in pipes.items()}}
        spare = None
        if self.want_spare:
            cand_dir = os.path.join(jobdir, "cand")
            os.mkdir(cand_dir)
            uid = unix.DROP_UID
            if uid is not None:
                for path in (jobdir, cand_dir):
                    os.chown(path, uid, uid)
            try:
                spare = spawn_candidate(cand_dir, child_fds["stdout"], child_fds["stderr"])
                child_fds.update(spare_w=spare[1], spare_r=spare[2])
                self.spare_proc = spare[0]
            except OSError:
                spare = None
        pid = self._spawn(child_fds, jobdir, scratch)
        os.close(job_r)
        for _r, w in pipes.values():
            os.close(w)
        if spare is not None:
            os.close(spare[1])
            os.close(spare[2])
        self.next = (pid, job_w, jobdir, {k: r for k, (r, _w) in pipes.items()})

    def _jobdir(self) -> str:
        return os.path.join(self.scratch_root, "job")

    @staticmethod
    def _scratch(jobdir: str) -> str:
        return os.path.join(jobdir, "work")

    def _spawn(self, fds: dict[str, int], jobdir: str, scratch: str) -> int:
        for attempt in range(2):
            if self.spawner is not None and not self.spawner.alive():
                self.spawner.close()
                self.spawner = None
                self._reap()  # the job processes it had are ours now (we are the subreaper)
            if self.spawner is None:
                self.spawner = Spawner(self._scratch(self._jobdir()))
            try:
                return self.spawner.spawn(fds, jobdir, scratch)
            except SpawnerGone:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def run(self, job: dict) -> dict:
        """Run one job on the pre-forked child; cleanup() must follow before the next job."""
        if self.next is None:
            self.prefork()
        assert self.next is not None
        pid, job_w, jobdir, readers = self.next
        self.next = None
        self.want_spare = job.get("kind") == "tests"
        self.current = (pid, jobdir)
        start = time.monotonic()
        timeout = float(job.get("timeout", 10.0))
        out_limit = int(job.get("output_limit", 64 * 1024))
        try:
            wire.write_frame(job_w, job)
        except OSError as e:
            for fd in readers.values():
                os.close(fd)
            return {
                "outcome": "SANDBOX_ERROR",
                "message": f"job child vanished before its job: {e}",
            }
        finally:
            os.close(job_w)
        rec = self._supervise(job["kind"], pid, readers, start, timeout, out_limit)
        rec["duration_s"] = time.monotonic() - start
        return rec

    def shutdown(self, remove_root: bool) -> None:
        """The host is gone: stop every process we started and, on the host, remove scratch."""
        if self.next is not None:
            pid, job_w, jobdir, readers = self.next
            self.next = None
            for fd in (job_w, *readers.values()):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.current = (pid, jobdir)
        if self.current is not None:
            pid, jobdir = self.current
            self.current = None
            self.kill_leftovers(pid)
            self.wipe(jobdir)
        if self.spawner is not None:
            self.spawner.close()
            self.spawner = None
        if remove_root:
            import shutil

            shutil.rmtree(self.scratch_root, ignore_errors=True)

    def cleanup(self) -> None:
        """Kill what the last job left behind, wipe scratch, and pre-fork the next job process."""
        if self.current is not None:
            pid, jobdir = self.current
            self.current = None
            self.kill_leftovers(pid)
            if self.spare_proc is not None:
                # killed and reaped above; mark it so subprocess never polls a reused pid
                if self.spare_proc.returncode is None:
                    self.spare_proc.returncode = -signal.SIGKILL
                self.spare_proc = None
            self.wipe(jobdir)
        self.prefork()

    def _supervise(
        self, kind: str, pid: int, readers: dict, start: float, timeout: float, out_limit: int
    ) -> dict:
        spawner = self.spawner
        assert spawner is not None  # the job process came from it
        bufs = {k: bytearray() for k in readers}
        caps = {"stdout": out_limit, "stderr": out_limit, "result": jobs.RESULT_LIMIT}
        overflow = False
        timed_out = False
        early = False  # the record came and its fd closed: answer without awaiting teardown
        lost = False  # the job process ended but its exit status could not be had
        status = None
        sel = selectors.DefaultSelector()
        for name, fd in readers.items():
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, name)
        try:
            pidfd = os.pidfd_open(pid)
            sel.register(pidfd, selectors.EVENT_READ, "exit")
        except (AttributeError, OSError):
            pidfd = None
        deadline = start + timeout
        open_fds = set(readers.values())
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            events = sel.select(min(remaining, 0.05) if pidfd is None else remaining)
            exited = False
            for key, _ in events:
                if key.data == "exit":
                    exited = True
                    continue
                fd = key.fd
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    open_fds.discard(fd)
                    if key.data == "result" and bufs["result"]:
                        early = True
                    continue
                buf = bufs[key.data]
                room = caps[key.data] + 1 - len(buf)
                if room > 0:
                    buf += chunk[:room]
                if len(buf) > caps[key.data] and key.data != "result":
                    overflow = True
            if overflow or early:
                break
            if pidfd is None or exited:
                status = spawner.status(pid, wait=exited)
                if status is not None or exited:
                    lost = status is None
                    break
        if status is None and not early and not lost:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            status = spawner.status(pid, wait=True)
        # drain what is already buffered; never wait for grandchildren holding pipes
        for fd in list(open_fds):
            name = sel.get_key(fd).data
            try:
                while len(bufs[name]) <= caps[name]:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    bufs[name] += chunk
            except (BlockingIOError, OSError):
                pass
            if len(bufs[name]) > caps[name] and name != "result":
                overflow = True
        sel.close()
        for fd in readers.values():
            os.close(fd)
        if pidfd is not None:
            os.close(pidfd)
        return verdicts.classify(kind, status, bufs, caps, overflow, timed_out, timeout)
