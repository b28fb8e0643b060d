"""The options of `verimap run` and `verimap eval` for how model calls are made: the call cache
and the cap on connections per endpoint. They go to `verimap.local.endpoint.connect` as they are,
beside the endpoint's own options, and live apart from both commands so that the commands'
other flags can change without touching them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from verimap.base.usage import Usage

# The keyword arguments of `connect` these options fill.
CALL_KEYS = ("cache", "cache_dir", "max_connections")


class CacheMode(click.Choice):
    """A cache mode. `--cache` alone means on, so `--cache "TASK"` reads the task as a mode:
    the error then says how to write what was meant."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(
                f"{value!r} is not a cache mode ({', '.join(self.choices)}). `--cache` reads the "
                "argument after it as its mode: write `--cache on`, or put the task first",
                param,
                ctx,
            )


OPTIONS = [
    click.option(
        "--cache",
        type=CacheMode(["off", "on", "sampled"]),
        default="off",
        is_flag=False,
        flag_value="on",
        show_default=True,
        help="Keep model replies on disk and answer a repeated request from there, with no "
        "call: on (requests at temperature 0), sampled (sampled ones too, replayed in order); "
        "--cache alone: on.",
    ),
    click.option(
        "--cache-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Where --cache keeps replies [$VERIMAP_CACHE_DIR, else "
        "$XDG_CACHE_HOME/verimap/calls].",
    ),
    click.option(
        "--max-connections",
        type=click.IntRange(min=1),
        default=None,
        help="Requests in flight at once per endpoint, over all tasks and roles [16; 1 on the "
        "local model].",
    ),
]


def model_call_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(OPTIONS):
        f = option(f)
    return f


def cache_line(u: Usage) -> str | None:
    """What the call cache answered and saved, for a printed usage summary (None: nothing)."""
    if not u.cached_calls:
        return None
    return (
        f"call cache: {u.cached_calls} replies from the cache (not calls), saving "
        f"{u.saved_prompt_tokens} prompt + {u.saved_completion_tokens} completion tokens, "
        f"${u.saved_cost:.4f}"
    )
