"""`verimap view`: one static HTML file for traces and eval directories."""

from __future__ import annotations

from pathlib import Path

import click

from verimap.cli.vocabulary import out_file_option, typed_here


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@out_file_option(
    "The HTML file to write [default: report.html in the first PATH, or TRACE.html beside a "
    "trace]. An existing file is replaced only if verimap wrote it or FILE is given here.",
)
@click.option(
    "--max-chars",
    type=click.IntRange(min=100),
    default=10_000,
    show_default=True,
    help="Cut every longer text (model output, tracebacks) to this many characters.",
)
def view(paths: tuple[Path, ...], out_file: Path | None, max_chars: int) -> None:
    """Write one self-contained HTML report of PATHS and print its path.

    A PATH is a run's trace (.jsonl), an eval directory (config.json, results.jsonl,
    traces/), or a directory of either. Eval directories get the paper's tables, an
    accuracy-vs-cost plot and a filterable task list; every run gets its plan DAGs, plan
    diffs, and each node's attempts with every verdict. The page opens offline in any
    browser and fetches nothing; Graphviz `dot` must be installed. A line of a trace or of
    results.jsonl that cannot be read is skipped and named (file:line) on stderr and on the
    page; the rest is shown.
    """
    from verimap.base.redaction import printable
    from verimap.view import ViewError, write_report

    def skipped(line: str) -> None:
        click.echo(f"skipped: {printable(line)}", err=True)

    try:
        target = write_report(
            list(paths), out_file, max_chars=max_chars, warn=skipped, named=typed_here("out_file")
        )
    except ViewError as e:
        raise click.ClickException(str(e)) from None
    size = target.stat().st_size
    click.echo(
        f"wrote {target} ({size / 1e6:.1f} MB); open it in a browser: file://{target.resolve()}"
    )
