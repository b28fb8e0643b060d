"""The harness on the real local model: the full path, model server included (marker `localmodel`)."""

import json

import pytest

from verimap.evals.runner import RESULTS, run_eval
from verimap.evals.tasksets import get_benchmark

from .conftest import SAMPLES


@pytest.mark.localmodel
async def test_react_on_one_gsm8k_problem_with_the_local_model(local_models, sandbox, tmp_path):
    bench = get_benchmark("gsm8k", SAMPLES)
    cfg = {
        "sampling": {"temperature": 0.0},
        "execution": {"executor_max_steps": 4},
        "budget": {"timeout_s": 300},
    }
    out = await run_eval(
        bench, "react", local_models, sandbox, tmp_path, limit=1, config=cfg, progress=False
    )
    assert out.tally.errors == 0 and out.tally.done == 1
    (rec,) = [json.loads(x) for x in (tmp_path / RESULTS).read_text().splitlines()]
    # A busy machine may run out of the 300 s, but a call cut off by it is still counted.
    assert rec["status"] in ("success", "failed", "partial", "budget_exhausted")
    assert "executor" in rec["usage"], f"the executor's calls are missing: {rec['usage']}"
    assert rec["usage"]["executor"]["calls"] >= 1 and rec["tokens"] > 0
    assert rec["correct"] == (rec["predicted"] == "18")
    assert (tmp_path / rec["trace"]).read_text().count("\n") >= 2
