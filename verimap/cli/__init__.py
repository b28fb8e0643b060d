"""The `verimap` command. Subcommands live in their own modules and load on use,
so `verimap --help` stays fast and one area's heavy imports never slow another."""

from __future__ import annotations

import importlib

import click

# name -> "module:attribute" of a click command or group
SUBCOMMANDS: dict[str, str] = {
    "run": "verimap.cli.run:run",
    "plan": "verimap.cli.plan:plan",
    "vf": "verimap.cli.vf:vf",
    "sandbox": "verimap.cli.sandbox:sandbox",
    "humaneval": "verimap.cli.humaneval:humaneval",
    "model": "verimap.cli.model:model",
    "eval": "verimap.cli.eval:eval_",
    "view": "verimap.cli.view:view",
    "export": "verimap.cli.export:export",
}


def sandbox_option(dest: str = "sandbox_kind"):
    """`--sandbox auto|docker|process`, the same on every command that runs code."""
    return click.option(
        "--sandbox",
        dest,
        type=click.Choice(["auto", "docker", "process"]),
        default="auto",
        show_default=True,
        help="Where Python VFs and generated code run: auto (Docker when its daemon answers), "
        "docker, or process (isolates less).",
    )


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="verimap")
def main() -> None:
    """verimap: verification-aware multi-agent planning."""
