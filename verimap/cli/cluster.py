"""The `--ray` options of `verimap eval`, apart from the command so that it stays small:
the work is `verimap.evals.cluster`'s."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click

OPTIONS = [
    click.option(
        "--ray",
        is_flag=False,
        flag_value="auto",
        default=None,
        metavar="[ADDRESS]",
        help="Solve the tasks on a Ray cluster: its head's HOST:PORT, or 'auto' (the default: "
        "the cluster this machine joined). --max-tasks is then tasks in flight per node. "
        "Command line only: a cluster can run code in this process (docs/security.md).",
    ),
    click.option(
        "--ray-env",
        "ray_env",
        multiple=True,
        metavar="NAME",
        help="With --ray, send the variable NAME of this environment to the workers (repeat "
        "for more; e.g. OPENAI_API_KEY). No other variable is sent.",
    ),
    click.option(
        "--ray-endpoint-per-node",
        default=None,
        metavar="URL|local",
        help="With --ray, each node's own model endpoint: a base URL with {node_ip} "
        "(http://{node_ip}:8000/v1), or 'local' (each node serves the local model).",
    ),
]


def ray_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(OPTIONS):
        f = option(f)
    return f


def sent_env(names: Iterable[str], per_node: str | None) -> list[str]:
    """`--ray-env`'s names, each checked to be set here; a note names the endpoint variables
    this environment has and does not send (the workers use their own, if any)."""
    from verimap.base.env import getenv

    chosen = list(dict.fromkeys(names))
    missing = [n for n in chosen if getenv(n) is None]
    if missing:
        raise click.BadParameter(
            f"{', '.join(missing)} not set in this environment", param_hint="--ray-env"
        )
    unsent = [
        n
        for n in ("OPENAI_API_KEY", "OPENAI_BASE_URL")
        if getenv(n) is not None and n not in chosen
    ]
    if unsent and per_node != "local":
        verb = "is" if len(unsent) == 1 else "are"
        click.echo(
            f"note: this environment's {' and '.join(unsent)} {verb} not sent: the cluster's "
            f"workers use their own (send it with --ray-env {unsent[0]})",
            err=True,
        )
    return chosen


def refuse_idle_ray_env(names: Iterable[str] | None, address: str | None) -> None:
    """`--ray-env` names variables for a cluster: without `--ray` it is a usage error."""
    if names and not address:
        raise click.UsageError("--ray-env names variables to send to a cluster: it needs --ray")


async def run_on_ray(
    kw: dict[str, Any], bench: Any, out: Path, endpoint: dict[str, Any], common: dict[str, Any]
) -> Any:
    """`verimap eval` with `--ray`: the command's settings, handed to `eval_on_ray`."""
    from verimap.evals.cluster import eval_on_ray, ray_address

    names = sent_env(kw.get("ray_env") or (), kw.get("ray_endpoint_per_node"))
    return await eval_on_ray(
        bench,
        kw["method"],
        out,
        address=ray_address(kw.get("ray")) or "auto",
        endpoint=endpoint,
        endpoint_per_node=kw.get("ray_endpoint_per_node"),
        models_factory=kw.get("models_factory"),
        data_dir=kw.get("data_dir"),
        sandbox_kind=kw.get("sandbox_kind") or "auto",
        env_names=names,
        **common,
    )
