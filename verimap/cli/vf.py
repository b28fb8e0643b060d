"""`verimap vf check`: run one node's verification functions on given outputs, no model needed."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click

from verimap.base.model import ModelError
from verimap.base.plan import USER_TASK, PlanError
from verimap.cli import endpoint_options, sandbox_option
from verimap.core.verifier import Verifier
from verimap.planning.plan import parse_plan

EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def _connect(**endpoint: Any):
    """The judge's endpoint; tests replace this hook to inject a scripted model."""
    from verimap.local.endpoint import connect

    return connect(**endpoint)


def _bad(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"), strict=False)
    except OSError as e:
        _bad(f"cannot read {what} file {path}: {e.strerror or e}")
    except json.JSONDecodeError as e:
        _bad(f"{what} file {path} is not valid JSON: {e}")


@click.group()
def vf() -> None:
    """Test verification functions without a model."""


@vf.command()
@click.argument("plan_file", metavar="PLAN", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--node", "node_id", required=True, help="Id of the node whose VFs to run.")
@click.option(
    "--outputs",
    "outputs_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSON object with the node's outputs.",
)
@click.option(
    "--inputs",
    "inputs_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help='JSON object of input values keyed by reference ("USER_TASK", "n1.x").',
)
@sandbox_option()
@click.option("--timeout", default=10.0, show_default=True, help="Seconds per Python VF.")
@click.option(
    "--judge",
    "use_judge",
    is_flag=True,
    help="Also run natural-language VFs on a judge model (chosen with the endpoint options).",
)
@endpoint_options
def check(
    plan_file: Path,
    node_id: str,
    outputs_file: Path,
    inputs_file: Path | None,
    sandbox_kind: str,
    timeout: float,
    use_judge: bool,
    **endpoint: Any,
) -> None:
    """Run node ID's VFs from PLAN on the outputs in OUT.json and print JSON verdicts.

    Python VFs run in the sandbox, no model needed. Natural-language (llm) VFs are
    reported as SKIPPED unless --judge is given. Exit 0 when every VF that ran
    passes, 1 when one does not, 2 on bad input.
    """
    try:
        text = plan_file.read_text(encoding="utf-8")
    except OSError as e:
        _bad(f"cannot read plan file {plan_file}: {e.strerror or e}")
    try:
        plan = parse_plan(text)
    except PlanError as e:
        _bad(f"{plan_file}: {e}")
    if node_id not in plan.by_id:
        _bad(f"plan has no node {node_id!r}; nodes: {', '.join(plan.by_id)}")
    node = plan.node(node_id)
    outputs = _read_json(outputs_file, "outputs")
    if not isinstance(outputs, dict):
        _bad(f"outputs file {outputs_file} must hold a JSON object, got {type(outputs).__name__}")
    inputs: dict[str, Any] = {}
    if inputs_file is not None:
        inputs = _read_json(inputs_file, "inputs")
        if not isinstance(inputs, dict):
            _bad(f"inputs file {inputs_file} must hold a JSON object, got {type(inputs).__name__}")
    unknown = [
        k
        for k in inputs
        if k not in node.inputs and k not in {r.split(".", 1)[-1] for r in node.inputs}
    ]
    if unknown:
        _bad(
            f"inputs {', '.join(unknown)} are not inputs of node {node_id!r} ({', '.join(node.inputs) or 'none'})"
        )
    for ref in node.inputs:
        if ref != USER_TASK and ref in inputs:
            inputs.setdefault(ref.split(".", 1)[1], inputs[ref])

    from verimap.sandbox import SandboxUnavailable, get_sandbox
    from verimap.tools.registry import default_tools

    needs_judge = use_judge and any(v.type == "llm" for v in node.verification)

    async def run_all(judge_model):
        try:
            sandbox = get_sandbox(sandbox_kind)
        except SandboxUnavailable as e:
            _bad(f"sandbox unavailable: {e}")
        try:
            verifier = Verifier(
                sandbox, judge_model, vf_timeout_s=timeout, tools=default_tools(sandbox)
            )
            verdicts = []
            for v in node.verification:
                if v.type == "python":
                    verdicts.append((await verifier.run_python(v, inputs, outputs)).model_dump())
                elif judge_model is not None:
                    verdicts.append(
                        (await verifier.run_judge(node, v, inputs, outputs)).model_dump()
                    )
                else:
                    verdicts.append(
                        {
                            "name": v.name,
                            "type": "llm",
                            "outcome": "SKIPPED",
                            "message": "natural-language VF: pass --judge to run it",
                        }
                    )
            return verdicts
        finally:
            await sandbox.aclose()

    async def go():
        if not needs_judge:
            return await run_all(None)
        async with _connect(**endpoint) as models:
            return await run_all(models["judge"])

    try:
        verdicts = asyncio.run(go())
    except ModelError as e:
        _bad(f"judge model unavailable: {e}")
    ran = [v for v in verdicts if v["outcome"] != "SKIPPED"]
    passed = all(v["outcome"] == "PASS" for v in ran)
    click.echo(json.dumps({"node": node_id, "passed": passed, "verdicts": verdicts}, indent=2))
    sys.exit(EXIT_PASS if passed else EXIT_FAIL)
