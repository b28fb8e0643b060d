"""`verimap eval`: run a benchmark with a method, report results, measure retrieval.

verimap eval --benchmark humaneval --method verimap --limit 3
verimap eval --benchmark mbpp --split full:validation --method bare
verimap eval --benchmark gsm8k --method map --sample paper --seed 0 --epochs 3
verimap eval --config eval/gsm8k/verimap.yaml --resume
verimap eval report runs/gsm8k-verimap runs/gsm8k-react
verimap eval export --format inspect runs/gsm8k-verimap -o logs
verimap eval retrieval
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

import click

from verimap.base.out_files import OutFileError, check_replace, write_file
from verimap.base.redaction import printable
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
from verimap.cli.cluster import ray_options, refuse_idle_ray_env, run_on_ray
from verimap.cli.eval_benchmark import (
    BENCHMARK_HELP,
    BENCHMARK_METAVAR,
    LIMIT_HELP,
    LimitRange,
    benchmark_options,
    factory_benchmark,
    open_benchmark,
)
from verimap.cli.eval_compare import RESULTS_PATH
from verimap.cli.eval_config import SampleSize, limit_or_sample, load_config_file, load_factory
from verimap.cli.model_calls import CALL_KEYS, model_call_options
from verimap.cli.tracing import otel_option, otel_spans
from verimap.cli.vocabulary import (
    CROSS_CHECK_HELP,
    ballot_option,
    max_attempts_option,
    max_parallel_nodes_option,
    max_tasks_option,
    out_file_option,
    quiet_option,
    typed_here,
)
from verimap.config import EVAL_TASK_TIME_LIMIT, given, merge, nest
from verimap.methods.presets import METHODS

ENDPOINT_KEYS = (
    "model",
    "planner_model",
    "executor_model",
    "judge_model",
    "base_url",
    "keep_server",
    "model_file",
    *CALL_KEYS,
)
# Flags that set a `RunConfig` knob: the flag's parameter -> the knob.
RUN_CONFIG_FLAGS = {
    "max_attempts": "max_retries",
    "max_parallel_nodes": "max_parallel",
    "max_iterations": "max_iterations",
    "max_nodes": "max_nodes",
    "temperature": "temperature",
    "top_p": "top_p",
    "ballot": "ballot",
    "demos": "demos_file",
}


@click.group("eval", invoke_without_command=True)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="YAML/TOML/JSON config (flags override it).",
)
@click.option("--benchmark", "-b", metavar=BENCHMARK_METAVAR, help=BENCHMARK_HELP)
@click.option(
    "--method",
    "-m",
    type=click.Choice(list(METHODS)),
    default="verimap",
    show_default=True,
    help="Method: a preset of planner, verification, retries and iterations, or a baseline "
    "(bare, sc, program, rag) (docs/eval.md).",
)
@samples_option
@click.option("--limit", "-n", type=LimitRange(), default=None, help=LIMIT_HELP)
@benchmark_options
@click.option(
    "--sample",
    type=SampleSize(),
    default=None,
    help="A seeded random sample of N tasks; 'paper': 500, or half the set when it has fewer.",
)
@click.option(
    "--seed", type=int, default=None, help="Seed of --sample [0]; a resume must use the same."
)
@click.option(
    "--epochs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Solve each task N times (accuracy mean ± std over epochs).",
)
@max_tasks_option(
    "Tasks in flight at once, each with its own plan [4; 1 on the local model].",
    default=None,
)
@click.option(
    "--out",
    "-o",
    type=click.Path(file_okay=False),
    default=None,
    help="Output dir [runs/BENCHMARK-METHOD].",
)
@click.option("--resume", is_flag=True, help="Continue DIR: skip finished tasks.")
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0),
    default=EVAL_TASK_TIME_LIMIT,
    show_default=True,
    help="Wall-clock seconds each task may take: a task past it ends as a failure "
    "(budget_exhausted) that says why, and the others run on. 0: no limit.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Data directory [$VERIMAP_DATA, ../shared/datasets, datasets/full, datasets/].",
)
@sandbox_option()
@click.option("--temperature", type=float, default=None, help="Sampling temperature [paper: 1.0].")
@click.option("--top-p", type=float, default=None, help="Nucleus sampling [paper: 1.0].")
@max_attempts_option(default=None)
@max_parallel_nodes_option(default=None)
@click.option(
    "--max-iterations",
    type=click.IntRange(min=1),
    default=None,
    help="Override the method's iterations.",
)
@max_nodes_option
@demos_option
@policy_option
@click.option(
    "--cross-check/--no-cross-check",
    default=None,
    help=CROSS_CHECK_HELP,
)
@ballot_option()
@quiet_option("No progress bar and no live view of the tasks in flight.")
@click.option(
    "--models-factory", default=None, hidden=True, help="MODULE:FUNCTION returning models (tests)."
)
@otel_option
@ray_options
@endpoint_options
@model_call_options
@click.pass_context
def eval_(ctx: click.Context, **kw: Any) -> None:
    """Run BENCHMARK with METHOD and print the result tables (or use a subcommand)."""
    if ctx.invoked_subcommand is not None:
        return
    from_config: set[str] = set()
    if kw.get("config_file"):
        params = {p.name: p for p in ctx.command.params if p.name}
        cfg = load_config_file(kw["config_file"], known=list(params))
        for key, value in list(cfg.items()):
            if key == "run_config":
                continue
            # The file is part of the command line: flags override it, and it overrides the
            # environment, [tool.verimap] and the built-in defaults.
            if ctx.get_parameter_source(key) is not click.core.ParameterSource.COMMANDLINE:
                param = params[key]
                try:
                    kw[key] = None if value is None else param.type_cast_value(ctx, value)
                except click.BadParameter as e:
                    raise click.BadParameter(
                        f"{key} in {kw['config_file']}: {e.message}", param_hint="--config"
                    ) from None
                from_config.add(key)
        kw["run_config"] = cfg["run_config"]
        kw["from_config"] = from_config
    typed = ctx.get_parameter_source("benchmark") is click.core.ParameterSource.COMMANDLINE
    kw["benchmark_runs_code"] = typed and "benchmark" not in from_config
    limit_or_sample(kw, from_config)
    if not kw.get("benchmark"):
        raise click.UsageError(
            "choose a benchmark: --benchmark gsm8k|humaneval|multihoprag|mbpp|FILE (or --config "
            "FILE)"
        )
    if kw.get("method") not in METHODS:
        raise click.UsageError(
            f"unknown method {kw.get('method')!r}; choose one of {', '.join(METHODS)}"
        )
    code = run_command(**kw)
    ctx.exit(code)


def _drop_config_models_without_endpoint(endpoint: dict[str, Any], from_config: set[str]) -> None:
    """A config file names the paper's remote models; with no endpoint configured they cannot be
    served, so the local model takes every role instead of the run failing."""
    role_keys = [
        k for k in ("planner_model", "executor_model", "judge_model", "model") if k in from_config
    ]
    if not role_keys or "base_url" in endpoint or "model_file" in endpoint:
        return
    try:
        from verimap.local.endpoint import is_remote
    except ImportError:
        return
    if is_remote(None, None):  # OPENAI_BASE_URL or OPENAI_API_KEY: the names are served there
        return
    if "model" in role_keys and "model" in endpoint and not is_remote(endpoint["model"], None):
        role_keys.remove("model")  # a local catalog name: servable without an endpoint
    dropped = {k: endpoint.pop(k) for k in role_keys if k in endpoint}
    if dropped:
        names = ", ".join(f"{k.removesuffix('_model')}={v}" for k, v in dropped.items())
        click.echo(
            f"note: no model endpoint configured (OPENAI_BASE_URL/OPENAI_API_KEY or --base-url); "
            f"ignoring the config's models ({names}) and using the local model for every role",
            err=True,
        )


def _apply_policies(
    method: str,
    endpoint: dict[str, Any],
    run_config: dict[str, Any],
    policy: str | None,
    cross_check: bool | None,
) -> list[str]:
    """Fill `run_config` with what its policies (`--policy`, the config file's, else the
    endpoint's) set where the user left it unset, say so on stderr, and return their names."""
    from verimap.wiring import resolve

    if policy is not None:
        run_config["policies"] = named_policies(policy)
    try:
        settings = resolve(run_config, local=local_endpoint(endpoint))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    run_config.update(given(settings.config))
    with_cross_check(run_config, cross_check)
    for p in settings.policies:
        click.echo(f"note: the {p.name} policy applies: {p.summary} (--policy none: off)", err=True)
    return [p.name for p in settings.policies]


def run_command(**kw: Any) -> int:
    """The body of `verimap eval` without click, so it can be driven from Python."""
    from verimap.base.events import EventBus
    from verimap.base.model import ModelError
    from verimap.base.redaction import printable
    from verimap.base.sandbox import SandboxUnavailable
    from verimap.evals.cluster import ClusterError, ray_address
    from verimap.evals.data import DataError
    from verimap.evals.report import report_dirs
    from verimap.evals.retrieval import RetrievalUnavailable
    from verimap.evals.runner import RunDirError, preflight, run_eval
    from verimap.local.server import ServerError
    from verimap.local.weights import WeightsError
    from verimap.sandbox import get_sandbox
    from verimap.wiring import resolve

    bench = open_benchmark(kw)  # built-in, file, datasets directory or FILE.py@FUNCTION
    bench_name, method = bench.name, kw["method"]
    if method == "rag" and bench.domain != "qa":
        raise click.UsageError(
            f"rag answers questions over a corpus; {bench_name} is a {bench.domain} benchmark "
            "(use it with -b multihoprag)"
        )
    out = Path(kw.get("out") or Path("runs") / f"{bench_name}-{method}")
    try:
        run_config = given(kw.get("run_config"))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--config") from None
    flags = {knob: kw[flag] for flag, knob in RUN_CONFIG_FLAGS.items() if kw.get(flag) is not None}
    run_config = merge(run_config, nest(flags))
    if run_config.get("planning", {}).get("max_nodes") == 0:
        run_config["planning"]["max_nodes"] = None
    if bench.source.is_sample:
        click.echo(
            f"note: using the committed {bench_name} sample in {bench.source.root}", err=True
        )
    refuse_idle_ray_env(kw.get("ray_env"), ray_address(kw.get("ray")))
    endpoint: dict[str, Any] = {k: kw.get(k) for k in ENDPOINT_KEYS if kw.get(k) is not None}
    _drop_config_models_without_endpoint(endpoint, kw.get("from_config") or set())
    fixed = [
        f"loop.{k}"
        for k in ("max_retries", "max_iterations")
        if k in run_config.get("loop", {}) and k in METHODS[method].fixed.get("loop", {})
    ]
    if fixed:
        click.echo(
            f"note: {method} is one pass by definition; ignoring {', '.join(fixed)}", err=True
        )
    concurrency = kw.get("max_tasks")
    if not kw.get("models_factory"):
        _apply_policies(method, endpoint, run_config, kw.get("policy"), kw.get("cross_check"))
        if local_endpoint(endpoint) and concurrency is None:
            # The llama.cpp server answers one request at a time and keeps only the last
            # prompt's cache; interleaved tasks evict each other's prefixes and all run slower.
            concurrency = 1
            click.echo("note: local model: one task at a time (--max-tasks overrides)", err=True)
    else:
        with_cross_check(run_config, kw.get("cross_check"))
    if kw.get("cross_check") or kw.get("ballot"):
        with contextlib.suppress(ValueError):  # a bad config is reported when the run starts
            as_run = resolve(run_config, method=method).config
            if kw.get("cross_check"):
                warn_idle_cross_check(as_run, f"method {method}")
            if kw.get("ballot"):
                warn_idle_ballot(as_run)

    async def main(spans: Any) -> Any:
        # SIGTERM stops a run the way Ctrl-C does: finished tasks are already on disk.
        loop = asyncio.get_running_loop()
        me = asyncio.current_task()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGTERM, lambda: me and me.cancel())
        events = None
        if spans is not None:
            events = EventBus()
            events.subscribe(spans)
        common: dict[str, Any] = dict(
            runs=kw.get("epochs") or 1,
            limit=kw.get("limit"),
            sample=kw.get("sample"),
            seed=kw.get("seed"),
            sample_ids=kw.get("sample_ids"),
            max_concurrency=concurrency or 4,
            resume=bool(kw.get("resume")),
            config=run_config,
            progress=not kw.get("quiet"),
            events=events,
            samples=kw.get("samples"),
            task_time_limit=kw.get("time_limit", EVAL_TASK_TIME_LIMIT) or None,
        )
        # A refused --out costs no model start; the demonstrations file is read here only.
        common["demos"] = preflight(bench, method, out, **common)
        if ray_address(kw.get("ray")):
            return await run_on_ray(kw, bench, out, endpoint, common)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sandbox = get_sandbox(kw.get("sandbox_kind") or "auto", shared=False)  # closed here
        async with sandbox:
            if kw.get("models_factory"):
                factory = load_factory(kw["models_factory"])
                models = factory(factory_benchmark(bench), kw.get("data_dir"))
                return await run_eval(bench, method, models, sandbox, out, **common)
            from verimap.local.endpoint import connect

            async with connect(**endpoint) as models:
                return await run_eval(bench, method, models, sandbox, out, **common)

    try:
        eval_span = {
            "verimap.benchmark": bench_name,
            "verimap.method": method,
            "verimap.out": str(out),
        }
        with otel_spans(bool(kw.get("otel")), "verimap eval", eval_span) as spans:
            outcome = asyncio.run(main(spans))
    except (KeyboardInterrupt, asyncio.CancelledError):
        click.echo(
            f"\ninterrupted: every finished task is saved in {out / 'results.jsonl'}; "
            f"continue with the same command plus --resume",
            err=True,
        )
        return 130
    except (
        RunDirError,
        SandboxUnavailable,
        DataError,
        RetrievalUnavailable,
        ValueError,
        ClusterError,
    ) as e:
        raise click.ClickException(str(e)) from None
    except (ModelError, ServerError, WeightsError) as e:  # no model to serve: nothing ran
        raise click.ClickException(str(e)) from None
    t = outcome.tally
    click.echo(
        f"{bench_name}/{method}: {t.done}/{t.total} tasks finished "
        f"({t.skipped} from before), {t.errors} errored, not scored; results in {out}",
        err=True,
    )
    if t.errors:
        click.echo(
            f"why each task errored is in {out / 'errors.jsonl'}; rerun with --resume to retry "
            "them",
            err=True,
        )
    click.echo(printable(report_dirs([out])))
    return 1 if t.errors else 0


@eval_.command("report")
@click.argument("dirs", nargs=-1, required=True, type=RESULTS_PATH)
@out_file_option(
    "Also write the markdown to FILE (an existing file only if verimap wrote it, or FILE is "
    "given here).",
    default=None,
)
def report(dirs: tuple[str, ...], out_file: Path | None) -> None:
    """Print the tables for one or more eval output DIRS or compact results files: first
    accuracy and verification per method (95% CIs, verified precision, coverage, false
    positives and negatives, the risk–coverage points), then the paper-style tables."""
    from verimap.evals.report import REPORT_FILE, REPORT_MARK, report_dirs
    from verimap.evals.runner import RunDirError

    named = typed_here("out_file")
    try:
        if out_file:
            check_replace(out_file, REPORT_FILE, named=named)
        text = report_dirs(dirs)
        if out_file:
            write_file(out_file, f"{REPORT_MARK}\n{text}", REPORT_FILE, named=named)
    except (RunDirError, OutFileError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(printable(text))


INSPECT_MISSING = (
    "--format inspect needs Inspect AI, which is not installed: pip install 'verimap[inspect]'"
)


@eval_.command("export")
@click.argument(
    "dirs",
    metavar="DIR...",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["inspect"]),
    required=True,
    help="inspect: Inspect AI eval logs (.eval), which `inspect view` opens.",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Log directory to write into [$INSPECT_LOG_DIR, else ./logs, where `inspect view` looks].",
)
def export(dirs: tuple[Path, ...], fmt: str, out: Path | None) -> None:
    """Write one log per eval run DIR (benchmark x method) for another tool to browse.

    A DIR holding run directories (runs/bench-1) stands for all of them. Each task and run is
    a sample scored C or I; tasks in errors.jsonl that no run scored are errored samples."""
    import importlib.util

    from verimap.base.env import getenv

    if importlib.util.find_spec("inspect_ai") is None:
        raise click.ClickException(INSPECT_MISSING)
    from verimap.base.out_files import OutFileError
    from verimap.base.redaction import printable, visible
    from verimap.evals.inspect_export import ExportError, export_dirs

    target = out or Path(getenv("INSPECT_LOG_DIR") or "logs")
    try:
        written = export_dirs(dirs, target)
    except ExportError as e:
        raise click.BadParameter(str(e), param_hint="DIR") from None
    except OutFileError as e:
        raise click.ClickException(str(e)) from None
    for w in written:
        for line in w.problems:
            click.echo(f"skipped: {printable(line)}", err=True)
        acc = "no task scored" if w.accuracy is None else f"accuracy {w.accuracy:.1%}"
        click.echo(
            f"{w.path}: {visible(w.benchmark)}/{visible(w.method)}, {w.scored} scored "
            f"({acc}), {w.errored} errored, not scored"
        )
    click.echo(f"open with: inspect view --log-dir {target}", err=True)


# Subcommands in their own modules.
from verimap.cli.eval_compact import compact  # noqa: E402
from verimap.cli.eval_compare import compare  # noqa: E402
from verimap.cli.eval_retrieval import retrieval  # noqa: E402

eval_.add_command(compact)
eval_.add_command(compare)
eval_.add_command(retrieval)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(eval_())
