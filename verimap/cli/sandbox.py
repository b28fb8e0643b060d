"""`verimap sandbox build|doctor`: make the sandbox image and prove its confinement."""

from __future__ import annotations

import asyncio
import json
import os
import secrets

import click

from verimap.cli import sandbox_option

# Runs inside the sandbox; prints one JSON object per confinement check.
SELF_TEST = r"""
import json, os, resource, socket, sys
SENTINEL = sys.argv[1]
BACKEND = sys.argv[2]
def check(name, ok, detail):
    print(json.dumps({"check": name, "ok": bool(ok), "detail": str(detail)}))
def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2).close()
    check("network blocked", False, "TCP connect to 1.1.1.1:53 succeeded")
except OSError as e:
    try:
        socket.getaddrinfo("example.com", 80)
        check("network blocked", False, "DNS lookup succeeded")
    except OSError:
        check("network blocked", True, f"connect: {e.strerror or e}; DNS fails")
try:
    with open("/usr/verimap-probe", "w") as f:
        f.write("x")
    check("root filesystem read-only", False, "wrote /usr/verimap-probe")
except OSError as e:
    check("root filesystem read-only", True, f"write to /usr: {e.strerror}")
uid = os.getuid()
check("non-root user", uid != 0, f"uid={uid} gid={os.getgid()}")
if BACKEND == "docker":
    mem = read("/sys/fs/cgroup/memory/memory.limit_in_bytes") or read("/sys/fs/cgroup/memory.max")
    ok = mem is not None and mem != "max" and int(mem) < 1 << 50
    check("memory limit", ok, f"cgroup limit {mem} bytes")
    swap = read("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes") or read("/sys/fs/cgroup/memory.swap.max")
    check("swap equals memory", swap in (None, mem, "0"), f"memsw/swap limit {swap}")
    pids = read("/sys/fs/cgroup/pids/pids.max") or read("/sys/fs/cgroup/pids.max")
    check("pids limit", pids not in (None, "max"), f"pids.max {pids}")
    env = read("/proc/1/environ") or ""
    keys = sorted(kv.split("=", 1)[0] for kv in env.split("\0") if kv)
    check("no host environment", SENTINEL not in env and "OPENAI_API_KEY" not in env,
          f"container env keys: {', '.join(keys)}")
    status = read("/proc/self/status") or ""
    caps = [l.split()[1] for l in status.splitlines() if l.startswith("CapEff")]
    check("capabilities dropped", caps == ["0000000000000000"], f"CapEff {caps}")
    nnp = [l.split()[1] for l in status.splitlines() if l.startswith("NoNewPrivs")]
    check("no-new-privileges", nnp == ["1"], f"NoNewPrivs {nnp}")
else:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    check("memory limit", soft != resource.RLIM_INFINITY, f"RLIMIT_AS {soft}")
    check("pids limit", True, "not enforced by the process backend (rlimits only)")
    check("no host environment", SENTINEL not in str(dict(os.environ)),
          f"env keys: {', '.join(sorted(os.environ))}")
"""


@click.group()
def sandbox() -> None:
    """The Docker sandbox for Python VFs and generated code."""


@sandbox.command()
@click.option("--offline", is_flag=True, help="debootstrap + docker import; no registry needed")
@click.option("--force", is_flag=True, help="rebuild even if the image exists")
def build(offline: bool, force: bool) -> None:
    """Build verimap-sandbox:<version> (a no-op when it is already present)."""
    from verimap.sandbox.image import BuildError, build_offline, build_online

    try:
        tag = (build_offline if offline else build_online)(
            force=force, log=lambda m: click.echo(m, err=True)
        )
    except BuildError as e:
        raise click.ClickException(str(e)) from None
    click.echo(tag)


@sandbox.command()
@sandbox_option()
def doctor(sandbox_kind: str) -> None:
    """Print backend, daemon and image, then run the confinement self-test (one line per check)."""
    from verimap.sandbox import SandboxUnavailable, get_sandbox
    from verimap.sandbox.image import image_tag

    kind = sandbox_kind
    sentinel = "VERIMAP_DOCTOR_" + secrets.token_hex(8)
    os.environ["VERIMAP_DOCTOR_SENTINEL"] = sentinel
    try:
        if kind == "docker":  # uncached checks: the doctor must see the daemon as it is now
            from verimap.sandbox.daemon import check_daemon, check_image

            check_daemon()
            check_image(image_tag())
        sb = get_sandbox(kind, shared=False)
    except SandboxUnavailable as e:
        click.echo(f"backend: {kind}: UNAVAILABLE: {e}")
        raise SystemExit(1) from None
    click.echo(f"backend: {sb.kind}")
    if sb.kind == "docker":
        click.echo(f"daemon: Docker {getattr(sb, 'daemon_version', '?')}")
        click.echo(f"image: {image_tag()}")
    else:
        click.echo("WARNING: the process backend isolates far less than Docker")
        click.echo(
            f"network namespace: {'yes' if getattr(sb, 'network_isolated', False) else 'NO'}"
        )

    async def go():
        try:
            return await sb.run_program(SELF_TEST, argv=[sentinel, sb.kind], timeout=30)
        finally:
            await sb.aclose()

    try:
        res = asyncio.run(go())
    except SandboxUnavailable as e:
        click.echo(f"UNAVAILABLE: {e}")
        raise SystemExit(1) from None
    failed = 0
    checks = 0
    for line in res.stdout.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        checks += 1
        failed += not rec["ok"]
        click.echo(f"{'ok  ' if rec['ok'] else 'FAIL'} {rec['check']}: {rec['detail']}")
    if not res.passed or checks == 0:
        click.echo(
            f"FAIL self-test did not run: {res.outcome.value} {res.message} {res.stderr[-500:]}"
        )
        raise SystemExit(1)
    if failed:
        raise SystemExit(1)
