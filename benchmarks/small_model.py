"""Does planning and verification make a small local model's answers better? Methods side by side.

    python3 benchmarks/small_model.py [--model qwen2.5-coder-1.5b] [--gsm8k 20] [--humaneval 20]
        [--offset 0] [--methods bare,react,verimap] [--pens/--no-pens] [--max-attempts 3] [--cross-check]
        [--fresh-code-retries] [--max-iterations 2] [--sandbox docker] [--runs-dir runs/bench-small-TIME] [--resume]
        [--out RUNS_DIR/report.md]

One question decides whether verimap is worth its cost on a small model: on the same tasks, with
the same model, is `verimap` more accurate than the model alone (`bare`) or a single agent with
tools (`react`), and at how many more calls, tokens and seconds? So every method runs in one
process against one local server (started once), at the local-model sampling rule of
`verimap eval`, one task at a time (the server answers one request at a time), on fixed windows
[offset, offset + N) of GSM8K and HumanEval. `--offset` exists so that tasks nobody tuned the
prompts on can be measured with the same script.

Every (benchmark, method) pair, `bare` included, goes through the eval runner, so each leaves its
usual run directory under --runs-dir (config.json, results.jsonl, errors.jsonl, one trace per
task) to be inspected afterwards, a task that raises is logged and skipped rather than ending the
benchmark, and `--resume` continues an interrupted --runs-dir. The tables are rebuilt from those
directories, so Ctrl-C (or SIGTERM) still prints and writes whatever finished.

`bare` is the model with no framework (`verimap.methods.baselines.Bare`): one chat call per task,
free-text reasoning ending in "The answer is N" for GSM8K, the complete function for HumanEval,
scored by the benchmark's own scorer (HumanEval's hidden tests run in the sandbox). `--pens` adds the README's `verimap run`
example (answer 391) for every non-bare method, built like `verimap run --method M` builds it.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    Cell,
    PensTask,
    Row,
    TaskWindow,
    commit,
    local_session,
    read_cell,
    run_then_report,
    say,
    seconds,
)
from _replay import replaying

from verimap.base.protocols import Model
from verimap.base.usage import EXECUTOR
from verimap.cli import local_endpoint, log_to_stderr, with_cross_check
from verimap.config import RunConfig, Sampling
from verimap.core.result import RunResult
from verimap.evals.attempt import Solver
from verimap.evals.runner import run_eval
from verimap.evals.tasksets import EvalTask, get_benchmark
from verimap.methods.answers import BARE_PROMPTS, Kind
from verimap.methods.baselines import Bare
from verimap.methods.presets import METHODS
from verimap.policies import SmallModel, get_policies
from verimap.sandbox import KINDS
from verimap.wiring import resolve, wrap_models

BARE = "bare"
# The eval task's GSM8K prompt ends with this sentence; `bare` asks its own way instead.
GSM8K_SUFFIX = "\n\nSolve this math word problem."
BARE_KINDS: dict[str, Kind] = {"gsm8k": "number", "humaneval": "code"}


# ---- the bare model -----------------------------------------------------------------------------


def bare_task(task: EvalTask) -> str:
    """What `bare` is given: the GSM8K question without the eval prompt's closing sentence, and
    HumanEval's own function stub. `Bare` adds its plain request (`BARE_PROMPTS`) to either."""
    if task.benchmark == "gsm8k":
        return task.prompt.split(GSM8K_SUFFIX)[0]
    if task.benchmark == "humaneval":
        return str(task.meta["prompt"])
    return task.prompt


def bare_solver(model: Model, settings: dict[str, Any]) -> Solver:
    """A runner solver for the model alone: verimap's `bare` baseline (one call, unverified, its
    exchange traced), so the runner records, scores and logs `bare` exactly as it does the
    framework methods. The model is called through the run's policies (the small-model reply
    cap), as `verimap eval -m bare` calls it."""
    config = RunConfig(
        sampling=Sampling(temperature=settings.get("sampling", {}).get("temperature"))
    )
    model = wrap_models({EXECUTOR: model}, tuple(get_policies(settings.get("policies"))))[EXECUTOR]

    async def solve(task: EvalTask, run: int, trace_path: Path) -> RunResult:
        kind = BARE_KINDS.get(task.benchmark, "text")
        bare = Bare(model, None, kind=kind, config=config)
        return await bare.run(bare_task(task), trace_path=trace_path)

    return solve


# ---- tables -------------------------------------------------------------------------------------


def has_verification(method: str) -> bool:
    """Whether `verified` means anything for the method (bare and react check nothing)."""
    return method in METHODS and resolve(method=method).config.verify.verification != "none"


def generation_rate(cells: list[Cell]) -> float | None:
    """Tokens per second the server generates, from `bare`'s single calls (their short prompts
    included, so the rate is a little low and the floor a little high)."""
    rows = [r for c in cells if c.method == BARE for r in c.rows]
    wall = sum(r.wall_s for r in rows)
    return sum(r.completion_tokens for r in rows) / wall if wall > 0 else None


def summary_line(cell: Cell, rate: float | None = None) -> str:
    """`rate`: generated tokens per second; the last column is wall time over the time the
    generated tokens alone take at that rate (1.0 is the floor)."""
    rows, n = cell.rows, len(cell.rows)
    errs = len(cell.errors)
    if not n:
        why = cell.note or ("no task finished" if not errs else f"{errs} task(s) raised")
        cols = [cell.bench, cell.method, f"– ({why})", "–", "–", "–", str(errs)] + ["–"] * 5
        return "| " + " | ".join(cols) + " |"
    mean = statistics.fmean
    verified = str(sum(r.verified for r in rows)) if has_verification(cell.method) else "–"
    total = sum(r.wall_s for r in rows)
    cols = [
        cell.bench,
        cell.method,
        f"**{sum(r.correct for r in rows)}/{n}**",
        verified,
        str(sum(r.no_plan for r in rows)),
        str(sum(r.fallbacks for r in rows)),
        str(errs),
        f"{mean(r.calls for r in rows):.1f}",
        f"{mean(r.prompt_tokens for r in rows):,.0f} "
        f"({mean(r.cached_tokens for r in rows):,.0f}) / "
        f"{mean(r.completion_tokens for r in rows):,.0f}",
        seconds(total / n),
        seconds(total),
    ]
    generated = sum(r.completion_tokens for r in rows)
    cols.append(f"{total / (generated / rate):.1f}×" if rate and generated else "–")
    return "| " + " | ".join(cols) + " |"


def task_cell(r: Row | None, errored: bool) -> str:
    if r is None:
        return "error" if errored else "–"
    flags = ", no plan" if r.no_plan else ", fallback" if r.fallbacks else ""
    return f"{'✓' if r.correct else '✗'} {r.wall_s:.0f} s, {r.calls}{flags}"


def render(cells: list[Cell], header: str) -> str:
    """The Markdown: the header, one summary line per cell, then one per-task table per benchmark
    (tasks in the order they were run, methods in the order given)."""
    rate = generation_rate(cells)
    lines = [
        header,
        "",
        "| set | method | correct | verified | no plan | fallback plans | errors | calls/task "
        "| prompt (from cache) / completion tokens per task | wall per task | wall total "
        "| wall / floor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [summary_line(c, rate) for c in cells]
    lines += [
        "",
        "*correct*: scored right out of the tasks that finished. *verified*: verification "
        "accepted the final answer. *no plan*: the run ended with no valid plan. *fallback "
        "plans*: one-node plans run because the planner wrote no valid one (`plan_fallback` "
        "events). *errors*: tasks that raised (see `errors.jsonl`); not counted. *from cache*: "
        "prompt tokens the server's KV cache served (`usage.prompt_tokens_details`). *wall / "
        "floor*: wall time over the time the generated tokens alone take at the generation "
        + (f"rate measured on `bare` ({rate:.1f} tokens/s)." if rate else "rate (needs `bare`)."),
    ]
    for bench in dict.fromkeys(c.bench for c in cells):
        mine = [c for c in cells if c.bench == bench]
        ids = list(dict.fromkeys(t for c in mine for t in [r.task_id for r in c.rows] + c.errors))
        if not ids:
            continue
        lines += [
            "",
            f"### {bench}, per task (✓ correct / ✗ wrong, wall s, model calls)",
            "",
            "| task | " + " | ".join(c.method for c in mine) + " |",
            "|---|" + "---|" * len(mine),
        ]
        for tid in ids:
            cells_ = []
            for c in mine:
                row = next((r for r in c.rows if r.task_id == tid), None)
                cells_.append(task_cell(row, tid in c.errors))
            lines.append(f"| {tid} | " + " | ".join(cells_) + " |")
    return "\n".join(lines) + "\n"


def make_header(
    args: argparse.Namespace, config: dict[str, Any], runs_dir: Path, argv: list[str]
) -> str:
    given = config.get("sampling", {})
    temp = given.get("temperature")
    sampling = (
        f"temperature {temp} for plans, first attempts, judge and `bare`; retries at "
        f"{given.get('retry_temperature')} (the local-model rule of `verimap eval`)"
        if temp is not None
        else "the endpoint's default sampling"
    )
    window = f"[{args.offset}, {args.offset} + N)"
    fresh = config.get("execution", {}).get("fresh_code_retries")
    return (
        f"## Small-model benchmark: {args.model}\n\n"
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}\n"
        f"- model: {args.model}; commit: {commit()}\n"
        f"- command: `{' '.join(shlex.quote(a) for a in argv)}`\n"
        f"- tasks: GSM8K test and HumanEval items {window}, N = {args.gsm8k} and "
        f"{args.humaneval}; one task at a time on one local server; sandbox: {args.sandbox}\n"
        f"- sampling: {sampling}\n"
        f"- verimap: {args.max_retries} retries x {args.max_iterations} iterations, plans of at "
        f"most {config.get('planning', {}).get('max_nodes') or 'any number of'} nodes, "
        f"agreement {args.agreement}, cross-check {cross_check(config)}, code retries "
        f"{'alternate repair and fresh' if fresh else 'repair'} "
        f"(react is one pass by definition)\n"
        f"- run directories (results.jsonl, traces): `{runs_dir}`"
    )


def cross_check(config: dict[str, Any]) -> str:
    from verimap.base.check_names import AGREEMENT_CHECKS

    on = [c for c in config.get("verify", {}).get("checks", []) if c in AGREEMENT_CHECKS]
    return ", ".join(on) if on else "off"


# ---- the run ------------------------------------------------------------------------------------


@dataclass
class Job:
    bench: str
    method: str
    out: Path
    tasks: Any  # a Benchmark (or window) the runner takes


def plan_jobs(args: argparse.Namespace, methods: list[str], runs_dir: Path) -> list[Job]:
    """Every (benchmark, method) to run, in order: each benchmark with every method, then pens."""
    jobs = []
    for name, n in (("gsm8k", args.gsm8k), ("humaneval", args.humaneval)):
        if n > 0:
            window = TaskWindow(get_benchmark(name, args.data_dir), args.offset, n)
            jobs += [Job(name, m, runs_dir / f"{name}-{m}", window) for m in methods]
    if args.pens:
        pens = PensTask()
        jobs += [Job("pens", m, runs_dir / f"pens-{m}", pens) for m in methods if m != BARE]
    return jobs


async def run_jobs(
    args: argparse.Namespace,
    jobs: list[Job],
    config: dict[str, Any],
    notes: dict[tuple[str, str], str],
) -> None:
    """Run every job against one server and one sandbox. A job that cannot run at all (its
    directory holds another run, say) is noted and the next one starts."""
    async with local_session(args.model, args.sandbox) as (models, sandbox):
        for job in jobs:
            t0 = time.monotonic()
            custom = job.method == BARE
            solver = bare_solver(models[EXECUTOR], config) if custom else None
            first = getattr(job.tasks, "offset", 0)
            extra: dict[str, Any] = {"task_window": [first, first + len(job.tasks.tasks())]}
            if custom:
                extra["bare_prompts"] = BARE_PROMPTS
            try:
                outcome = await run_eval(
                    job.tasks,
                    job.method,
                    models,
                    sandbox,
                    job.out,
                    max_concurrency=1,
                    resume=args.resume,
                    config=config,
                    progress=True,
                    solver=solver,
                    extra_config=extra,
                )
            except Exception as e:
                notes[(job.bench, job.method)] = f"{type(e).__name__}: {e}"
                say(f"{job.bench} {job.method}: could not run: {e}")
                continue
            t = outcome.tally
            say(
                f"{job.bench} {job.method}: {t.correct}/{t.done} correct, {t.errors} error(s), "
                f"{time.monotonic() - t0:.0f} s"
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log_to_stderr()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m != BARE and m not in METHODS]
    if unknown:
        sys.exit(f"unknown method(s) {', '.join(unknown)}; choose from bare, {', '.join(METHODS)}")
    runs_dir = Path(args.runs_dir or f"runs/bench-small-{time.strftime('%Y%m%d-%H%M%S')}")
    if args.out is None:
        args.out = str(runs_dir / "report.md")
    config: dict[str, Any] = resolve(
        {
            "loop": {"max_retries": args.max_retries, "max_iterations": args.max_iterations},
            "verify": {"agreement": args.agreement},
        },
        local=local_endpoint({"model": args.model}),
    ).config.model_dump(exclude_unset=True)
    with_cross_check(config, args.cross_check)
    if args.fresh_code_retries is not None:
        config.setdefault("execution", {})["fresh_code_retries"] = args.fresh_code_retries
    if args.max_nodes is not None:
        config.setdefault("planning", {})["max_nodes"] = args.max_nodes or None
    command = sys.argv if argv is None else ["benchmarks/small_model.py", *argv]
    header = make_header(args, config, runs_dir, ["python3", *command])
    jobs = plan_jobs(args, methods, runs_dir)
    notes: dict[tuple[str, str], str] = {}
    t0 = time.monotonic()

    def report(interrupted: bool) -> str:
        cells = []
        for job in jobs:
            order = [t.id for t in job.tasks.tasks()]
            cell = read_cell(job.bench, job.method, job.out, order)
            cell.note = notes.get((job.bench, job.method), "")
            cells.append(cell)
        wall = f"\n- benchmark wall time: {seconds(time.monotonic() - t0)}"
        if interrupted:
            wall += " (interrupted: unfinished tasks are missing)"
        return render(cells, header + wall)

    hint = f"the same command plus --runs-dir {runs_dir} --resume"
    with replaying(Path(args.replay)) if args.replay else contextlib.nullcontext() as replay:
        code = run_then_report(run_jobs(args, jobs, config, notes), report, args.out, hint)
    if replay is not None:
        say(replay.summary())
    return code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", default="qwen2.5-coder-1.5b", help="local catalog model")
    p.add_argument("--gsm8k", type=int, default=20, help="GSM8K tasks (0: none)")
    p.add_argument("--humaneval", type=int, default=20, help="HumanEval tasks (0: none)")
    p.add_argument("--offset", type=int, default=0, help="first task of each set")
    p.add_argument(
        "--methods",
        default="bare,react,verimap",
        help=f"comma-separated: bare, {', '.join(METHODS)}",
    )
    p.add_argument(
        "--pens",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the README's pens task (non-bare methods)",
    )
    p.add_argument(
        "--max-attempts",
        "--max-retries",
        dest="max_retries",
        type=int,
        default=3,
        help="verimap's attempts per node (--max-retries: the old name)",
    )
    p.add_argument(
        "--max-iterations",
        type=int,
        default=SmallModel().max_iterations,
        help="verimap's plans per task (the local-model default; the paper's is 5)",
    )
    p.add_argument(
        "--max-nodes",
        type=int,
        default=None,
        help="the most nodes a plan may have (0: no cap) [the local-model default]",
    )
    p.add_argument(
        "--agreement",
        type=int,
        default=RunConfig().verify.agreement,
        help="VF-passing samples that must agree on a numeric final answer (1: the first)",
    )
    p.add_argument(
        "--cross-check",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a final numeric answer must agree with a program's solution of the whole task "
        "[the local-model default: on]",
    )
    p.add_argument(
        "--fresh-code-retries",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="every second retry of a code node starts afresh, without the failed code "
        "[the local-model default: on]",
    )
    p.add_argument("--sandbox", default="docker", choices=KINDS)
    p.add_argument("--data-dir", default=None, help="benchmark data [as verimap eval]")
    p.add_argument("--runs-dir", default=None, help="[runs/bench-small-TIME]")
    p.add_argument("--resume", action="store_true", help="continue --runs-dir: skip finished tasks")
    p.add_argument(
        "--replay",
        default=None,
        metavar="DIR",
        help="record the server's replies in DIR, and replay them to identical requests "
        "(to show that other code sends the same requests: benchmarks/_replay.py); a packed "
        "recording (FILE.jsonl.gz) is replayed, not added to",
    )
    p.add_argument(
        "--out", default=None, help="Markdown table ('' for none) [report.md in --runs-dir]"
    )
    args = p.parse_args(argv)
    counts = (args.gsm8k, args.humaneval, args.offset, args.max_nodes or 0)
    if min(counts) < 0 or min(args.max_retries, args.max_iterations, args.agreement) < 1:
        p.error(
            "counts, --offset and --max-nodes must be >= 0; retries, iterations and agreement >= 1"
        )
    return args


if __name__ == "__main__":
    sys.exit(main())
