"""HumanEval through run_tests: every canonical solution passes, a wrong one fails for each."""

import json
import time

import pytest
from click.testing import CliRunner

from verimap.evals.humaneval import estimate_pass_at_k, load_problems, score_samples

from .conftest import humaneval_file


def test_pass_at_k_estimator_matches_the_closed_form():
    # n=5 samples, c=2 correct: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert estimate_pass_at_k([5], [2], 1) == pytest.approx([0.4])
    assert estimate_pass_at_k([5], [2], 2) == pytest.approx([0.7])
    assert estimate_pass_at_k([3, 3], [0, 3], 1) == pytest.approx([0.0, 1.0])


async def test_bad_samples_are_reported_clearly(process_sandbox):
    problems = {"T/0": {"prompt": "", "test": "", "entry_point": "f"}}
    with pytest.raises(ValueError, match="lacks task_id or completion"):
        await score_samples(process_sandbox, [{"task_id": "T/0"}], problems)
    with pytest.raises(ValueError, match="unknown task_id 'T/9'"):
        await score_samples(process_sandbox, [{"task_id": "T/9", "completion": ""}], problems)


@pytest.mark.docker
async def test_all_canonical_solutions_pass_and_wrong_ones_fail(docker_sandbox):
    problems = load_problems(humaneval_file())
    assert len(problems) == 164
    canonical = [{"task_id": t, "completion": p["canonical_solution"]} for t, p in problems.items()]
    wrong = [{"task_id": t, "completion": "    return None\n"} for t in problems]
    start = time.monotonic()
    good_k, good = await score_samples(docker_sandbox, canonical, problems, ks=[1])
    bad_k, bad = await score_samples(docker_sandbox, wrong, problems, ks=[1])
    elapsed = time.monotonic() - start
    assert [r["task_id"] for r in good if not r["passed"]] == [], [
        r["result"] for r in good if not r["passed"]
    ]
    assert [r["task_id"] for r in bad if r["passed"]] == []
    assert good_k == {"pass@1": 1.0} and bad_k == {"pass@1": 0.0}
    assert all(r["result"].startswith("failed") or r["result"] == "timed out" for r in bad)
    print(f"2x164 HumanEval checks in {elapsed:.1f}s")


@pytest.mark.docker
def test_cli_score_writes_results_and_pass_at_k(tmp_path, docker_sandbox):
    from verimap.cli import main

    problems = load_problems(humaneval_file())
    ids = ["HumanEval/0", "HumanEval/2"]
    samples = tmp_path / "samples.jsonl"
    rows = [{"task_id": t, "completion": problems[t]["canonical_solution"]} for t in ids]
    rows += [{"task_id": t, "completion": "    return 0\n"} for t in ids]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(
        main,
        [
            "humaneval",
            "score",
            str(samples),
            "--problems",
            str(humaneval_file()),
            "--k",
            "1,2",
            "--sandbox",
            "docker",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"pass@1": 0.5, "pass@2": 1.0}
    out = [
        json.loads(x) for x in (tmp_path / "samples.jsonl_results.jsonl").read_text().splitlines()
    ]
    assert [r["passed"] for r in out] == [True, True, False, False]
    assert out[0]["result"] == "passed" and out[2]["result"].startswith("failed")
