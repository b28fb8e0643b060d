"""`verimap eval compact DIR... --out-file FILE`: a draw's compact results file from its run directories.

A compact file keeps what `verimap eval report` and `verimap eval compare` recompute (per task:
outcome, verified, calls, tokens, seconds; `verimap.evals.compact`) and none of the traces, so
it can be kept with the code where run directories cannot.

verimap eval compact runs/vq-6441 --out-file eval/draws/vq-6441.jsonl
verimap eval compact runs/vq-6441-mixed --variant "--ballot mixed" --out-file eval/draws/vq-6441.jsonl --append
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("compact")
@click.argument(
    "dirs", metavar="DIR...", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False)
)
@click.option(
    "--out-file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The compact results file to write (JSON lines).",
)
@click.option(
    "--variant",
    default=None,
    help="Name every method METHOD VARIANT (a setting it ran with beside the plain "
    'method in the same draw, e.g. "--ballot mixed"). Without it, a directory whose '
    "config.json records a variant (a benchmark's cell, e.g. sc-planned) names its "
    "records by that.",
)
@click.option(
    "--append",
    is_flag=True,
    help="Add to FILE (another cell of the same draw) instead of replacing it.",
)
def compact(dirs: tuple[str, ...], out_file: Path, variant: str | None, append: bool) -> None:
    """Write one compact line per finished task of each run DIR (a directory holding run
    directories, such as a benchmark script's runs directory, stands for all of them)."""
    from verimap.base.redaction import printable
    from verimap.evals.compact import CompactError, lines_from_dirs, write_lines
    from verimap.evals.run_dir import RunDirError

    out = out_file

    if out.exists() and not append and out.stat().st_size and not _is_compact_file(out):
        raise click.ClickException(
            f"{out} holds something else than compact results; choose another --out-file"
        )
    problems: list[str] = []
    try:
        lines = lines_from_dirs(dirs, variant, problems)
        n = write_lines(lines, out, append=append)
    except (RunDirError, CompactError) as e:
        raise click.ClickException(str(e)) from None
    for p in problems:
        click.echo(f"skipped: {printable(p)}", err=True)
    click.echo(f"{out}: {n} task(s) written")


def _is_compact_file(path: Path) -> bool:
    """Whether every line of `path` is a compact line (so replacing it loses nothing else)."""
    from verimap.evals.compact import read_lines

    problems: list[str] = []
    return bool(read_lines(path, problems)) and not problems
