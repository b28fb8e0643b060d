"""Logic of benchmarks/small_model.py without a model server: the bare path through the runner,
the rows read back from a run directory, and the Markdown tables."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from verimap.base.messages import ModelRequest, ModelResponse
from verimap.base.model import ModelError
from verimap.base.usage import Usage
from verimap.evals.runner import ERRORS, RESULTS, run_eval
from verimap.evals.tasksets import get_benchmark
from verimap.policies.small_model import reply_cap

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "datasets"


def _load():
    # A benchmark imports its shared module (`_common`) from beside it, as a script run does.
    if str(REPO / "benchmarks") not in sys.path:
        sys.path.insert(0, str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        "small_model", REPO / "benchmarks" / "small_model.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


sm = _load()
common = sys.modules["_common"]  # the pieces small_model.py shares with other benchmarks


class Replies:
    """A model that answers "The answer is N.": the gold number on odd calls, -1 on even ones;
    the third call fails as a dead server does past the client's retries."""

    name = "fake"
    supports_tools = False

    def __init__(self, golds: dict[str, str]):
        self.golds = golds
        self.requests: list[ModelRequest] = []

    async def request(self, req: ModelRequest) -> ModelResponse:
        self.requests.append(req)
        text = req.messages[0].content
        gold = next(g for q, g in self.golds.items() if q in text)
        n = len(self.requests)
        if n == 3:
            raise ModelError("server went away")
        answer = gold if n % 2 else "-1"
        return ModelResponse(
            content=f"Step by step...\nThe answer is {answer}.",
            usage=Usage(calls=1, prompt_tokens=100, completion_tokens=20),
        )


async def test_bare_runs_through_the_runner_on_a_window_and_reads_back(tmp_path):
    bench = get_benchmark("gsm8k", SAMPLES)
    window = sm.TaskWindow(bench, 2, 4)
    tasks = window.tasks()
    assert [t.id for t in tasks] == ["gsm8k/2", "gsm8k/3", "gsm8k/4", "gsm8k/5"]
    model = Replies({t.prompt.split(sm.GSM8K_SUFFIX)[0]: t.gold for t in tasks})
    out = await run_eval(
        window,
        sm.BARE,
        {"executor": model},
        None,
        tmp_path,
        max_concurrency=1,
        config={"sampling": {"temperature": 0.0}},
        progress=False,
        solver=sm.bare_solver(model, {"sampling": {"temperature": 0.0}}),
    )
    assert out.tally.done == 3 and out.tally.errors == 1
    assert all(
        r.settings.temperature == 0.0 and "The answer is N" in r.messages[0].content
        for r in model.requests
    )
    assert json.loads((tmp_path / "config.json").read_text())["method"] == "bare"
    assert "server went away" in (tmp_path / ERRORS).read_text()
    trace = json.loads((tmp_path / RESULTS).read_text().splitlines()[0])["trace"]
    events = [json.loads(x)["type"] for x in (tmp_path / trace).read_text().splitlines()]
    assert events == ["run_start", "model_call", "replies", "finish"]

    cell = sm.read_cell("gsm8k", sm.BARE, tmp_path, [t.id for t in tasks])
    assert [r.task_id for r in cell.rows] == ["gsm8k/2", "gsm8k/3", "gsm8k/5"]
    assert [r.correct for r in cell.rows] == [True, False, False]
    assert cell.errors == ["gsm8k/4"]
    assert all(r.calls == 1 and r.prompt_tokens == 100 for r in cell.rows)


async def test_bare_calls_the_model_through_the_policies_as_eval_does(tmp_path):
    bench = get_benchmark("gsm8k", SAMPLES)
    window = sm.TaskWindow(bench, 2, 1)
    (task,) = window.tasks()
    asked = {}
    for policies in (["small-model"], []):
        model = Replies({task.prompt.split(sm.GSM8K_SUFFIX)[0]: task.gold})
        solve = sm.bare_solver(model, {"sampling": {"temperature": 0.0}, "policies": policies})
        await solve(task, 0, tmp_path / "t.jsonl")
        (asked[bool(policies)],) = [r.settings.max_tokens for r in model.requests]
    assert asked[True] == reply_cap() < asked[False]


def test_rows_count_fallbacks_from_the_trace_and_failed_planning(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "\n".join(json.dumps({"type": t}) for t in ["plan_fallback", "plan", "plan_fallback"])
    )
    rec = {
        "task_id": "HumanEval/1",
        "correct": False,
        "wall_time_s": 12.5,
        "verified": False,
        "error": "planning failed: no valid plan after 3 repairs",
        "fallbacks": 0,
        "usage": {
            "planner": {"calls": 4, "prompt_tokens": 900, "completion_tokens": 300},
            "executor": {"calls": 2, "prompt_tokens": 100, "completion_tokens": 50},
        },
    }
    row = common.row_from_record(rec, common.count_fallbacks(trace))
    assert (row.calls, row.prompt_tokens, row.completion_tokens) == (6, 1000, 350)
    assert row.no_plan and row.fallbacks == 2
    assert common.count_fallbacks(tmp_path / "missing.jsonl") is None
    assert common.row_from_record({**rec, "fallbacks": 1}).fallbacks == 1  # no trace: the record's


def test_render_summary_and_per_task_tables():
    def row(tid, ok, wall, calls, **kw):
        return sm.Row(tid, ok, wall, calls, 1000 * calls, 100 * calls, **kw)

    cells = [
        sm.Cell(
            "humaneval", "bare", [row("HumanEval/0", True, 4, 1), row("HumanEval/1", False, 6, 1)]
        ),
        sm.Cell(
            "humaneval",
            "verimap",
            [row("HumanEval/0", True, 100, 8, verified=True, cached_tokens=6000)],
            errors=["HumanEval/1"],
        ),
        sm.Cell("pens", "react", note="RunDirError: busy"),
    ]
    md = sm.render(cells, "## header")
    lines = md.splitlines()
    assert lines[0] == "## header"
    bare = next(x for x in lines if x.startswith("| humaneval | bare |"))
    assert "**1/2**" in bare and "| – |" in bare  # bare verifies nothing
    # bare generated 200 tokens in 10 s: 20 tokens/s is the rate the floor is measured at
    assert "| 1.0 | 1,000 (0) / 100 | 5.0 s | 10.0 s | 1.0× |" in bare
    assert "(20.0 tokens/s)" in md
    veri = next(x for x in lines if x.startswith("| humaneval | verimap |"))
    assert "**1/1** | 1 | 0 | 0 | 1 |" in veri and "| 8.0 | 8,000 (6,000) / 800 |" in veri
    assert veri.endswith("| 2.5× |")  # 800 tokens take 40 s at 20/s; it took 100
    assert "| pens | react | – (RunDirError: busy) |" in md
    assert "| HumanEval/0 | ✓ 4 s, 1 | ✓ 100 s, 8 |" in md
    assert "| HumanEval/1 | ✗ 6 s, 1 | error |" in md
    assert "### pens" not in md  # nothing finished there: no per-task table


def test_max_nodes_option_is_checked_and_none_means_the_local_default():
    assert sm.parse_args([]).max_nodes is None
    assert sm.parse_args(["--max-nodes", "1"]).max_nodes == 1
    with pytest.raises(SystemExit):
        sm.parse_args(["--max-nodes", "-1"])
