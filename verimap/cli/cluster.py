"""The `--ray` options of `verimap eval`, apart from the command so that it stays small:
the work is `verimap.evals.cluster`'s."""

from __future__ import annotations

from collections.abc import Callable
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
        "the cluster this machine joined). --max-tasks is then tasks in flight per node.",
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


async def run_on_ray(
    kw: dict[str, Any], bench: Any, out: Path, endpoint: dict[str, Any], common: dict[str, Any]
) -> Any:
    """`verimap eval` with `--ray`: the command's settings, handed to `eval_on_ray`."""
    from verimap.evals.cluster import eval_on_ray, ray_address

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
        **common,
    )
