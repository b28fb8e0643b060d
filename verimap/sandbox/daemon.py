"""The Docker daemon, through the Docker SDK: one client per connection, errors that say why.

A daemon that cannot be reached raises DockerUnavailable, whose message names
where it looked, what went wrong there and what fixes it, instead of a
requests or urllib3 traceback. Errors the daemon itself returns (`APIError`:
no such image, a bad mount) pass through for the caller to word.

The SDK reads `DOCKER_HOST`, `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH`, not the
CLI's contexts, so a machine that selects its daemon with `docker context use`
must set `DOCKER_HOST` too.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
from collections.abc import Iterator
from typing import Any

from verimap.base.env import getenv
from verimap.base.sandbox import SandboxUnavailable

DEFAULT_HOST = "unix:///var/run/docker.sock"
API_TIMEOUT_S = 60.0  # creating or removing a container on a loaded machine can take seconds
CHECK_TIMEOUT_S = 5.0
BUILD_HINT = (
    "build it with `verimap sandbox build --offline` (or `verimap sandbox build` with a registry)"
)
START_HINT = (
    "start dockerd (`sudo systemctl start docker`, or without systemd "
    "`sudo dockerd --iptables=false --ip6tables=false --bridge=none &`) or use --sandbox process"
)
PERMISSION_HINT = (
    "use the daemon as root or as a member of the docker group "
    "(`sudo usermod -aG docker $USER`, then log in again), or use --sandbox process"
)
_CLIENT_ENV = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")


class DockerUnavailable(SandboxUnavailable):
    """The Docker daemon cannot be reached; the message names the address, cause and fix."""


def docker_host() -> str:
    return getenv("DOCKER_HOST") or DEFAULT_HOST


def _chain(e: BaseException) -> Iterator[BaseException]:
    """`e` and every exception behind it: SDK, requests and urllib3 exceptions wrap the
    one that says what happened at the socket in `args`, `__cause__` or `__context__`."""
    stack: list[object] = [e]
    seen: set[int] = set()
    while stack:
        cur = stack.pop()
        if not isinstance(cur, BaseException) or id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        stack.extend([cur.__context__, cur.__cause__, *cur.args])


def unavailable(e: BaseException, timeout: float | None = None) -> DockerUnavailable:
    """The DockerUnavailable for a failure to reach the daemon."""
    import requests

    host = docker_host()
    chain = list(_chain(e))
    # only a builtin OSError is the socket's own (requests' exceptions are OSErrors too)
    cause = next(
        (x for x in chain if isinstance(x, OSError) and type(x).__module__ == "builtins"), None
    )
    if isinstance(cause, TimeoutError) or any(
        isinstance(x, requests.exceptions.Timeout) for x in chain
    ):
        within = f" within {timeout:g}s" if timeout else ""
        return DockerUnavailable(
            f"Docker daemon did not answer{within} at {host}; check that dockerd is healthy "
            "(`docker info`), restart it, or use --sandbox process"
        )
    if isinstance(cause, PermissionError):
        return DockerUnavailable(
            f"Docker daemon not reachable at {host} (permission denied on its socket); "
            + PERMISSION_HINT
        )
    detail = (cause.strerror or str(cause)) if cause is not None else str(e)
    return DockerUnavailable(
        f"Docker daemon not running or not reachable at {host} ({detail}); {START_HINT}"
    )


@contextlib.contextmanager
def reaching(timeout: float | None = None) -> Iterator[None]:
    """Failures to reach the daemon inside the block become DockerUnavailable."""
    import docker.errors
    import requests

    try:
        yield
    except docker.errors.APIError:
        raise  # the daemon answered: the caller words it
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        raise unavailable(e, timeout) from None


@functools.cache
def _client(env: tuple[str | None, ...], timeout: float) -> Any:
    import docker

    with reaching(timeout):  # the client asks the daemon for its API version at once
        return docker.from_env(timeout=timeout)


def client(timeout: float = API_TIMEOUT_S) -> Any:
    """A `docker.DockerClient` for the daemon the environment names, shared per process
    (a failed connection is not cached: the next call tries again)."""
    return _client(tuple(getenv(name) for name in _CLIENT_ENV), timeout)


def check_daemon(timeout: float = CHECK_TIMEOUT_S) -> str:
    """The daemon's server version; DockerUnavailable (never a hang) when it does not answer."""
    with reaching(timeout):
        return str(client(timeout).version()["Version"])


def check_image(tag: str) -> None:
    import docker.errors

    with reaching():
        try:
            client().api.inspect_image(tag)
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(f"sandbox image {tag} is missing; {BUILD_HINT}") from None


def remove(container: Any) -> None:
    """Force-remove a container; one already gone (auto-removed) or going is fine."""
    import docker.errors

    with reaching():
        try:
            container.remove(force=True)
        except docker.errors.APIError as e:
            if e.status_code not in (404, 409):
                raise


def docker_cli() -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise SandboxUnavailable(
            "Docker backend unavailable: the docker CLI is not installed "
            "(apt-get install docker.io); the sandbox streams jobs through `docker attach`"
        )
    return docker
