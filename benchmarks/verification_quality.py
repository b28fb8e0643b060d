"""Does "verified" mean correct, and does verimap beat the same compute spent another way?

    python3 benchmarks/verification_quality.py --seed S [--gsm8k 30] [--mbpp 30]
        [--multihoprag 0] [--humaneval 0] [--methods bare,sc,program,rag,react,verimap]
        [--samples K] [--ballot B] [--pens]
        [--model qwen2.5-coder-1.5b] [--runs-dir DIR] [--resume | --report-only]
        [--out RUNS_DIR/report.md] [--sandbox docker] [--data-dir DIR]

Issue 40's goals are measured here: verified precision and coverage, verimap's accuracy against
the baselines that spend the same compute (`bare`, `sc` at k samples, `program`) and against
`react`, its time per task relative to react, and the README's pens task.

Each self-consistency cell is matched to one verimap method (`MATCHED`): `sc` to `verimap`,
`sc-planned` to `verimap-planned` (verimap with the model writing the plan), so each verimap
method meets an `sc` at its own compute. A cell's k is fixed when an invocation starts: the k
its directories were started with (a resumed draw keeps it), else its verimap method's mean
calls per task on the tasks of this draw finished so far, rounded up, else the default (4). The
calls of the verimap method made during the same invocation do not change it, and the first
task an sc cell runs pins its k; so a matched k needs its verimap method run on the draw first
(`--methods verimap-planned`), and the sc cell added with --resume. `--samples K` sets the k of
every sc cell instead.

Pick the seed before looking at any task, and report it:

    python3 -c 'import secrets; print(secrets.randbelow(10**6))'

The tasks are drawn by that seed from the full GSM8K test set, for code from MBPP's default
split (the sanitized test tasks), and for questions over a corpus from the official MultiHopRAG
queries, stratified by question type (equal numbers of each, in turns, so a run stopped anywhere
holds about as many of each) and without the planner's demonstration and development queries,
leaving out every window measured while the prompts and checks
were developed (`DEV_WINDOWS`) and every task an earlier draw ran (`SEEN_DRAWS`), so no number
here comes from tasks anybody tuned on or looked at. A pool with fewer unseen tasks than asked is
refused, with how many are left. HumanEval has none left: every item was seen while the prompts
and checks were developed, so it is drawn only to continue a seen draw, and its tables are
marked as development data. The drawn ids are printed in the header and written to every run
directory's config.json.

Every method runs on the same tasks of a benchmark it applies to (`program` to math, `rag` to
questions over a corpus), one task at a time, against one local server and one
sandbox started once, under the policy `verimap eval` applies (the small-model one). Methods
are interleaved: every method runs on a task before the next task starts, and the order of the
methods rotates from task to task, so neither slow drift of the machine nor the server's prompt
cache favours one of them. Each (benchmark, method) has its own run directory under --runs-dir
(results.jsonl, errors.jsonl, one trace per task), so the run can be stopped (Ctrl-C, SIGTERM)
and continued in parts with --resume; the tables are rebuilt from those directories every time,
stopped or not. A part resumed on another host runs at another speed: its time is divided by
react's only when their generation rates are within 2x (D30). Every statistic comes from
`verimap.evals.stats`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import shlex
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from _common import (
    Cell,
    PensTask,
    TaskSubset,
    commit,
    local_session,
    read_cell,
    row_from_record,
    run_then_report,
    say,
    seconds,
)
from _quality_tables import DEVELOPMENT_DATA, REACT, TITLES, VERIMAP, render, task_cell

from verimap.base.check_names import BALLOTS, DEFAULT_BALLOT
from verimap.cli import local_endpoint, log_to_stderr
from verimap.evals.data import DataError
from verimap.evals.run_dir import (
    CONFIG,
    RESULTS,
    ResultsLog,
    RunDirError,
    check_run_dir,
    migrated,
    recorded_settings,
)
from verimap.evals.runner import EvalOutcome, run_eval, task_key
from verimap.evals.sampling import ranked_tasks
from verimap.evals.tasksets import Benchmark, EvalTask, get_benchmark
from verimap.methods.presets import METHODS
from verimap.policies import get_policies
from verimap.policies.small_model import NAME as SMALL_MODEL
from verimap.policies.small_model import PLANNER_NAME
from verimap.sandbox import KINDS
from verimap.wiring import default_policies

# The windows every earlier run measured (GSM8K 0-199, HumanEval 0-19 and 110-139): prompts and
# checks were tuned on them, so they are never drawn. MBPP's first 10 are its smoke-check window
# (`verimap eval -b mbpp --limit N` runs the first tasks of the split).
DEV_WINDOWS: dict[str, tuple[range, ...]] = {
    "gsm8k": (range(0, 200),),
    "humaneval": (range(0, 20), range(110, 140)),
    "mbpp": (range(0, 10),),
    "multihoprag": (range(0, 5),),
}
# What each benchmark option draws from, in run order.
DRAWN = ("gsm8k", "mbpp", "multihoprag", "humaneval")
# Tasks run and looked at by a draw made outside this script: MultiHopRAG's pilot (seed 281527,
# eval/draws/README.md).
SEEN_IDS: dict[str, tuple[int, ...]] = {
    "multihoprag": (2191, 1187, 224, 2126, 1731, 1480, 1618, 1739),
}
# The methods that apply only to some domains; the others apply to every benchmark.
DOMAIN_METHODS = {"program": "math", "rag": "qa"}
# Earlier draws (seed, {benchmark: tasks run}), measured and looked at: their tasks are seen
# now, so a new draw leaves them out as it leaves out the development windows. Only the tasks
# that ran are seen: 896396's HumanEval run was stopped after the first 7 of its draw.
SEEN_DRAWS: tuple[tuple[int, dict[str, int]], ...] = (
    (687382, {"gsm8k": 30, "humaneval": 30}),
    (208682, {"gsm8k": 30, "humaneval": 30}),
    (896396, {"gsm8k": 30, "humaneval": 7}),
    (704573, {"humaneval": 30}),
    (253156, {"gsm8k": 30, "humaneval": 17}),
    (730156, {"gsm8k": 30}),
    (677038, {"gsm8k": 30}),
    (999033, {"gsm8k": 30}),
    (347752, {"gsm8k": 30}),
    (84437, {"gsm8k": 30}),
    (318662, {"gsm8k": 30}),
    (555653, {"gsm8k": 30}),
    (872998, {"gsm8k": 30}),
    (843887, {"gsm8k": 30}),
    (6441, {"gsm8k": 30}),
    (854403, {"mbpp": 30, "multihoprag": 30}),
    (127199, {"multihoprag": 1}),
    (829382, {"multihoprag": 8}),
    (696228, {"gsm8k": 30, "mbpp": 30}),
)
SEED_HINT = "python3 -c 'import secrets; print(secrets.randbelow(10**6))'"
SC = "sc"
# Methods run as another method under other policies: verimap with the model writing the plan.
PLANNED = "verimap-planned"
VARIANTS: dict[str, tuple[str, list[str]]] = {PLANNED: (VERIMAP, [PLANNER_NAME])}
# The self-consistency cells, each run as sc with k matched to one verimap method's calls.
SC_PLANNED = "sc-planned"
MATCHED: dict[str, str] = {SC: VERIMAP, SC_PLANNED: PLANNED}
KNOWN = list(dict.fromkeys([*METHODS, *VARIANTS, *MATCHED]))
DEFAULT_METHODS = "bare,sc,program,rag,react,verimap"
DEFAULT_SAMPLES = 4
PENS_METHODS = (REACT, VERIMAP)
PENS_ROUNDS = 3


# ---- the draw -----------------------------------------------------------------------------------


def seen_before(seed: int | None) -> list[tuple[int, dict[str, int]]]:
    """The seen draws a draw by `seed` leaves out: all of them, or for a seen seed those made
    before its own."""
    return list(itertools.takewhile(lambda d: d[0] != seed, SEEN_DRAWS))


# How a draw orders the items it may take, for a seed: a seeded shuffle, or by type in turns.
Order = Callable[[list[int], int], list[int]]


def shuffled(pool: list[int], seed: int) -> list[int]:
    return random.Random(seed).sample(pool, len(pool))


def excluded(
    bench: str,
    size: int,
    seed: int | None = None,
    order: Order = shuffled,
    held: frozenset[int] = frozenset(),
) -> set[int]:
    """The development windows, the `held` items and the items the seen draws took, each drawn
    as it was (in its `order`): from what the windows and the draws before it left. A seen
    seed's own draw and those after it are not excluded from its draw, so its run can still be
    continued."""
    out = {i for window in DEV_WINDOWS.get(bench, ()) for i in window} | held
    out |= set(SEEN_IDS.get(bench, ()))
    for earlier, counts in seen_before(seed):
        pool = [i for i in range(size) if i not in out]
        out |= set(order(pool, earlier)[: counts.get(bench, 0)])
    return out


def draw(bench: str, size: int, n: int, seed: int) -> list[int]:
    """Indices of `n` of the `size` items of `bench`, drawn by `seed` from those outside the
    development windows and the seen draws. The whole pool is permuted and its first `n` taken,
    so a larger `n` with the same seed extends the same draw (a run continued with more tasks
    keeps its own)."""
    out = excluded(bench, size, seed)
    pool = [i for i in range(size) if i not in out]
    if not 0 <= n <= len(pool):
        where = "; draw code tasks from MBPP (--mbpp N)" if bench in DEVELOPMENT_DATA else ""
        raise ValueError(
            f"{bench}: cannot draw {n} of the {len(pool)} items not yet seen: {len(pool)} of its "
            f"{size} are left outside the development windows and seen draws{where}"
        )
    return shuffled(pool, seed)[:n]


def seen_text(draws: list[tuple[int, dict[str, int]]]) -> str:
    """The seen draws as a header names them: "208682: GSM8K 30, HumanEval 30"."""
    return (
        "; ".join(
            f"{seed}: " + ", ".join(f"{TITLES.get(b, b)} {n}" for b, n in counts.items())
            for seed, counts in draws
        )
        or "none"
    )


@dataclass
class Window:
    """The drawn tasks of one benchmark, in the order they run."""

    bench: Benchmark
    tasks: list[EvalTask]
    pool: int = 0  # the items it was drawn from

    @property
    def name(self) -> str:
        return self.bench.name

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self.tasks]


def draw_window(name: str, n: int, seed: int, data_dir: str | None = None) -> Window:
    """`n` tasks of the benchmark `name`, drawn from its full data set (a committed sample is
    refused: a draw from 20 items says nothing about the rest)."""
    bench = get_benchmark(name, data_dir)
    if bench.source.is_sample:
        raise DataError(f"{name}: only the committed sample was found; the draw needs the full set")
    tasks = bench.tasks()
    if bench.stratum is None:
        pool = len(tasks) - len(excluded(name, len(tasks), seed))
        return Window(bench, [tasks[i] for i in draw(name, len(tasks), n, seed)], pool)
    index = {t.id: i for i, t in enumerate(tasks)}
    held = frozenset(index[t] for t in bench.held_out() if t in index)

    def by_type(pool: list[int], s: int) -> list[int]:
        return [
            index[t.id] for t in ranked_tasks([tasks[i] for i in pool], s, stratum=bench.stratum)
        ]

    out = excluded(name, len(tasks), seed, by_type, held)
    kept = [i for i in range(len(tasks)) if i not in out]
    if not 0 <= n <= len(kept):
        raise ValueError(
            f"{name}: cannot draw {n} of the {len(kept)} items not yet seen or held out"
        )
    return Window(bench, [tasks[i] for i in by_type(kept, seed)[:n]], len(kept))


# ---- the order ----------------------------------------------------------------------------------


@dataclass
class Pair:
    """One method on one task, the unit the run interleaves; `run` is the task's run index (the
    pens task runs several times per method)."""

    bench: Benchmark
    task: EvalTask
    method: str
    run: int = 0

    @property
    def cell(self) -> tuple[str, str]:
        return self.bench.name, self.method

    @property
    def key(self) -> str:
        return task_key(self.run, self.task.id)


def run_as(method: str, config: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The eval method a benchmark method runs as, and its config: a variant (`VARIANTS`) runs
    its method with its policies in place of the small-model one, an sc cell (`MATCHED`) runs as
    sc; any other method is itself."""
    config = dict(config or {})
    if method in MATCHED:
        return SC, config
    if method not in VARIANTS:
        return method, config
    base, policies = VARIANTS[method]
    kept = [p for p in config.get("policies", []) if p != SMALL_MODEL]
    return base, {**config, "policies": [*kept, *policies]}


def rotated(methods: Sequence[str], k: int) -> list[str]:
    i = k % len(methods)
    return [*methods[i:], *methods[:i]]


def applies(method: str, bench: Benchmark) -> bool:
    """Whether `method` runs on `bench`: `program` on math, `rag` on QA, the others on all; a
    method run as another (`run_as`) where that one runs."""
    return DOMAIN_METHODS.get(run_as(method)[0], bench.domain) == bench.domain


def interleave(windows: list[Window], methods: list[str], start: int = 0) -> list[Pair]:
    """Every method that applies on a task before the next task; the k-th task of each
    benchmark starts with method k mod m, so each method comes first equally often. The
    benchmarks alternate task by task, so a run stopped anywhere holds about as many tasks of
    each. Tasks before position `start` of each window are left out; the others keep their
    order and their first method."""
    pairs = []
    for k in range(start, max((len(w.tasks) for w in windows), default=0)):
        for w in windows:
            if k < len(w.tasks):
                ms = [m for m in methods if applies(m, w.bench)]
                pairs += [Pair(w.bench, w.tasks[k], m) for m in rotated(ms, k)]
    return pairs


def pens_pairs(rounds: int = PENS_ROUNDS) -> list[Pair]:
    """The README's task with react and verimap, `rounds` times each, alternating who goes first."""
    pens = PensTask()
    task = pens.tasks()[0]
    return [Pair(pens, task, m, r) for r in range(rounds) for m in rotated(PENS_METHODS, r)]


# ---- run directories ----------------------------------------------------------------------------


def cell_dir(runs_dir: Path, bench: str, method: str) -> Path:
    return runs_dir / f"{bench}-{method}"


def cells_of(pairs: list[Pair]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(p.cell for p in pairs))


def pins(method: str, seed: int, model: str, samples: Mapping[str, int]) -> dict[str, Any]:
    """What every part of a run must share with the parts before it, beside what the runner
    itself holds a resume to (benchmark, method, seed): the model, and an sc cell's k (`samples`,
    by sc cell)."""
    k = {"samples": samples[method]} if method in MATCHED else {}
    return {"seed": seed, "model": model, **k}


def started_config(out: Path) -> dict[str, Any]:
    """The config a run directory was started with ({} before it was), `migrated`."""
    return (
        migrated(json.loads((out / CONFIG).read_text("utf-8"))) if (out / CONFIG).exists() else {}
    )


def check_dirs(
    pairs: list[Pair],
    runs_dir: Path,
    seed: int,
    model: str,
    samples: Mapping[str, int],
    resume: bool,
    ballot: str = DEFAULT_BALLOT,
) -> None:
    """Refuse, before any server starts, a directory that holds results without --resume, or
    another benchmark, method or seed (run_dir's own check), or another model, k (`samples`, by
    sc cell) or ballot."""
    for bench, method in cells_of(pairs):
        out = cell_dir(runs_dir, bench, method)
        check_run_dir(out, {"benchmark": bench, "method": run_as(method)[0], "seed": seed}, resume)
        old = started_config(out)
        if not old:
            continue
        ran = {**old, "ballot": recorded_settings(old.get("run_config", {}))["verify"]["ballot"]}
        wanted = {
            **pins(method, seed, model, samples),
            **({"ballot": ballot} if method == VERIMAP else {}),
        }
        for key, want in wanted.items():
            if ran.get(key, want) != want:
                raise RunDirError(
                    f"{out} holds a run with {key} {ran[key]!r}, not {want!r}; continue it with "
                    f"the same {key}, or choose another --runs-dir"
                )


def unfinished(pairs: list[Pair], runs_dir: Path) -> list[Pair]:
    """The pairs whose task has no record yet in their method's directory (one that errored
    runs again, as the runner's resume does)."""
    done = {c: set(ResultsLog(cell_dir(runs_dir, *c) / RESULTS).load()) for c in cells_of(pairs)}
    return [p for p in pairs if p.key not in done[p.cell]]


def cell_configs(seed: int, model: str, windows: list[Window]) -> dict[str, dict[str, Any]]:
    """What each benchmark's directories record beside the runner's config: the seed (which
    run_dir then holds a resume to), the model, and the draw."""
    out: dict[str, dict[str, Any]] = {"pens": {"seed": seed, "model": model, "rounds": PENS_ROUNDS}}
    for w in windows:
        dev = [[r.start, r.stop - 1] for r in DEV_WINDOWS.get(w.name, ())]
        seen = [[s, counts.get(w.name, 0)] for s, counts in seen_before(seed)]
        draw = {"excluded": dev, "seen_draws": seen, "task_ids": w.ids, **w.bench.identity()}
        out[w.name] = {"seed": seed, "model": model, "draw": draw}
    return out


# ---- the run ------------------------------------------------------------------------------------

RunPair = Callable[[Pair], Awaitable[str]]


async def run_pairs(pairs: list[Pair], run_one: RunPair) -> None:
    """One pair at a time, in order: the local server answers one request at a time."""
    for i, pair in enumerate(pairs, 1):
        say(f"[{i}/{len(pairs)}] {await run_one(pair)}")


def outcome_line(pair: Pair, outcome: EvalOutcome) -> str:
    rec = next((r for r in outcome.records if r["key"] == pair.key), None)
    if rec is None:
        return f"{pair.key} {pair.method}: error (see errors.jsonl); it runs again on --resume"
    return f"{pair.key} {pair.method}: {task_cell(row_from_record(rec))}"


def eval_runner(
    models: Any,
    sandbox: Any,
    runs_dir: Path,
    config: dict[str, Any],
    samples: Mapping[str, int],
    extra: dict[str, dict[str, Any]],
    notes: dict[tuple[str, str], str],
) -> RunPair:
    """Each pair through the eval runner on a one-task view, resuming its method's directory, so
    records accumulate there as a whole `verimap eval` run's would; an sc cell samples its k
    (`samples`, by sc cell). A pair that cannot run (its directory refused, say) is noted for the
    tables and the next one starts."""

    async def run_one(pair: Pair) -> str:
        method, method_config = run_as(pair.method, config)
        variant = {"variant": pair.method} if method != pair.method else {}
        try:
            outcome = await run_eval(
                cast(Benchmark, TaskSubset(pair.bench, [pair.task])),
                method,
                models,
                sandbox,
                cell_dir(runs_dir, *pair.cell),
                runs=pair.run + 1,
                max_concurrency=1,
                resume=True,
                config=method_config,
                progress=False,
                extra_config={**extra[pair.bench.name], **variant},
                samples=samples[pair.method] if pair.method in MATCHED else None,
            )
        except Exception as e:
            notes[pair.cell] = f"{type(e).__name__}: {e}"
            return f"{pair.key} {pair.method}: could not run: {e}"
        return outcome_line(pair, outcome)

    return run_one


def read_cells(
    runs_dir: Path, pairs: list[Pair], windows: list[Window], notes: dict[tuple[str, str], str]
) -> list[Cell]:
    """Every cell as its directory holds it now, limited to the drawn tasks."""
    ids = {w.name: w.ids for w in windows} | {"pens": ["pens"]}
    cells = []
    for bench, method in cells_of(pairs):
        cell = read_cell(bench, method, cell_dir(runs_dir, bench, method), ids[bench])
        cell.rows = [r for r in cell.rows if r.task_id in ids[bench]]
        cell.errors = [t for t in cell.errors if t in ids[bench]]
        cell.note = notes.get((bench, method), "")
        cells.append(cell)
    return cells


def matched_samples(runs_dir: Path, windows: list[Window], method: str = SC) -> tuple[int, str]:
    """The k of the sc cell `method` (`MATCHED`) when `--samples` is not given, and why: the
    measured mean calls per task of the verimap method it is matched to on this draw (the most
    of any benchmark), rounded up, so the baseline spends at least what that method spent. A k
    left at a fixed default once undercut a ballot that made 6.7 calls a task with 4 samples.
    The default before that method has run; a directory of the cell already started keeps its
    k, so a resumed run stays one run."""
    for w in windows:
        if "samples" in (old := started_config(cell_dir(runs_dir, w.name, method))):
            return int(old["samples"]), f"as this draw's {method} directory was started"
    target = MATCHED[method]
    means = []
    for w in windows:
        cell = read_cell(w.name, target, cell_dir(runs_dir, w.name, target), w.ids)
        rows = [r for r in cell.rows if r.task_id in w.ids]
        if rows:
            means.append(statistics.fmean(r.calls for r in rows))
    if not means:
        return DEFAULT_SAMPLES, f"the default: {target} has not run on this draw in {runs_dir}"
    return max(1, math.ceil(max(means) - 1e-9)), f"{target}'s mean calls on this draw, rounded up"


def sample_counts(
    runs_dir: Path, windows: list[Window], methods: list[str], samples: int | None
) -> dict[str, tuple[int, str]]:
    """Each sc cell's k and why, for every sc cell that runs or whose verimap method runs:
    `samples` (--samples) for all of them when given, else `matched_samples`."""
    return {
        sc: (samples, "set with --samples")
        if samples is not None
        else matched_samples(runs_dir, windows, sc)
        for sc, target in MATCHED.items()
        if sc in methods or target in methods
    }


def calls_per_task(cells: list[Cell], method: str) -> str:
    found = [
        f"{c.bench} {statistics.fmean(r.calls for r in c.rows):.1f}"
        for c in cells
        if c.method == method and c.rows and c.bench != "pens"
    ]
    return ", ".join(found) or "not measured yet"


def make_header(
    args: argparse.Namespace,
    argv: list[str],
    windows: list[Window],
    cells: list[Cell],
    config: dict[str, Any],
) -> str:
    draws = "".join(
        f"\n  - {TITLES.get(w.name, w.name)}, {len(w.ids)} of the {w.pool} items outside the "
        f"development windows and seen draws (data: {w.bench.source.root}): {', '.join(w.ids)}"
        + (f" (**{DEVELOPMENT_DATA[w.name]}**)" if w.name in DEVELOPMENT_DATA else "")
        for w in windows
    )
    dev = "; ".join(
        f"{TITLES[name]} items " + " and ".join(f"{r.start}–{r.stop - 1}" for r in rs)
        for name, rs in DEV_WINDOWS.items()
    )
    return (
        f"## Verification quality: {args.model}\n\n"
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}; commit: {commit()}\n"
        f"- command: `{' '.join(shlex.quote(a) for a in argv)}`\n"
        f"- seed: **{args.seed}**, picked before the tasks were seen (`{SEED_HINT}`)\n"
        f"- tasks: `random.Random({args.seed}).sample` of each full set, excluding the "
        f"development windows ({dev}) and the draws of seeds already measured "
        f"({seen_text(seen_before(args.seed))}); "
        f"in run order:{draws}\n"
        + (
            f"- this part runs each window from position {args.start} (0-based); the tasks "
            "before it ran in another part\n"
            if args.start
            else ""
        )
        + f"- compute: one task at a time on one local server and one `{args.sandbox}` sandbox, "
        "every method on a task before the next, the method order rotating task by task\n"
        f"- settings: the policies `verimap eval` applies (`verimap.policies`): "
        f"{[p.record() for p in get_policies(config.get('policies'))] or 'none (an endpoint)'}; "
        "each method's own fixed settings on top (`verimap.methods.presets`); answer "
        f"agreement's ballot: **{config.get('verify', {}).get('ballot', DEFAULT_BALLOT)}**\n"
        + "".join(
            f"- {sc}: k = **{k}** samples per task ({why}), matched to {MATCHED[sc]}; "
            f"{MATCHED[sc]}'s measured mean calls per task: {calls_per_task(cells, MATCHED[sc])}\n"
            for sc, (k, why) in args.sample_counts.items()
        )
        + f"- run directories (config.json, results.jsonl, traces): `{args.runs_dir}`"
    )


# ---- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log_to_stderr()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    runs_dir = Path(args.runs_dir)
    try:
        windows = [
            draw_window(name, n, args.seed, args.data_dir)
            for name in DRAWN
            if (n := getattr(args, name)) > 0
        ]
        pairs = (pens_pairs() if args.pens else []) + interleave(windows, methods, args.start)
        args.sample_counts = sample_counts(runs_dir, windows, methods, args.samples)
        samples = {sc: k for sc, (k, _) in args.sample_counts.items()}
        check_dirs(
            pairs,
            runs_dir,
            args.seed,
            args.model,
            samples,
            args.resume or args.report_only,
            args.ballot or DEFAULT_BALLOT,
        )
    except (DataError, RunDirError, ValueError) as e:
        say(f"error: {e} (this benchmark's --out is --runs-dir {runs_dir})")
        return 2
    left = unfinished(pairs, runs_dir)
    if args.report_only and len(left) == len(pairs):
        say(f"error: --report-only: no finished (task, method) pair of this draw in {runs_dir}")
        return 2
    say(f"{len(pairs) - len(left)} of {len(pairs)} (task, method) pairs already done")
    todo = [] if args.report_only else left
    notes: dict[tuple[str, str], str] = {}
    command = sys.argv if argv is None else ["benchmarks/verification_quality.py", *argv]
    config: dict[str, Any] = {"policies": default_policies(local_endpoint({"model": args.model}))}
    if args.ballot:
        config["verify"] = {"ballot": args.ballot}
    t0 = time.monotonic()

    async def work() -> None:
        if not todo:
            return
        async with local_session(args.model, args.sandbox) as (models, sandbox):
            extra = cell_configs(args.seed, args.model, windows)
            runner = eval_runner(models, sandbox, runs_dir, config, samples, extra, notes)
            await run_pairs(todo, runner)

    def report(interrupted: bool) -> str:
        cells = read_cells(runs_dir, pairs, windows, notes)
        header = make_header(args, ["python3", *command], windows, cells, config)
        header += f"\n- wall time of this invocation: {seconds(time.monotonic() - t0)}"
        if interrupted:
            header += " (interrupted: continue with --resume)"
        if args.report_only and left:
            header += f" (report only: {len(left)} pairs not run; continue with --resume)"
        return render(header, {w.name: w.ids[args.start :] for w in windows}, cells, PENS_ROUNDS)

    hint = f"the same command plus --resume (run directories: {runs_dir})"
    return run_then_report(work(), report, args.out, hint)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--seed", type=int, default=None, help=f"required; pick one: {SEED_HINT}")
    p.add_argument("--gsm8k", type=int, default=30, help="GSM8K tasks to draw (0: none)")
    p.add_argument(
        "--mbpp",
        type=int,
        default=30,
        help="MBPP tasks to draw, from its sanitized test split (0: none)",
    )
    p.add_argument(
        "--multihoprag",
        type=int,
        default=0,
        help="MultiHopRAG queries to draw, stratified by question type (0: none)",
    )
    p.add_argument(
        "--humaneval",
        type=int,
        default=0,
        help="HumanEval tasks to draw (0: none); every item is seen, so only a seen "
        "draw's seed can still draw them, and they are reported as development "
        "data",
    )
    p.add_argument(
        "--methods",
        default=DEFAULT_METHODS,
        help=f"from {', '.join(KNOWN)} ({PLANNED}: verimap with the model writing the plan, "
        f"the small-model-planner policy; {SC_PLANNED}: sc with k matched to {PLANNED}'s calls)",
    )
    p.add_argument(
        "--samples",
        type=int,
        default=None,
        help="k of every sc cell ("
        + ", ".join(MATCHED)
        + ") [each: its verimap method's mean calls per task on this draw, rounded up "
        f"({', '.join(f'{sc}: {v}' for sc, v in MATCHED.items())}); {DEFAULT_SAMPLES} before "
        "that method has run; a started cell keeps its k]",
    )
    p.add_argument(
        "--ballot",
        default=None,
        choices=list(BALLOTS),
        help=f"answer agreement's ballot [{DEFAULT_BALLOT}]",
    )
    p.add_argument(
        "--start",
        type=int,
        default=0,
        help="run each window from its task at this position (0-based): the rest of a draw "
        "whose first tasks ran elsewhere and are kept in a compact file (`verimap eval compact "
        "--append`)",
    )
    p.add_argument("--pens", action="store_true", help="also the README's task, react/verimap x3")
    p.add_argument("--model", default="qwen2.5-coder-1.5b", help="local catalog model")
    p.add_argument("--runs-dir", default=None, help="[runs/verification-quality-SEED]")
    p.add_argument("--resume", action="store_true", help="continue --runs-dir: skip finished pairs")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="rebuild the tables from --runs-dir and run nothing",
    )
    p.add_argument(
        "--out",
        default=None,
        help="Markdown ('' for none) [report.md in --runs-dir: the tables of a draw "
        "stay beside its runs, and no curated page is written over]",
    )
    p.add_argument("--sandbox", default="docker", choices=KINDS)
    p.add_argument("--data-dir", default=None, help="benchmark data [as verimap eval]")
    args = p.parse_args(argv)
    if args.seed is None:
        p.error(f"--seed is required: pick it before looking at any task ({SEED_HINT})")
    methods = list(dict.fromkeys(m.strip() for m in args.methods.split(",") if m.strip()))
    unknown = [m for m in methods if m not in KNOWN]
    if unknown or not methods:
        p.error(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(KNOWN)}")
    args.methods = ",".join(methods)
    if min(args.gsm8k, args.mbpp, args.multihoprag, args.humaneval, args.start) < 0 or (
        args.samples is not None and args.samples < 1
    ):
        p.error("task counts and --start must be >= 0, and --samples >= 1")
    args.runs_dir = args.runs_dir or f"runs/verification-quality-{args.seed}"
    if args.out is None:
        args.out = str(Path(args.runs_dir) / "report.md")
    return args


if __name__ == "__main__":
    sys.exit(main())
