"""`verimap export`: data for training, drawn from eval run directories."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from verimap.cli.vocabulary import out_file_option, typed_here
from verimap.planning.demos import DOMAINS

if TYPE_CHECKING:
    from verimap.base.out_files import Kind
    from verimap.evals.mined_demos import DemoSummary
    from verimap.evals.preferences import ExportSummary
    from verimap.evals.run_plans import ReadSummary

T = TypeVar("T")


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
    from verimap.evals.preferences import PAIRS_FILE, preference_pairs, write_pairs

    _export(
        out_file,
        PAIRS_FILE,
        lambda: preference_pairs(run_dirs, include_fallbacks=include_fallbacks, metadata=metadata),
        write_pairs,
        verbose,
    )


@export.command()
@click.argument(
    "run_dirs", metavar="RUN_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path)
)
@click.option(
    "--domain",
    type=click.Choice(DOMAINS),
    required=True,
    help="The domain of the runs' benchmark, whose planner the pool is for.",
)
@out_file_option(
    "The JSON pool to write (an existing one only if this export wrote it, or FILE is given here).",
    required=True,
)
@click.option("-v", "--verbose", is_flag=True, help="Print every note (missing traces, ...).")
def demos(run_dirs: tuple[Path, ...], domain: str, out_file: Path, verbose: bool) -> None:
    """Demonstrations for the staged planner (`--demos FILE` of run and eval): per task of the
    runs (all of one benchmark), the plan the model wrote that verified with the right answer,
    in the stages the planner writes."""
    from verimap.evals.mined_demos import DEMOS_FILE, mine_demos, write_demos

    _export(out_file, DEMOS_FILE, lambda: mine_demos(run_dirs, domain), write_demos, verbose)


def _export(
    out_file: Path,
    kind: Kind,
    build: Callable[[], tuple[T, ExportSummary | DemoSummary]],
    write: Callable[..., object],
    verbose: bool,
) -> None:
    """What `build` reads from the run directories, written to `out_file` by `write` (a file
    of another `kind` is not replaced: `check_replace`), then the summary: a bad run directory or
    output file is a click error."""
    from verimap.base.out_files import OutFileError, check_replace
    from verimap.evals.run_plans import ExportError

    named = typed_here("out_file")
    try:
        check_replace(out_file, kind, named=named)
        found, summary = build()
        write(found, out_file, named=named)
    except ExportError as e:
        raise click.BadParameter(str(e), param_hint="RUN_DIR") from None
    except OutFileError as e:
        raise click.ClickException(str(e)) from None
    _report(summary, verbose)
    click.echo(f"{out_file}: {summary.line()}")


def _report(summary: ReadSummary, verbose: bool) -> None:
    """The summary's warnings, and its notes (the first few unless `verbose`), on stderr."""
    from verimap.base.redaction import printable

    for warning in summary.warnings:
        click.echo(f"warning: {printable(warning)}", err=True)
    notes = summary.notes if verbose else summary.notes[:5]
    for note in notes:
        click.echo(f"note: {printable(note)}", err=True)
    if len(summary.notes) > len(notes):
        click.echo(f"note: {len(summary.notes) - len(notes)} more (see --verbose)", err=True)
