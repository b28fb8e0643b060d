"""A GSM8K task for `inspect eval`, on the repo's GSM8K sample (datasets/gsm8k/test.jsonl), built
as inspect_evals builds its own: the question is the input, the number after `####` the
target, `match(numeric=True)` the scorer, and `verified` beside it. With no `--model`,
verimap's local model serves every role:

    inspect eval tests/integrations/gsm8k_task.py --limit 3 --max-samples 1

The task's solver is verimap's already; `--solver verimap/verimap_solver -S ...` replaces it
(the test does, to run it by name as on any other task).
"""

from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import Sample, json_dataset
from inspect_ai.scorer import match

from verimap.integrations.inspect_ai import verified, verimap_solver

DATA = Path(__file__).resolve().parents[2] / "datasets" / "gsm8k" / "test.jsonl"


def record_to_sample(record: dict[str, Any]) -> Sample:
    reasoning, answer = record["answer"].split("####")
    return Sample(
        input=record["question"],
        target=answer.strip().replace(",", ""),
        metadata={"reasoning": reasoning.strip()},
    )


@task
def gsm8k(method: str = "verimap", max_calls: int = 8, time_limit_s: float = 150.0) -> Task:
    """`max_calls` and `time_limit_s` bound each sample's verimap run (its `Budget`)."""
    budget = {"max_llm_calls": max_calls, "timeout_s": time_limit_s}
    return Task(
        dataset=json_dataset(str(DATA), record_to_sample, auto_id=True),
        solver=verimap_solver(method, domain="math", config={"budget": budget}),
        scorer=[match(numeric=True), verified()],
    )
