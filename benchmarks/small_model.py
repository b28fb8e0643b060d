"""Does verification make answers better on the embedded model? Methods side by side, one run.

    python benchmarks/small_model.py [--model qwen2.5-coder-1.5b] [--gsm8k 20] [--humaneval 20]
        [--offset 0] [--methods bare,react,verimap] [--max-retries 2] [--max-iterations 2]
        [--pens/--no-pens] [--out eval/small-model.md]

Every method runs on the same fixed tasks ([offset, offset + N) of each set) against one local
server, greedy first attempts (the local-model rule of `verimap eval`), one task at a time. `bare`
is the model alone: one call, free-text reasoning for GSM8K, the completed function for
HumanEval, scored by the benchmark's own scorer. `react` and `verimap` go through the eval runner,
so each writes its usual run directory (results, traces) under --runs-dir. `--pens` adds the
README's `verimap run` task. The Markdown table goes to --out and to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verimap.evals.benchmarks import Benchmark, EvalTask, get_benchmark
from verimap.evals.methods import build_coordinator
from verimap.evals.runner import run_eval
from verimap.llm.base import ModelRequest
from verimap.llm.endpoint import connect, default_sampling
from verimap.sandbox import get_sandbox

PENS = "A shop sells pens at 17 dollars each. How much do 23 pens cost? Give the number."
PENS_GOLD = "391"
BARE_PROMPTS = {
    "gsm8k": "{question}\n\nSolve step by step. End with the line 'The answer is N.'",
    "humaneval": "Complete this Python function. Reply with the complete function (signature and "
    "body, with any imports) in one ```python code block.\n\n{prompt}",
}


@dataclass
class Row:
    task_id: str
    correct: bool
    wall_s: float
    calls: int
    prompt_tokens: int
    completion_tokens: int
    verified: bool = False
    no_plan: bool = False
    fallbacks: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class TaskSlice:
    """A benchmark whose `tasks()` is a fixed window, so tasks nobody tuned on can be measured."""

    def __init__(self, bench: Benchmark, offset: int, n: int):
        self._bench, self._window = bench, slice(offset, offset + n)

    def tasks(self) -> list[EvalTask]:
        return self._bench.tasks()[self._window]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bench, name)


async def bare(bench: Any, model: Any, sandbox: Any) -> list[Row]:
    rows = []
    for task in bench.tasks():
        text = BARE_PROMPTS[bench.name].format(
            question=task.prompt.split("\n\nSolve this math word problem")[0],
            prompt=task.meta.get("prompt", task.prompt),
        )
        t0 = time.monotonic()
        resp = await model.request(
            ModelRequest(messages=[{"role": "user", "content": text}], temperature=0.0)
        )
        score = await bench.score(task, resp.content or "", sandbox)
        u = resp.usage
        rows.append(Row(task.id, score.correct, time.monotonic() - t0, 1, u.prompt_tokens,
                        u.completion_tokens))  # fmt: skip
    return rows


def _rows(out: Path) -> list[Row]:
    rows = []
    for line in (out / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        usage = r.get("usage", {}).values()
        rows.append(
            Row(
                r["task_id"], r["correct"], r["wall_time_s"],
                sum(u.get("calls", 0) for u in usage),
                sum(u.get("prompt_tokens", 0) for u in usage),
                sum(u.get("completion_tokens", 0) for u in usage),
                verified=r.get("verified", False),
                no_plan="planning failed" in (r.get("error") or ""),
                fallbacks=r.get("fallbacks", 0),
            )
        )  # fmt: skip
    return rows


async def framework(method: str, bench: Any, models: dict, sandbox: Any, out: Path,
                    config: dict[str, Any]) -> list[Row]:  # fmt: skip
    await run_eval(bench, method, models, sandbox, out, max_concurrency=1, config=config,
                   progress=False)  # fmt: skip
    return _rows(out)


async def pens(method: str, models: dict, sandbox: Any, config: dict[str, Any]) -> Row:
    bench = get_benchmark("gsm8k")
    coord = build_coordinator(method, models, sandbox, bench.tools(sandbox), config=config)
    t0 = time.monotonic()
    r = await coord.run(PENS)
    score = await bench.score(EvalTask("pens", "gsm8k", PENS, PENS_GOLD), r.answer, sandbox)
    u = r.usage.total
    return Row("pens", score.correct, time.monotonic() - t0, u.calls, u.prompt_tokens,
               u.completion_tokens, verified=r.verified, fallbacks=len(r.fallback_iterations))  # fmt: skip


def summary_line(bench: str, method: str, rows: list[Row]) -> str:
    n = len(rows)
    if not n:
        return f"| {bench} | {method} | – | | | | | | |"
    mean = statistics.fmean
    return (
        f"| {bench} | {method} | **{sum(r.correct for r in rows)}/{n}** | "
        f"{sum(r.verified for r in rows)} | {sum(r.no_plan for r in rows)} | "
        f"{sum(r.fallbacks > 0 for r in rows)} | {mean(r.calls for r in rows):.1f} | "
        f"{mean(r.prompt_tokens for r in rows):,.0f} / {mean(r.completion_tokens for r in rows):,.0f} | "
        f"{mean(r.wall_s for r in rows):.0f} s ({sum(r.wall_s for r in rows) / 60:.1f} min) |"
    )


def render(results: dict[tuple[str, str], list[Row]], header: str) -> str:
    lines = [header, "",
             "| set | method | correct | verified | no plan | fallback | calls/task | prompt / completion tokens per task | wall per task (total) |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    lines += [summary_line(b, m, rows) for (b, m), rows in results.items()]
    for bench in dict.fromkeys(b for b, _ in results):
        methods = [m for b, m in results if b == bench]
        per: dict[str, dict[str, Row]] = {}
        for m in methods:
            for r in results[(bench, m)]:
                per.setdefault(r.task_id, {})[m] = r
        lines += ["", f"### {bench}, per task (✓ correct, wall s, calls)", "",
                  "| task | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]  # fmt: skip
        for tid, by in per.items():
            cells = [
                f"{'✓' if (r := by[m]).correct else '✗'} {r.wall_s:.0f} s, {r.calls}" if m in by else "–"
                for m in methods
            ]  # fmt: skip
            lines.append(f"| {tid} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain") else "")


async def main(args: argparse.Namespace) -> None:
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    runs_dir = Path(args.runs_dir or f"runs/bench-small-{time.strftime('%Y%m%d-%H%M%S')}")
    endpoint = {"model": args.model}
    config: dict[str, Any] = {**default_sampling(**endpoint), "max_retries": args.max_retries,
                              "max_iterations": args.max_iterations}  # fmt: skip
    header = (
        f"## Small-model benchmark: {args.model}, {time.strftime('%Y-%m-%d')}, commit {_commit()}\n\n"
        f"`{' '.join(['python3', *sys.argv])}`; temperature {config.get('temperature')} "
        f"(retries {config.get('retry_temperature')}), retries x iterations "
        f"{args.max_retries} x {args.max_iterations} (react: 1 x 1), one task at a time."
    )
    results: dict[tuple[str, str], list[Row]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sandbox = get_sandbox(args.sandbox)
    try:
        async with connect(**endpoint) as models:
            for name, n in (("gsm8k", args.gsm8k), ("humaneval", args.humaneval)):
                if n <= 0:
                    continue
                bench = TaskSlice(get_benchmark(name), args.offset, n)
                for m in methods:
                    t0 = time.monotonic()
                    if m == "bare":
                        rows = await bare(bench, models["executor"], sandbox)
                    else:
                        out = runs_dir / f"{name}-{m}"
                        rows = await framework(m, bench, models, sandbox, out, config)
                    results[(name, m)] = rows
                    print(f"{name} {m}: {sum(r.correct for r in rows)}/{len(rows)} in "
                          f"{time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)  # fmt: skip
            if args.pens:
                for m in (m for m in methods if m != "bare"):
                    results[("pens", m)] = [await pens(m, models, sandbox, config)]
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted: the table holds what finished", file=sys.stderr)
    finally:
        await sandbox.aclose()
        table = render(results, header)
        print(table)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(table)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="qwen2.5-coder-1.5b")
    p.add_argument("--gsm8k", type=int, default=20)
    p.add_argument("--humaneval", type=int, default=20)
    p.add_argument("--offset", type=int, default=0, help="first task of each set")
    p.add_argument("--methods", default="bare,react,verimap")
    p.add_argument("--max-retries", type=int, default=2)
    p.add_argument("--max-iterations", type=int, default=2)
    p.add_argument("--pens", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--sandbox", default="docker")
    p.add_argument("--runs-dir", default=None)
    p.add_argument("--out", default="eval/small-model.md")
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
