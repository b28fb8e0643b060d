"""Docker backend: a warm pool of locked-down long-lived containers.

Each container runs the worker under an init process with no network, a
read-only root, a size-limited tmpfs, memory (swap equal), pids and CPU limits,
all capabilities dropped, no-new-privileges, a non-root user and no variables
from the host environment. The worker forks a fresh child per job.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import shutil
import subprocess
import tempfile

from verimap.env import getenv
from verimap.sandbox.base import SandboxUnavailable
from verimap.sandbox.image import SANDBOX_UID, WORKER_COMMAND, image_tag
from verimap.sandbox.pool import WorkerHandle, WorkerPool
from verimap.sandbox.pooled import PooledSandbox

log = logging.getLogger(__name__)

BUILD_HINT = (
    "build it with `verimap sandbox build --offline` (or `verimap sandbox build` with a registry)"
)


def docker_cli() -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise SandboxUnavailable("Docker backend unavailable: the docker CLI is not installed")
    return docker


def check_daemon(timeout: float = 5.0) -> str:
    """The daemon's server version; SandboxUnavailable (never a hang) when it does not answer."""
    docker = docker_cli()
    try:
        proc = subprocess.run(
            [docker, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise SandboxUnavailable(f"Docker daemon did not answer within {timeout:g}s") from None
    if proc.returncode != 0 or not proc.stdout.strip():
        detail = proc.stderr.strip().splitlines()[-1:] or ["no answer"]
        raise SandboxUnavailable(
            f"Docker daemon not running or not reachable ({detail[0]}); start dockerd "
            "(e.g. `dockerd --iptables=false --ip6tables=false --bridge=none &`) or use --sandbox process"
        )
    return proc.stdout.strip()


def check_image(tag: str, timeout: float = 10.0) -> None:
    proc = subprocess.run(
        [docker_cli(), "image", "inspect", "--format", "{{.Id}}", tag],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise SandboxUnavailable(f"sandbox image {tag} is missing; {BUILD_HINT}")


@functools.cache
def _checked(tag: str) -> str:
    """Checks run once per process (cached only on success) so get_sandbox stays cheap."""
    version = check_daemon()
    check_image(tag)
    return version


class DockerSandbox(PooledSandbox):
    kind = "docker"

    def __init__(
        self,
        *,
        image: str | None = None,
        pool_size: int = 2,
        recycle_after: int = 1000,
        memory_mb: int = 1024,
        cpus: float = 1.0,
        pids_limit: int = 128,
        tmpfs_mb: int = 256,
        output_limit: int = 64 * 1024,
        policy: bool = True,
        check: bool = True,
        transport: str = "auto",
    ):
        """`transport`: "socket" (a bind-mounted Unix socket straight to the worker; needs a
        local daemon), "stdio" (through `docker run -i`), or "auto" (socket when local)."""
        if transport == "auto":
            host = getenv("DOCKER_HOST", "")
            transport = "socket" if not host or host.startswith("unix://") else "stdio"
        if transport not in ("socket", "stdio"):
            raise ValueError(f"transport must be auto, socket or stdio, not {transport!r}")
        self.transport = transport
        self.image = image or image_tag()
        self.cpus = cpus
        self.pids_limit = pids_limit
        self.tmpfs_mb = tmpfs_mb
        self.container_memory_mb = memory_mb
        if check:
            self.daemon_version = _checked(self.image)
        pool = WorkerPool(self._launch, size=pool_size, recycle_after=recycle_after)
        # the child's address-space cap sits below the container's memory limit, so a
        # memory bomb usually ends in a clean MemoryError before the cgroup OOM killer acts
        child_mb = max(128, memory_mb - 256)
        super().__init__(pool, memory_mb=child_mb, output_limit=output_limit, policy=policy)

    def container_args(self, name: str) -> list[str]:
        """`docker run` flags that confine one sandbox container."""
        mem = f"{self.container_memory_mb}m"
        return [
            "--rm",
            "--name",
            name,
            "--label",
            "verimap.sandbox=1",
            "--network",
            "none",
            "--read-only",
            "--tmpfs",
            f"/tmp:rw,nosuid,nodev,noexec,size={self.tmpfs_mb}m,mode=1777",
            "--memory",
            mem,
            "--memory-swap",
            mem,
            "--pids-limit",
            str(self.pids_limit),
            "--cpus",
            str(self.cpus),
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--user",
            f"{SANDBOX_UID}:{SANDBOX_UID}",
            "--init",
            "--log-driver",
            "none",
            "--hostname",
            "sandbox",
            "--workdir",
            "/tmp",
        ]

    def _launch(self) -> WorkerHandle:
        if self.transport == "socket":
            try:
                return self._launch_with("socket")
            except SandboxUnavailable as e:
                # e.g. a daemon in another mount namespace cannot see our socket directory
                log.warning("sandbox socket transport failed (%s); using stdio", e)
                self.transport = "stdio"
        return self._launch_with("stdio")

    def _launch_with(self, transport: str) -> WorkerHandle:
        docker = docker_cli()
        name = f"verimap-sb-{secrets.token_hex(5)}"
        mount: list[str] = []
        worker_args: list[str] = []
        socket_path = None
        sock_dir = None
        if transport == "socket":
            # the directory holds only the socket (unlinked once the worker connected)
            sock_dir = tempfile.mkdtemp(prefix="verimap-sb-")
            os.chmod(sock_dir, 0o711)
            socket_path = os.path.join(sock_dir, "worker.sock")
            mount = ["--mount", f"type=bind,source={sock_dir},target=/run/verimap,readonly"]
            worker_args = ["--socket", "/run/verimap/worker.sock"]
        argv = [
            docker,
            "run",
            "-i",
            *self.container_args(name),
            *mount,
            self.image,
            *WORKER_COMMAND,
            "serve",
            "--container",
            "--scratch",
            "/tmp",
            *worker_args,
        ]
        return WorkerHandle(
            argv,
            kill_argv=[docker, "rm", "-f", name],
            label=f"container {name}",
            socket_path=socket_path,
            on_close=(lambda: shutil.rmtree(sock_dir, ignore_errors=True)) if sock_dir else None,
        )
