"""Build and identify the sandbox image.

The tag is `verimap-sandbox:<version>` where the version hashes every build
input (package list, uid, the worker package's modules, the Dockerfiles), so
the image is rebuilt only when one of them changes. Offline builds need no
registry: a Debian rootfs from `debootstrap --variant=minbase` (mirror read from
the machine's apt sources) is `docker import`ed, then a small layer adds the
worker, from a build context staged with exactly the hashed files.

Builds run the docker CLI rather than the Docker SDK, which adds nothing here:
`docker import -` takes the rootfs as a pipe from tar, and the SDK's build
goes through the daemon's legacy builder with the same context tar the CLI
sends. Containers, where the SDK does help, are in `verimap.sandbox.docker`.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from verimap.base.env import getenv
from verimap.base.errors import VerimapError
from verimap.sandbox.launch import WORKER_DIR

IMAGE_REPO = "verimap-sandbox"
BASE_REPO = "verimap-sandbox-base"
PACKAGES = ("python3", "python3-sympy", "python3-numpy", "python3-pytest")
SANDBOX_UID = 10001
DOCKERFILES = Path(__file__).resolve().parent / "dockerfiles"


class BuildError(VerimapError, RuntimeError):
    """The image could not be built; the message says which step and why."""


def cache_dir() -> Path:
    """Rootfs cache, outside the repository."""
    base = getenv("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "verimap" / "sandbox"


def apt_source(
    sources_dir: str = "/etc/apt/sources.list.d", sources_list: str = "/etc/apt/sources.list"
) -> tuple[str, str]:
    """(mirror URI, suite) of the machine's main Debian repository, from deb822 or one-line sources."""
    for path in sorted(glob.glob(os.path.join(sources_dir, "*.sources"))):
        for stanza in re.split(r"\n\s*\n", Path(path).read_text()):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
            if "deb" not in fields.get("types", "").split():
                continue
            uris, suites = fields.get("uris", "").split(), fields.get("suites", "").split()
            main = [s for s in suites if "-" not in s and "/" not in s]
            if uris and main and "security" not in uris[0]:
                return uris[0], main[0]
    paths = [sources_list, *sorted(glob.glob(os.path.join(sources_dir, "*.list")))]
    for path in paths:
        if not os.path.exists(path):
            continue
        for line in Path(path).read_text().splitlines():
            parts = re.sub(r"\[[^\]]*\]", "", line).split()
            if (
                len(parts) >= 3
                and parts[0] == "deb"
                and "-" not in parts[2]
                and "security" not in parts[1]
            ):
                return parts[1], parts[2]
    raise BuildError(
        f"no Debian mirror found in {sources_dir}/*.sources or {sources_list}; "
        "configure apt or build with a registry (`verimap sandbox build` without --offline)"
    )


def _base_key(suite: str) -> str:
    spec = {"suite": suite, "packages": PACKAGES, "variant": "minbase", "arch": platform.machine()}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def build_inputs(worker_dir: Path = WORKER_DIR, dockerfiles: Path = DOCKERFILES) -> dict[str, Path]:
    """The build context: its path for each file (the Dockerfiles, the worker's modules).

    Only the modules: bytecode and anything else next to them stay out of the image
    and out of its version.
    """
    files = {name: dockerfiles / name for name in ("Dockerfile", "Dockerfile.offline")}
    for module in sorted(worker_dir.glob("*.py")):
        files[f"worker/{module.name}"] = module
    return files


def hash_inputs(files: Mapping[str, Path]) -> str:
    """Hash of the build context's files plus the package list and uid."""
    h = hashlib.sha256(json.dumps({"packages": PACKAGES, "uid": SANDBOX_UID}).encode())
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].read_bytes() + b"\0")
    return h.hexdigest()[:12]


@functools.cache
def version() -> str:
    """The image tag's version: changes exactly when a build input changes."""
    return hash_inputs(build_inputs())


@contextmanager
def build_context() -> Iterator[Path]:
    """A temporary directory holding exactly the hashed files, readable by the image's user."""
    with tempfile.TemporaryDirectory(prefix="verimap-image-") as tmp:
        root = Path(tmp)
        for name, src in build_inputs().items():
            dest = root / name
            dest.parent.mkdir(exist_ok=True)
            dest.parent.chmod(0o755)
            shutil.copyfile(src, dest)
            dest.chmod(0o644)
        yield root


def image_tag() -> str:
    return f"{IMAGE_REPO}:{version()}"


def _docker(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    docker = shutil.which("docker")
    if docker is None:
        raise BuildError("the docker CLI is not installed (apt-get install docker.io)")
    proc = subprocess.run([docker, *args], capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise BuildError(
            f"docker {' '.join(args[:2])} failed: {proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def image_exists(tag: str) -> bool:
    return _docker("image", "inspect", tag, check=False).returncode == 0


def _debootstrap(suite: str, mirror: str, log: Callable[[str], None]) -> Path:
    """A cached, finished rootfs directory (built once per package set)."""
    key = _base_key(suite)
    root = cache_dir() / f"rootfs-{key}"
    if (root / ".verimap-complete").exists():
        log(f"reusing cached rootfs {root}")
        return root
    if shutil.which("debootstrap") is None:
        raise BuildError("debootstrap is not installed (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise BuildError("the offline build runs debootstrap, which needs root: run it with sudo")
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"rootfs-{key}-", dir=root.parent))
    log(f"debootstrap {suite} from {mirror} into {staging} (a few minutes)")
    cmd = [
        "debootstrap",
        "--variant=minbase",
        "--include=" + ",".join(PACKAGES),
        suite,
        str(staging),
        mirror,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise BuildError(f"debootstrap failed (exit {proc.returncode}):\n{tail}")
    _finish_rootfs(staging)
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return root


def _finish_rootfs(root: Path) -> None:
    """Add the unprivileged sandbox user and drop caches the image does not need."""
    user = f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:verimap sandbox:/tmp:/usr/sbin/nologin\n"
    with open(root / "etc/passwd", "a") as f:
        f.write(user)
    with open(root / "etc/group", "a") as f:
        f.write(f"sandbox:x:{SANDBOX_UID}:\n")
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (root / sub).glob("*"):
            if p.is_file():
                p.unlink()
    (root / ".verimap-complete").write_text("ok\n")


def build_offline(*, force: bool = False, log: Callable[[str], None] = print) -> str:
    """Build `verimap-sandbox:<version>` with no registry; returns the tag."""
    tag = image_tag()
    if image_exists(tag) and not force:
        log(f"image {tag} already present")
        return tag
    mirror, suite = apt_source()
    base = f"{BASE_REPO}:{_base_key(suite)}"
    if force or not image_exists(base):
        root = _debootstrap(suite, mirror, log)
        log(f"docker import {root} as {base}")
        tar = subprocess.Popen(
            ["tar", "-C", str(root), "--exclude=./.verimap-complete", "-c", "."],
            stdout=subprocess.PIPE,
        )
        imp = subprocess.run(
            [shutil.which("docker") or "docker", "import", "-", base],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
        )
        assert tar.stdout is not None
        tar.stdout.close()
        if tar.wait() != 0 or imp.returncode != 0:
            raise BuildError(f"docker import failed: {imp.stderr.strip()}")
    log(f"adding the worker layer -> {tag}")
    with build_context() as context:
        _docker(
            "build",
            "--network",
            "none",
            "-t",
            tag,
            "--build-arg",
            f"BASE={base}",
            "-f",
            str(context / "Dockerfile.offline"),
            str(context),
        )
    prune_old(tag, log)
    return tag


def build_online(*, force: bool = False, log: Callable[[str], None] = print) -> str:
    """Build from the official Python base image (needs a registry)."""
    tag = image_tag()
    if image_exists(tag) and not force:
        log(f"image {tag} already present")
        return tag
    log(f"docker build -f Dockerfile -> {tag}")
    try:
        with build_context() as context:
            _docker("build", "-t", tag, "-f", str(context / "Dockerfile"), str(context))
    except BuildError as e:
        raise BuildError(
            f"{e}\nNo registry reachable? Build offline: verimap sandbox build --offline"
        ) from None
    prune_old(tag, log)
    return tag


def prune_old(keep: str, log: Callable[[str], None] = print) -> None:
    """Remove earlier verimap-sandbox:<version> tags; the base rootfs image stays cached."""
    listed = _docker("images", IMAGE_REPO, "--format", "{{.Repository}}:{{.Tag}}", check=False)
    for old in listed.stdout.split():
        stale = old != keep and old.startswith(IMAGE_REPO + ":")
        if stale and _docker("rmi", old, check=False).returncode == 0:
            log(f"removed outdated image {old}")
