"""The `verimap` command. Subcommands live in their own modules and load on use,
so `verimap --help` stays fast and one area's heavy imports never slow another."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from verimap.base.redaction import for_console

if TYPE_CHECKING:
    from verimap.config import RunConfig

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
    "trust": "verimap.cli.trust:trust",
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


def endpoint_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the endpoint-choosing options to a click command (passed as keyword arguments)."""
    opts = [
        click.option(
            "--model",
            default=None,
            help="Model for every role: a local catalog name (qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, "
            "'local') or a model name at the configured endpoint (e.g. gpt-4o-mini).",
        ),
        click.option("--planner-model", default=None, help="Planner model at the endpoint."),
        click.option("--executor-model", default=None, help="Executor model at the endpoint."),
        click.option("--judge-model", default=None, help="Judge model at the endpoint."),
        click.option(
            "--base-url",
            default=None,
            help="OpenAI-compatible endpoint URL (default: $OPENAI_BASE_URL; none: the local model).",
        ),
        click.option(
            "--keep-server/--no-keep-server",
            default=False,
            help="Keep the local model server running after the command, for reuse.",
        ),
        click.option(
            "--model-file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Serve this GGUF file locally instead of a catalog model ($VERIMAP_MODEL_FILE).",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


class _StderrNotes(logging.StreamHandler):
    """Log notes can quote an endpoint's reply: masked and stripped like all console text."""

    def format(self, record: logging.LogRecord) -> str:
        return for_console(super().format(record))


def log_to_stderr(level: int = logging.INFO) -> None:
    """Show verimap's progress notes (local server started, reused, restarted) on stderr."""
    logger = logging.getLogger("verimap")
    if not any(isinstance(h, _StderrNotes) for h in logger.handlers):
        handler = _StderrNotes(sys.stderr)
        handler.setFormatter(logging.Formatter("verimap: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level)


# `verimap run` and `verimap eval`: the cap on a plan's size (`RunConfig.planning.max_nodes`; 0 = None).
max_nodes_option = click.option(
    "--max-nodes",
    type=click.IntRange(min=0),
    default=None,
    help="The most nodes a plan may have; 1: the whole task as one node, no planner call; 0: no "
    "cap [default: no cap; 1 on the local model].",
)

# `verimap run` and `verimap eval`: a pool of demonstrations (`RunConfig.planning.demos_file`).
demos_option = click.option(
    "--demos",
    "demos",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    default=None,
    help="Also show the staged planner the demonstrations in FILE (`verimap export demos`); "
    "a --sample draw leaves out the tasks whose plans it holds.",
)


policy_option = click.option(
    "--policy",
    type=click.Choice(["small-model", "small-model-planner", "paper", "none"]),
    default=None,
    help="The rules the run follows beyond the core loop (docs/engine.md#policies): small-model, "
    "small-model-planner (the same, but the model writes the plan in stages), paper (the "
    "paper's protocol exactly), or none [default: small-model on the local model, none on an "
    "endpoint].",
)


def local_endpoint(endpoint: Mapping[str, Any]) -> bool:
    """Whether a command's endpoint options choose the local model: a model file, or a model
    no endpoint serves."""
    from verimap.local.endpoint import is_remote

    return endpoint.get("model_file") is not None or not is_remote(
        endpoint.get("model"), endpoint.get("base_url")
    )


def named_policies(policy: str | None) -> list[str] | None:
    """`--policy` as a config's `policies`; None when it is not given (the run's default)."""
    if policy is None:
        return None
    return [] if policy == "none" else [policy]


samples_option = click.option(
    "--samples",
    type=click.IntRange(min=1),
    default=None,
    help="k, the samples a voting method draws per task (--method sc) [default: 4].",
)


def with_cross_check(run_config: dict[str, Any], on: bool | None) -> None:
    """`--cross-check/--no-cross-check`: add or remove the checks that confirm an answer with
    independently written solutions, keeping the others `run_config` (settings in their parts)
    has, or the default."""
    from verimap.base.check_names import AGREEMENT_CHECKS
    from verimap.config import RunConfig

    if on is None:
        return
    verify = run_config.setdefault("verify", {})
    checks = [
        c for c in verify.get("checks", RunConfig().verify.checks) if c not in AGREEMENT_CHECKS
    ]
    verify["checks"] = checks + (list(AGREEMENT_CHECKS) if on else [])


def cross_checks(config: RunConfig) -> bool:
    """Whether the run confirms answers with independent solutions."""
    from verimap.base.check_names import AGREEMENT_CHECKS

    return config.verify.verification == "full" and any(
        c in AGREEMENT_CHECKS for c in config.verify.checks
    )


def warn_idle_ballot(config: RunConfig) -> None:
    """`--ballot` chooses how answer agreement votes; without that check it would do nothing."""
    from verimap.base.check_names import ANSWER_AGREEMENT

    if not (config.verify.verification == "full" and ANSWER_AGREEMENT in config.verify.checks):
        click.echo(
            "note: --ballot does nothing here: answer agreement (--cross-check) is not among "
            "this run's checks",
            err=True,
        )


def warn_idle_cross_check(config: RunConfig, what: str) -> None:
    """`--cross-check` beside no plan VFs would otherwise do nothing, and say nothing."""
    if not cross_checks(config):
        click.echo(
            f"note: --cross-check does nothing with {what}: checks stand beside the plan's "
            "VFs (verification full)",
            err=True,
        )


class LazyGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        """Every command's error message passes the console boundary here: click prints it,
        and it may quote an endpoint's reply (an echoed key) or a model's text."""
        try:
            return super().invoke(ctx)
        except click.ClickException as e:
            e.message = for_console(e.message)  # type: ignore[misc]  # Final in click's stubs only
            raise

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        from verimap.cli.defaults import prepare

        module, attr = target.split(":")
        cmd = getattr(importlib.import_module(module), attr)
        prepare(cmd, (cmd_name,))
        return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="verimap")
@click.pass_context
def main(ctx: click.Context) -> None:
    """verimap: verification-aware multi-agent planning.

    Every flag also has a default from $VERIMAP_<COMMAND>_<FLAG> and from [tool.verimap] in
    ./pyproject.toml, which sets only harmless options until you `verimap trust` it
    (docs/cli.md#defaults)."""
    from verimap.cli.defaults import META, read_pyproject

    log_to_stderr()
    read = read_pyproject(main, Path("pyproject.toml"))
    if read is not None:
        ctx.default_map = read.defaults
        ctx.meta[META] = read
