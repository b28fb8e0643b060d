"""Process backend: the same worker as a host subprocess, for machines without Docker.

Each job still runs in a fresh forked child with rlimits (CPU, address space,
file size, open files) and an empty scratch directory, and the worker gets its
own network namespace where `unshare` is permitted, plus an environment with
nothing from the host. It shares the host's filesystem, users and kernel view,
so it isolates far less than the Docker backend: a loud warning says so.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from verimap.sandbox.launch import WORKER_DIR, worker_argv
from verimap.sandbox.pool import WorkerHandle, WorkerPool
from verimap.sandbox.pooled import PooledSandbox
from verimap.sandbox.worker.constants import CHILD_ENV

log = logging.getLogger(__name__)
NOBODY_UID = 65534

WARNING = (
    "verimap process sandbox: untrusted code runs as a host subprocess (rlimits, fresh temp dir, "
    "no network where unshare is permitted) and is isolated far less than in the Docker "
    "backend; use --sandbox docker for anything you would not run yourself"
)


@functools.cache
def unshare_prefix() -> tuple[str, ...]:
    """`unshare` arguments that give the worker an empty network namespace, if permitted here."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    for args in ((unshare, "--net"), (unshare, "--user", "--map-root-user", "--net")):
        try:
            ok = subprocess.run([*args, "true"], capture_output=True, timeout=5).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return args
    return ()


def _world_executable(path: str) -> bool:
    p = Path(path).resolve()
    if not p.is_file() or not p.stat().st_mode & 0o001:
        return False
    return all(parent.stat().st_mode & 0o001 for parent in p.parents)


def _readable_copy(package: Path, dest: Path) -> Path:
    """The worker's modules, copied where the uid jobs run as can read them: a candidate's
    interpreter runs `wire.py` as that uid."""
    dest.mkdir()
    dest.chmod(0o755)
    for module in package.glob("*.py"):
        os.chmod(shutil.copy(module, dest / module.name), 0o644)
    return dest


class ProcessSandbox(PooledSandbox):
    kind = "process"

    def __init__(
        self,
        *,
        pool_size: int = 2,
        recycle_after: int = 1000,
        memory_mb: int = 1024,
        output_limit: int = 64 * 1024,
        policy: bool = True,
        isolate_network: bool = True,
        warn: bool = True,
    ):
        if warn:
            warnings.warn(WARNING, RuntimeWarning, stacklevel=2)
            log.warning(WARNING)
        self.isolate_network = isolate_network
        pool = WorkerPool(self._launch, size=pool_size, recycle_after=recycle_after)
        super().__init__(pool, memory_mb=memory_mb, output_limit=output_limit, policy=policy)

    @property
    def network_isolated(self) -> bool:
        return bool(self.isolate_network and unshare_prefix())

    def _launch(self) -> WorkerHandle:
        scratch = tempfile.mkdtemp(prefix="verimap-sandbox-")
        os.chmod(scratch, 0o711)  # jobs may run as an unprivileged uid
        prefix = unshare_prefix() if self.isolate_network else ()
        package = WORKER_DIR
        python = sys.executable
        extra: list[str] = []
        if os.geteuid() == 0 and _world_executable(python):
            # never run untrusted code as host root when an unprivileged uid can run this
            # interpreter (and so its installed packages); it must also read the worker
            package = _readable_copy(WORKER_DIR, Path(scratch) / "worker")
            extra = ["--drop-uid", str(NOBODY_UID)]
        elif os.geteuid() == 0:
            log.warning(
                "process sandbox: jobs run as root because %s is not accessible to an "
                "unprivileged user; prefer the Docker backend",
                python,
            )
        argv = [*prefix, *worker_argv(python, package), "serve", "--scratch", scratch, *extra]
        return WorkerHandle(
            argv,
            env=dict(CHILD_ENV),
            label="process worker",
            on_close=lambda: shutil.rmtree(scratch, ignore_errors=True),
        )
