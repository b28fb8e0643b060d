"""The options several commands share, so that one concept has one name in every command
(docs/cli.md#names; tests/cli/test_names.py holds every `--help` to it):

- `--max-attempts N`: execute->verify attempts per node (1: no retry);
- `--max-parallel-nodes N`: nodes of one plan running at once, inside one task;
- `-c/--max-tasks N`: tasks in flight at once, each with its own plan;
- `--epochs N`: each task solved N times (Inspect AI's word for it);
- `-q/--quiet`: no progress narration on stderr;
- `-o/--out DIR`: always a directory; a single file is `--out-file FILE`;
- `--timeout S`: per unit (one VF, one sample); a run's budgets are `--*-limit`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click


def max_attempts_option(**kw: Any) -> Callable[..., Any]:
    return click.option(
        "--max-attempts",
        type=click.IntRange(min=1),
        help="Execute->verify attempts per node and plan (1: no retry).",
        **kw,
    )


def max_parallel_nodes_option(**kw: Any) -> Callable[..., Any]:
    return click.option(
        "--max-parallel-nodes",
        type=click.IntRange(min=1),
        help="Ready nodes of one plan running at once (inside one task; tasks in flight are "
        "--max-tasks).",
        **kw,
    )


def max_tasks_option(help: str, **kw: Any) -> Callable[..., Any]:
    return click.option("--max-tasks", "-c", type=click.IntRange(min=1), help=help, **kw)


def quiet_option(help: str) -> Callable[..., Any]:
    return click.option("--quiet", "-q", is_flag=True, default=False, help=help)


def out_file_option(help: str, **kw: Any) -> Callable[..., Any]:
    return click.option(
        "--out-file",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="FILE",
        help=help,
        **kw,
    )


def typed_here(param: str, ctx: click.Context | None = None) -> bool:
    """Whether the user gave `param` on this command line (not the environment, pyproject.toml,
    a --config file or a default): only such a path may replace a file verimap did not write
    (`verimap.base.out_files`)."""
    ctx = ctx or click.get_current_context()
    return ctx.get_parameter_source(param) is click.core.ParameterSource.COMMANDLINE


CROSS_CHECK_HELP = (
    "Confirm a final answer only when independently drawn solutions agree with it: sampled "
    "replies for a number (--ballot), fresh samples run on generated inputs for code (more "
    "judge calls; beyond the paper) [default: on for the local model]."
)


def ballot_option(**kw: Any) -> Callable[..., Any]:
    from verimap.base.check_names import BALLOTS

    return click.option(
        "--ballot",
        type=click.Choice(list(BALLOTS)),
        default=None,
        help="How answer agreement (--cross-check) confirms a number: "
        + "; ".join(f"{name}: {what}" for name, what in BALLOTS.items())
        + ".",
        **kw,
    )
