"""`verimap export`: data for training, drawn from eval run directories."""

from __future__ import annotations

from pathlib import Path

import click

from verimap.cli.vocabulary import out_file_option, typed_here


@click.group()
def export() -> None:
    """Export training data from eval runs."""


@export.command()
@click.argument(
    "run_dirs", metavar="RUN_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path)
)
@out_file_option(
    "The JSONL file to write (an existing one only if verimap wrote it, or FILE is given here).",
    required=True,
)
@click.option(
    "--include-fallbacks",
    is_flag=True,
    help="Also pair the one-node fallback plans, which no model wrote.",
)
@click.option(
    "--metadata",
    is_flag=True,
    help="Add a `metadata` column: benchmark, task and where each plan came from.",
)
@click.option("-v", "--verbose", is_flag=True, help="Print every note (missing traces, ...).")
def preferences(
    run_dirs: tuple[Path, ...],
    out_file: Path,
    include_fallbacks: bool,
    metadata: bool,
    verbose: bool,
) -> None:
    """Planner preference pairs (prompt/chosen/rejected, TRL's conversational DPO form): per
    task, a plan that verified and was correct beside one that failed, from any run and run
    directory given."""
    from verimap.base.out_files import OutFileError, check_replace
    from verimap.base.redaction import printable
    from verimap.evals.preferences import PAIRS_FILE, ExportError, preference_pairs, write_pairs

    named = typed_here("out_file")
    try:
        check_replace(out_file, PAIRS_FILE, named=named)
        pairs, summary = preference_pairs(
            run_dirs, include_fallbacks=include_fallbacks, metadata=metadata
        )
        write_pairs(pairs, out_file, named=named)
    except ExportError as e:
        raise click.BadParameter(str(e), param_hint="RUN_DIR") from None
    except OutFileError as e:
        raise click.ClickException(str(e)) from None
    for warning in summary.warnings:
        click.echo(f"warning: {printable(warning)}", err=True)
    notes = summary.notes if verbose else summary.notes[:5]
    for note in notes:
        click.echo(f"note: {printable(note)}", err=True)
    if len(summary.notes) > len(notes):
        click.echo(f"note: {len(summary.notes) - len(notes)} more (see --verbose)", err=True)
    click.echo(f"{out_file}: {summary.line()}")
