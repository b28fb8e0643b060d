"""`verimap plan`: validate, print the schema of, and draw plans, without any model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from verimap.base.plan import Plan, PlanError, plan_json_schema, to_mermaid
from verimap.planning.plan import parse_plan


def load_plan_file(path: Path) -> Plan:
    """Read and validate a plan file; `click.UsageError`-style exits are left to callers."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise click.FileError(str(path), hint=e.strerror or str(e)) from None
    return parse_plan(text)


@click.group()
def plan() -> None:
    """Validate, inspect and draw plan files (JSON DAGs with verification functions)."""


@plan.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def validate(file: Path, as_json: bool) -> None:
    """Check FILE; print every problem at once. Exit 0 valid, 1 invalid."""
    try:
        p = load_plan_file(file)
    except PlanError as e:
        if as_json:
            click.echo(json.dumps({"valid": False, "problems": e.problems}, indent=2))
        else:
            click.echo(f"{file}: invalid plan ({len(e.problems)} problem(s))", err=True)
            for prob in e.problems:
                click.echo(f"  - {prob}", err=True)
        sys.exit(1)
    final = p.final_node().id
    if as_json:
        click.echo(json.dumps({"valid": True, "nodes": len(p.nodes), "final": final}, indent=2))
    else:
        click.echo(f"{file}: valid plan, {len(p.nodes)} node(s), final node {final!r}")


@plan.command()
def schema() -> None:
    """Print the JSON Schema of a plan (what planners answer in)."""
    click.echo(json.dumps(plan_json_schema(), indent=2))


@plan.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--mermaid", is_flag=True, help="Print a mermaid flowchart instead of a summary.")
def show(file: Path, mermaid: bool) -> None:
    """Show the plan in FILE as a summary or (--mermaid) a flowchart."""
    try:
        p = load_plan_file(file)
    except PlanError as e:
        click.echo(str(e), err=True)
        sys.exit(1)
    if mermaid:
        click.echo(to_mermaid(p))
        return
    final = p.final_node().id
    for nid in p.topological_order():
        n = p.node(nid)
        mark = " (final)" if nid == final else ""
        click.echo(f"{nid}{mark}: {n.name or ''}".rstrip(": "))
        click.echo(f"  instruction: {n.instruction}")
        click.echo(f"  inputs: {', '.join(n.inputs) or '-'}")
        click.echo(f"  outputs: {', '.join(n.outputs)}")
        for vf in n.verification:
            click.echo(f"  vf {vf.name} [{vf.type}]")
