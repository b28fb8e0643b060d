"""Docker backend: a warm pool of locked-down long-lived containers.

Each container runs the worker under an init process with no network, a
read-only root, a size-limited tmpfs, memory (swap equal), pids and CPU limits,
all capabilities dropped, no-new-privileges, a non-root user and no variables
from the host environment. The worker forks a fresh child per job.

Containers are created, started and removed through the Docker SDK
(`verimap.sandbox.daemon`); the job stream is not. On a local daemon jobs go
over a Unix socket bind-mounted into the container, straight to the worker.
What needs the container's stdio (the token that opens that socket, the whole
stream on a remote daemon, the worker's stderr and exit status) goes through a
`docker attach` client process, because the SDK's attach socket does not fit
the pool: the pool reads plain file descriptors from its event loop, and the
SDK hands back stdout and stderr multiplexed in one stream, which for a remote
daemon is a TLS socket or an SSH channel that cannot be read as a plain fd.
The CLI gives plain pipes on every connection it supports, and exits with the
container's status (137 when killed, counted as OOM) although the container
removes itself.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import shutil
import tempfile
from typing import Any

from verimap.base.env import getenv
from verimap.base.sandbox import SandboxUnavailable
from verimap.sandbox import daemon
from verimap.sandbox.image import SANDBOX_UID, image_tag
from verimap.sandbox.launch import WORKER_COMMAND
from verimap.sandbox.pool import WorkerHandle, WorkerPool
from verimap.sandbox.pooled import PooledSandbox

log = logging.getLogger(__name__)

SOCKET_DIR_IN_CONTAINER = "/run/verimap"


@functools.cache
def _checked(tag: str) -> str:
    """Checks run once per process (cached only on success) so get_sandbox stays cheap."""
    version = daemon.check_daemon()
    daemon.check_image(tag)
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
        local daemon), "stdio" (through `docker attach`), or "auto" (socket when local)."""
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

    def container_config(self, name: str) -> dict[str, Any]:
        """Keyword arguments of the SDK's `containers.create` that confine one container.

        No `environment`: nothing of the host's reaches it. `stdin_open` (with the SDK's
        default `stdin_once`) keeps stdin open for `docker attach` and closes it when that
        client goes, so a worker whose host died sees end of file and exits; `auto_remove`
        then removes its container.
        """
        mem = f"{self.container_memory_mb}m"
        return {
            "name": name,
            "labels": {"verimap.sandbox": "1"},
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,noexec,size={self.tmpfs_mb}m,mode=1777"},
            "mem_limit": mem,
            "memswap_limit": mem,
            "pids_limit": self.pids_limit,
            "nano_cpus": int(self.cpus * 1e9),
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "user": f"{SANDBOX_UID}:{SANDBOX_UID}",
            "init": True,
            "log_config": {"type": "none"},
            "hostname": "sandbox",
            "working_dir": "/tmp",
            "stdin_open": True,
            "auto_remove": True,
        }

    def _launch(self) -> WorkerHandle:
        if self.transport == "socket":
            try:
                return self._launch_with("socket")
            except SandboxUnavailable as e:
                if isinstance(e, daemon.DockerUnavailable):
                    raise
                # e.g. a daemon in another mount namespace cannot see our socket directory
                log.warning("sandbox socket transport failed (%s); using stdio", e)
                self.transport = "stdio"
        return self._launch_with("stdio")

    def _launch_with(self, transport: str) -> WorkerHandle:
        import docker.errors
        from docker.types import Mount

        docker_cli = daemon.docker_cli()
        name = f"verimap-sb-{secrets.token_hex(5)}"
        config = self.container_config(name)
        command = [*WORKER_COMMAND, "serve", "--container", "--scratch", "/tmp"]
        socket_path = sock_dir = None
        if transport == "socket":
            # the directory holds only the socket (unlinked once the worker connected)
            sock_dir = tempfile.mkdtemp(prefix="verimap-sb-")
            os.chmod(sock_dir, 0o711)
            socket_path = os.path.join(sock_dir, "worker.sock")
            config["mounts"] = [
                Mount(SOCKET_DIR_IN_CONTAINER, sock_dir, type="bind", read_only=True)
            ]
            command += ["--socket", f"{SOCKET_DIR_IN_CONTAINER}/worker.sock"]

        def release_dir() -> None:
            if sock_dir is not None:
                shutil.rmtree(sock_dir, ignore_errors=True)

        container = None
        try:
            with daemon.reaching():
                container = daemon.client().containers.create(self.image, command, **config)
                container.start()
            # the worker waits for the token the handle writes through this client
            return WorkerHandle(
                [docker_cli, "attach", "--sig-proxy=false", container.id],
                stop=functools.partial(daemon.remove, container),
                label=f"container {name}",
                socket_path=socket_path,
                on_close=release_dir,
            )
        except BaseException as e:
            if container is not None:
                with contextlib.suppress(SandboxUnavailable, docker.errors.APIError):
                    daemon.remove(container)
            release_dir()
            if isinstance(e, docker.errors.APIError):
                raise SandboxUnavailable(
                    f"container {name} failed to start: {e.explanation or e}"
                ) from None
            raise
