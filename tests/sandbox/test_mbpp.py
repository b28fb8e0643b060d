"""MBPP through run_tests: every canonical solution of the default split passes in the real
sandbox, except the listed ones, which fail for the listed reason; a wrong answer fails."""

import asyncio
import re
import time
from pathlib import Path

import pytest

from verimap.evals.tasksets import MBPP, EvalTask
from verimap.testing import need

# The default split's tasks whose own reference code fails, and why (docs/eval.md#mbpp). No
# answer passes task 56: its function is named `check`, the name the test runner gives the
# tests. Task 88's reference returns a `collections.Counter`; only builtin types cross the
# sandbox boundary (so that code under test cannot hand the tests an object that lies), and an
# answer that returns a plain dict passes.
MBPP_CANONICAL_FAILURES = {
    "mbpp/56": "argument cannot be sent to the code under test: a value of type "
    "CandidateFunction cannot cross the sandbox boundary",
    "mbpp/88": "a value of type Counter cannot cross the sandbox boundary",
}


def test_the_docs_list_the_same_failures():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "eval.md").read_text()
    section = docs[docs.index("## MBPP") :].split("\n## ")[0]
    assert set(re.findall(r"^\| `(mbpp/\d+)` \|", section, re.M)) == set(MBPP_CANONICAL_FAILURES)


def _default_split() -> MBPP:
    bench = MBPP()
    need(not bench.source.is_sample, f"no MBPP data found ({bench.source.root})")
    return bench


async def _score_all(bench: MBPP, tasks: list[EvalTask], answer, sandbox) -> dict[str, object]:
    sem = asyncio.Semaphore(4)

    async def one(task: EvalTask):
        async with sem:
            return task.id, await bench.score(task, answer(task), sandbox)

    return dict(await asyncio.gather(*(one(t) for t in tasks)))


@pytest.mark.docker
async def test_all_canonical_solutions_pass_but_the_listed_ones(docker_sandbox):
    bench = _default_split()
    tasks = bench.tasks()
    assert len(tasks) == 257
    start = time.monotonic()
    scores = await _score_all(
        bench, tasks, lambda t: f"```python\n{t.meta['solution']}```", docker_sandbox
    )
    failed = {tid: s.detail for tid, s in scores.items() if not s.correct}
    assert sorted(failed) == sorted(MBPP_CANONICAL_FAILURES), failed
    for tid, why in MBPP_CANONICAL_FAILURES.items():
        assert why in failed[tid], (tid, failed[tid])
    print(f"257 MBPP canonical solutions in {time.monotonic() - start:.1f}s")


@pytest.mark.docker
async def test_a_wrong_answer_fails_and_a_plain_dict_passes_task_88(docker_sandbox):
    bench = _default_split()
    by_id = {t.id: t for t in bench.tasks()}
    sample = [by_id[i] for i in ("mbpp/11", "mbpp/126", "mbpp/88", "mbpp/479")]

    def wrong(task: EvalTask) -> str:
        return f"def {task.meta['entry_point']}(*args):\n    return 0\n"

    scores = await _score_all(bench, sample, wrong, docker_sandbox)
    assert not any(s.correct for s in scores.values()), scores
    as_dict = "def freq_count(xs):\n    return {x: xs.count(x) for x in xs}\n"
    assert (await bench.score(by_id["mbpp/88"], as_dict, docker_sandbox)).correct
