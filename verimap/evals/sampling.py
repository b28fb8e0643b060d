"""Which tasks an eval runs: the first N, or the paper's seeded random sample (500 tasks, or
half of a smaller set), the same ids on every machine."""

from __future__ import annotations

import hashlib

from verimap.evals.tasksets import EvalTask

PAPER_SAMPLE = 500


def paper_sample_size(n_tasks: int) -> int:
    return PAPER_SAMPLE if n_tasks >= PAPER_SAMPLE else max(1, n_tasks // 2)


def sample_tasks(tasks: list[EvalTask], size: int | str, seed: int) -> list[EvalTask]:
    """`size` tasks (or "paper": `paper_sample_size`), in the benchmark's order.

    Tasks are ranked by a hash of seed and task id rather than drawn with `random`, so the
    same seed picks the same ids on any Python version and whatever order the data file
    lists them in, and a smaller sample is part of a larger one with the same seed."""
    n = paper_sample_size(len(tasks)) if size == "paper" else int(size)
    if n < 1:
        raise ValueError(f"a sample needs at least one task, not {size!r}")

    def rank(t: EvalTask) -> bytes:
        return hashlib.sha256(f"{seed}:{t.id}".encode()).digest()

    chosen = {t.id for t in sorted(tasks, key=rank)[:n]}
    return [t for t in tasks if t.id in chosen]


def select_tasks(
    tasks: list[EvalTask],
    *,
    limit: int | None = None,
    sample: int | str | None = None,
    seed: int | None = None,
) -> list[EvalTask]:
    """The first `limit` tasks, or a seeded random `sample`, or all; never both."""
    if sample is not None:
        if limit:
            raise ValueError(
                "--limit (the first N tasks) and --sample (a seeded random sample) exclude each "
                "other; give one of them"
            )
        return sample_tasks(tasks, sample, 0 if seed is None else seed)
    if seed is not None:
        raise ValueError("--seed chooses a --sample; give --sample N (or --sample paper) with it")
    return tasks[: limit if limit else None]


def sample_digest(tasks: list[EvalTask]) -> str:
    return hashlib.sha256("\n".join(sorted(t.id for t in tasks)).encode()).hexdigest()[:16]
