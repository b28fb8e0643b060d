"""`verimap run "TASK"`: plan, execute, verify, and print the answer with a per-node verdict table."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import click

from verimap.base.accounting import Budget
from verimap.base.env import getenv
from verimap.base.redaction import for_console, redact
from verimap.cli import (
    demos_option,
    endpoint_options,
    local_endpoint,
    max_nodes_option,
    named_policies,
    policy_option,
    samples_option,
    sandbox_option,
    warn_idle_ballot,
    warn_idle_cross_check,
    with_cross_check,
)
from verimap.cli.model_calls import cache_line, model_call_options
from verimap.cli.tracing import otel_option, otel_spans
from verimap.cli.vocabulary import (
    CROSS_CHECK_HELP,
    ballot_option,
    max_attempts_option,
    max_parallel_nodes_option,
    quiet_option,
)
from verimap.config import RunConfig, nest
from verimap.core.result import RunResult
from verimap.methods.presets import METHODS

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_BUDGET = 0, 1, 2, 3
# The model endpoint or the sandbox failed: the run says nothing about the task or the method.
EXIT_INFRA = 4
_C1 = re.compile(r"[\x7f-\x9f]")


def _connect(**endpoint: Any) -> AbstractAsyncContextManager[dict]:
    """The models for this command; tests replace this hook to inject scripted models."""
    from verimap.local.endpoint import connect

    return connect(**endpoint)


def _sandbox(kind: str):
    from verimap.sandbox import get_sandbox

    return get_sandbox(kind)


def print_result(result: RunResult, *, console=None) -> None:
    """The run's status, verdict table and answer. Everything a model or an endpoint wrote goes
    through `for_console` (secrets masked, escape sequences stripped) and in as plain text,
    never as rich markup."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    colour = {"success": "green", "partial": "yellow"}.get(result.status, "red")
    console.print(
        f"[bold]status:[/bold] [{colour}]{result.status}[/{colour}]  "
        f"iterations: {result.iterations}  retries: {result.retries}"
    )
    if result.error_kind == "infrastructure":
        console.print(
            "[bold red]infrastructure error:[/bold red] the model endpoint or the sandbox failed; "
            "this run is no verdict on the task"
        )
    if result.error:
        console.print("[bold]error:[/bold] ", end="")
        console.print(for_console(result.error), markup=False, emoji=False)
    table = Table(title="nodes (last plan)")
    for col in ("node", "status", "attempts", "verdicts of the last attempt"):
        table.add_column(col)
    order = [n.id for n in result.plans[-1].nodes] if result.plans else list(result.nodes)
    for nid in order:
        rep = result.nodes.get(nid)
        if rep is None:
            continue
        last = rep.attempts[-1] if rep.attempts else None
        verdicts = ", ".join(f"{v.name}={v.outcome}" for v in last.verdicts) if last else ""
        if last and last.error:
            error = f"error: {for_console(last.error)[:80]}"
            verdicts = f"{verdicts}; {error}" if verdicts else error
        cells = (nid, rep.status, str(len(rep.attempts)), verdicts or "-")
        table.add_row(*(Text(for_console(c)) for c in cells))
    console.print(table)
    u = result.usage.total
    console.print(
        f"usage: {u.calls} calls ({u.failed_calls} failed), {u.prompt_tokens} prompt + "
        f"{u.completion_tokens} completion tokens, ${u.cost:.4f}"
    )
    if cached := cache_line(u):
        console.print(cached, markup=False)
    if result.fallback_iterations:
        console.print(f"fallback plan in iteration(s): {result.fallback_iterations}")
    for rule in result.plan_rules:
        console.print(f"plan in iteration {for_console(rule)}")
    if result.dropped_vfs:
        console.print(
            for_console(f"VFs dropped: {', '.join(result.dropped_vfs)}"), markup=False, emoji=False
        )
    if result.trace_path:
        console.print(f"trace: {result.trace_path}", markup=False)
    answer = result.answer
    if answer is not None and not result.verified:
        console.print("[bold]answer (NOT verified):[/bold]")
    else:
        console.print("[bold]answer:[/bold]")
    console.print(
        for_console(
            answer if isinstance(answer, str) else json.dumps(answer, indent=2, default=str)
        ),
        markup=False,
        emoji=False,
    )


def result_json(result: RunResult) -> str:
    """`--json`: the whole result, secrets masked. JSON escapes C0 controls itself; C1 controls
    (an 8-bit CSI) are escaped here, so the text is safe on a terminal too."""
    text = json.dumps(redact(result.model_dump(mode="json")), indent=2, ensure_ascii=False)
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _given_on_the_command_line() -> set[str]:
    """The options the user wrote (a default is not a choice: a policy may set it)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    return {
        p.name
        for p in ctx.command.params
        if p.name and ctx.get_parameter_source(p.name) is not ParameterSource.DEFAULT
    }


def _refuse_unpriced(models: dict[str, Any], max_cost: float | None) -> None:
    """A cost budget on a model with no known price would count its calls at $0 and never trip:
    refused before the first call, as bad input."""
    from verimap.base.accounting import has_known_price

    unpriced = sorted({m.name for m in models.values() if not has_known_price(m)})
    if max_cost is not None and unpriced:
        raise click.BadParameter(
            f"no price is known for {', '.join(unpriced)}, so a cost budget cannot be enforced; "
            "budget calls, tokens or time instead",
            param_hint="--cost-limit",
        )


@click.command()
@click.argument("task")
@endpoint_options
@max_attempts_option(default=3, show_default=True)
@click.option(
    "--max-iterations",
    type=click.IntRange(min=1),
    default=None,
    help="Plans, counting the first [default: 5; 2 on the local model].",
)
@max_parallel_nodes_option(default=4, show_default=True)
@click.option(
    "--sequential",
    is_flag=True,
    help="One node at a time in topological order (the paper's order).",
)
@click.option(
    "--no-reuse", is_flag=True, help="After a replan, re-run every node (the paper's restart)."
)
@click.option(
    "--fail-accepted",
    is_flag=True,
    help="Accept nodes that use up their attempts; the result is partial.",
)
@max_nodes_option
@demos_option
@click.option(
    "--cross-check/--no-cross-check",
    default=None,
    help=CROSS_CHECK_HELP,
)
@ballot_option()
@policy_option
@click.option(
    "--verification",
    type=click.Choice(["full", "instruction", "none"]),
    default="full",
    show_default=True,
)
@click.option(
    "--plan-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Use this fixed plan instead of asking the planner model.",
)
@click.option(
    "--method",
    "-m",
    type=click.Choice(list(METHODS)),
    default=None,
    help="Run as one of the eval methods (react, map, map-v, verimap, ...) or baselines "
    "(bare, sc, program, rag), with the same presets as `verimap eval`, to compare methods on "
    "one task.",
)
@samples_option
@sandbox_option()
@click.option(
    "--trace-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where run traces go (default: $VERIMAP_TRACE_DIR or ./runs/traces).",
)
@click.option("--call-limit", type=int, default=None, help="Budget for the whole run: model calls.")
@click.option(
    "--token-limit",
    type=int,
    default=None,
    help="Budget for the whole run: tokens, prompt and completion.",
)
@click.option(
    "--cost-limit",
    type=float,
    default=None,
    help="Budget for the whole run: US dollars (refused for a model with no known price).",
)
@click.option(
    "--time-limit", type=float, default=None, help="Budget for the whole run: wall-clock seconds."
)
@click.option(
    "--temperature", type=float, default=None, help="Sampling temperature for every role."
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@quiet_option("Do not narrate the run's steps on stderr.")
@otel_option
@model_call_options
def run(
    task: str,
    max_attempts: int,
    max_iterations: int | None,
    max_parallel_nodes: int,
    sequential: bool,
    no_reuse: bool,
    fail_accepted: bool,
    max_nodes: int | None,
    demos: str | None,
    cross_check: bool | None,
    ballot: str | None,
    policy: str | None,
    verification: str,
    plan_file: Path | None,
    method: str | None,
    samples: int | None,
    sandbox_kind: str,
    trace_dir: Path | None,
    call_limit: int | None,
    token_limit: int | None,
    cost_limit: float | None,
    time_limit: float | None,
    temperature: float | None,
    as_json: bool,
    quiet: bool,
    otel: bool,
    **endpoint: Any,
) -> None:
    """Solve TASK: plan a DAG with verification functions, execute and verify every node, retry and
    replan on failures, and print the answer with a per-node verdict table.

    Exit 0 success or partial, 1 failed, 2 bad input, 3 budget exhausted, 4 infrastructure
    error (the model endpoint or the sandbox failed).
    """
    import verimap
    from verimap.base.model import ModelError
    from verimap.base.plan import PlanError
    from verimap.base.sandbox import SandboxUnavailable
    from verimap.planning.fixed_planners import TemplatePlanner
    from verimap.wiring import build, resolve

    if not task.strip():
        click.echo("error: TASK is empty", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if method and plan_file:
        click.echo("error: --method and --plan-file exclude each other", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if method == "rag":
        click.echo(
            "error: rag answers questions over a corpus: run it with `verimap eval -b "
            "multihoprag -m rag`",
            err=True,
        )
        sys.exit(EXIT_BAD_INPUT)
    typed = _given_on_the_command_line()
    knobs: dict[str, Any] = {
        knob: value
        for option, knob, value in (
            ("max_attempts", "max_retries", max_attempts),
            ("max_parallel_nodes", "max_parallel", max_parallel_nodes),
            ("sequential", "sequential", sequential),
            ("no_reuse", "reuse_verified", not no_reuse),
            ("fail_accepted", "fail_accepted", fail_accepted),
            ("verification", "verification", verification),
        )
        if option in typed
    }
    if temperature is not None:  # retries then sample at the same temperature
        knobs["temperature"] = temperature
    if max_iterations is not None:
        knobs["max_iterations"] = max_iterations
    if max_nodes is not None:
        knobs["max_nodes"] = max_nodes or None
    if ballot is not None:
        knobs["ballot"] = ballot
    if demos is not None:
        knobs["demos_file"] = demos
    user = nest(knobs)
    if policy is not None:
        user["policies"] = named_policies(policy)
    try:  # the policies fill what the user left unset
        user = resolve(user, local=local_endpoint(endpoint)).config.model_dump(exclude_unset=True)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    with_cross_check(user, cross_check)
    config = RunConfig.model_validate(
        {
            **user,
            "budget": Budget(
                max_llm_calls=call_limit,
                max_tokens=token_limit,
                max_cost=cost_limit,
                timeout_s=time_limit,
            ),
        }
    )
    pool = None  # read once, here; the run is shown this pool
    if demos is not None:
        if plan_file is not None:
            raise click.BadParameter(
                "a fixed plan (--plan-file) is not planned: no planner is shown demonstrations",
                param_hint="--demos",
            )
        try:
            pool = resolve(config, method=method, local=local_endpoint(endpoint)).demo_pool()
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--demos") from None
    if cross_check or ballot is not None:
        as_run = resolve(config, method=method).config
        if cross_check:
            warn_idle_cross_check(
                as_run, f"--method {method}" if method else f"--verification {verification}"
            )
        if ballot is not None:
            warn_idle_ballot(as_run)
    planner = None
    if plan_file is not None:
        try:
            planner = TemplatePlanner(
                json.loads(plan_file.read_text(encoding="utf-8"), strict=False)
            )
        except (PlanError, json.JSONDecodeError) as e:
            click.echo(for_console(f"error: {plan_file}: {e}"), err=True)
            sys.exit(EXIT_BAD_INPUT)
    trace_dir = trace_dir or Path(getenv("VERIMAP_TRACE_DIR", "runs/traces"))

    async def solve(events: verimap.EventBus) -> RunResult:
        sandbox = _sandbox(sandbox_kind)
        try:
            async with _connect(**endpoint) as models:
                _refuse_unpriced(models, cost_limit)
                runner = build(
                    models,
                    sandbox,
                    config=config,
                    planner=planner,
                    method=method,
                    samples=samples,
                    trace_dir=trace_dir,
                    events=events,
                    demos=pool,
                )
                return await runner.run(task)
        finally:
            await sandbox.aclose()

    async def go(spans: Any) -> RunResult:
        from verimap.observe.live_view import narrate

        events = verimap.EventBus()
        if spans is not None:
            events.subscribe(spans)
        # A live view of the plan on a terminal, a plain line log elsewhere.
        with narrate(events, quiet=quiet):
            return await solve(events)

    try:
        with otel_spans(otel) as spans:
            result = asyncio.run(go(spans))
    except (ModelError, SandboxUnavailable) as e:
        click.echo(for_console(f"infrastructure error: {e}"), err=True)
        sys.exit(EXIT_INFRA)
    if as_json:
        click.echo(result_json(result))
    else:
        print_result(result)
    if result.error_kind == "infrastructure":
        sys.exit(EXIT_INFRA)
    code = {"success": EXIT_OK, "partial": EXIT_OK, "budget_exhausted": EXIT_BUDGET}.get(
        result.status, EXIT_FAILED
    )
    sys.exit(code)
