import json
import shutil

import pytest
from click.testing import CliRunner

from verimap.base import events as ev
from verimap.base.messages import to_openai
from verimap.cli import main
from verimap.evals.preferences import (
    ExportError,
    preference_pairs,
    record_labels,
    trace_labels,
)
from verimap.evals.runner import run_eval
from verimap.evals.tasksets import get_benchmark
from verimap.planning.fallback import fallback_plan
from verimap.testing import ScriptedModel, need, oracle_models

from .conftest import SAMPLES

GOOD = {
    "nodes": [
        {
            "id": "solve",
            "name": "Solve",
            "instruction": "Solve the task and give the final answer.",
            "inputs": ["USER_TASK"],
            "outputs": {"answer": "string"},
            "verification": [
                {
                    "name": "nonempty",
                    "type": "python",
                    "code": "assert outputs['answer'].strip(), 'the answer is empty'",
                },
                {
                    "name": "answers_task",
                    "type": "llm",
                    "content": "The answer addresses the task.",
                },
            ],
        }
    ],
}


def _bad(tag: str) -> dict:
    """A plan whose Python VF fails on every answer the oracle executor gives."""
    return {
        "nodes": [
            {
                "id": "solve",
                "name": "Solve",
                "instruction": f"Answer the task ({tag}).",
                "inputs": ["USER_TASK"],
                "outputs": {"answer": "string"},
                "verification": [
                    {
                        "name": "marker",
                        "type": "python",
                        "code": f"assert '{tag}' in outputs['answer'], 'no {tag} marker'",
                    }
                ],
            }
        ],
    }


def _planner(tasks, script):
    """A planner double: `script[task_index]` is (first plan, replanned plan)."""

    def reply(req):
        if req.response_schema is None:
            return "Let me work the task out first."
        text = " ".join(m.content for m in req.messages)
        i = next(i for i, t in enumerate(tasks) if t.prompt in text)
        first, replanned = script[i]
        return replanned if "The previous plan for this task failed" in text else first

    return ScriptedModel(reply, name="planner-double")


async def _run(out, sandbox, script, limit):
    bench = get_benchmark("gsm8k", SAMPLES)
    tasks = bench.tasks()[:limit]
    models = {**oracle_models(tasks), "planner": _planner(tasks, script)}
    await run_eval(
        bench,
        "verimap",
        models,
        sandbox,
        out,
        limit=limit,
        progress=False,
        max_concurrency=2,
        config={"loop": {"max_retries": 1, "max_iterations": 2}},
    )
    return tasks, models["planner"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run dir A: task 0 fails its first plan and verifies on the replan, task 1 verifies at
    once. Run dir B: task 0 verifies at once, tasks 1 and 2 fail both of their plans."""
    import asyncio
    import warnings

    from verimap.sandbox.process import ProcessSandbox

    root = tmp_path_factory.mktemp("pref")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sandbox = ProcessSandbox()
    a, b = root / "a", root / "b"
    tasks, planner = asyncio.run(_run(a, sandbox, [(_bad("alpha"), GOOD), (GOOD, GOOD)], limit=2))
    asyncio.run(
        _run(
            b,
            sandbox,
            [(GOOD, GOOD), (_bad("beta"), _bad("gamma")), (_bad("beta"), _bad("gamma"))],
            3,
        )
    )
    return {"a": a, "b": b, "root": root, "tasks": tasks, "planner": planner}


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _plan_text(msgs):
    assert len(msgs) == 1 and msgs[0]["role"] == "assistant"
    return json.loads(msgs[0]["content"])


def _invoke(*args):
    return CliRunner().invoke(main, ["export", "preferences", *args], catch_exceptions=False)


def test_export_pairs_a_verified_plan_with_failed_ones_of_the_same_task(runs, tmp_path):
    a_recs = {r["task_id"]: r for r in _lines(runs["a"] / "results.jsonl")}
    assert a_recs["gsm8k/0"]["verified"] and a_recs["gsm8k/0"]["correct"]
    assert a_recs["gsm8k/0"]["iterations"] == 2 and len(a_recs["gsm8k/0"]["plans"]) == 2
    out = tmp_path / "pairs.jsonl"
    r = _invoke(str(runs["a"]), str(runs["b"]), "--out-file", str(out), "--metadata")
    assert r.exit_code == 0, r.output
    assert "3 task(s) seen, 3 pair(s) written, 1 task(s) without a pair" in r.output

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(set(row) == {"prompt", "chosen", "rejected", "metadata"} for row in rows)
    by_task = {}
    for row in rows:
        meta = row["metadata"]
        task = next(t for t in runs["tasks"] if t.id == meta["task_id"])
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert task.prompt in row["prompt"][1]["content"]
        chosen, rejected = _plan_text(row["chosen"]), _plan_text(row["rejected"])
        assert chosen != rejected and "edges" not in chosen
        assert chosen["nodes"][0]["instruction"] == GOOD["nodes"][0]["instruction"]
        by_task.setdefault(meta["task_id"], []).append(rejected["nodes"][0]["instruction"])
        assert meta["chosen_from"].split(":")[1].endswith(meta["task_id"])
        assert meta["rejected_from"].split(":")[1].endswith(meta["task_id"])
    # Task 0: the failed first plan of the same run. Task 1: chosen in A, rejected from B.
    assert by_task == {
        "gsm8k/0": ["Answer the task (alpha)."],
        "gsm8k/1": ["Answer the task (beta).", "Answer the task (gamma)."],
    }


def test_the_prompt_is_the_one_the_planner_was_sent(runs):
    pairs, _ = preference_pairs([runs["a"]])
    (row,) = pairs
    task0 = runs["tasks"][0].prompt
    first = next(r for r in runs["planner"].requests if task0 in r.messages[-1].content)
    assert to_openai(first.messages) == row["prompt"]


def test_output_has_exactly_the_three_dpo_fields_and_no_duplicates(runs, tmp_path):
    out = tmp_path / "p.jsonl"
    r = _invoke(str(runs["a"]), str(runs["b"]), str(runs["a"]), "--out-file", str(out))
    assert r.exit_code == 0 and "3 pair(s) written" in r.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(list(row) == ["prompt", "chosen", "rejected"] for row in rows)
    keys = [json.dumps(row, sort_keys=True) for row in rows]
    assert len(keys) == len(set(keys)) == 3


def test_hf_datasets_reads_the_file(runs, tmp_path):
    try:
        import datasets
    except ImportError:
        datasets = None
    # The repo's datasets/ folder imports as a namespace package when the real one is missing.
    need(hasattr(datasets, "Dataset"), "Hugging Face `datasets` (the dev extra) is not installed")
    out = tmp_path / "p.jsonl"
    pairs, _ = preference_pairs([runs["a"], runs["b"]])
    out.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    ds = datasets.Dataset.from_json(str(out))
    assert ds.num_rows == 3 and set(ds.column_names) == {"prompt", "chosen", "rejected"}
    assert ds[0]["chosen"][0]["role"] == "assistant" and ds[0]["prompt"][0]["role"] == "system"


def test_pairs_never_cross_prompts(runs, tmp_path):
    """A map-v run prompts the planner without VFs: its plans pair among themselves, never with
    a verimap run's (task 1 verified only under map-v's prompt and failed only under verimap's)."""
    other = tmp_path / "a-map-v"
    shutil.copytree(runs["a"], other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["method"], cfg["run_config"]["verify"]["verification"] = "map-v", "instruction"
    (other / "config.json").write_text(json.dumps(cfg))
    pairs, summary = preference_pairs([other, runs["b"]], metadata=True)
    assert summary.tasks == 3 and summary.without_pair == 2
    (row,) = pairs
    assert row["metadata"]["task_id"] == "gsm8k/0"
    assert {
        row["metadata"]["chosen_from"].split(":")[0],
        row["metadata"]["rejected_from"].split(":")[0],
    } == {str(other)}
    assert "verification" not in row["chosen"][0]["content"]


def test_without_traces_the_records_give_the_same_pairs(runs, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(runs["a"], a)
    shutil.copytree(runs["b"], b)
    shutil.rmtree(a / "traces")
    shutil.rmtree(b / "traces")
    pairs, summary = preference_pairs([a, b])
    with_traces, _ = preference_pairs([runs["a"], runs["b"]])
    assert pairs == with_traces and summary.pairs == 3
    assert any("no trace" in n for n in summary.notes)


def test_a_path_that_is_no_run_dir_is_a_clear_error(runs, tmp_path):
    (tmp_path / "empty").mkdir()
    for bad in (tmp_path / "missing", tmp_path / "empty"):
        r = _invoke(str(runs["a"]), str(bad), "--out-file", str(tmp_path / "p.jsonl"))
        assert r.exit_code == 2
        assert f"{bad}" in r.output and "not an eval run directory" in r.output
    assert not (tmp_path / "p.jsonl").exists()
    with pytest.raises(ExportError, match=r"results\.jsonl"):
        preference_pairs([tmp_path / "empty"])


def test_trace_labels_follow_the_coordinator():
    plan, failed = ev.Plan(plan={}), ev.NodeFinish(status="failed")
    events = [
        ev.RunStart(task="t"),
        plan,  # replaced: failed
        failed,
        ev.Replan(failed_node="a", failure={}),
        plan,  # kept: the executor failed, not the plan
        failed,
        ev.PlanKept(failed_node="a"),
        ev.PlanFallback(reason="x"),
        plan,
        ev.NodeFinish(status="verified"),
        ev.Finish(status="success"),
    ]
    assert trace_labels(events) == (["failed", None, "verified"], [False, False, True])
    ran_out = [plan, failed, ev.Finish(status="failed")]
    assert trace_labels(ran_out)[0] == ["failed"]
    budget = [plan, ev.Finish(status="budget_exhausted")]
    assert trace_labels(budget)[0] == [None]


def test_record_labels_without_a_trace():
    plans = [{}, {}]
    assert record_labels({"plans": plans, "verified": True}) == ["failed", "verified"]
    assert record_labels({"plans": plans, "status": "failed"}) == ["failed", "failed"]
    assert record_labels({"plans": plans, "status": "budget_exhausted"}) == ["failed", None]


def test_fallback_plans_pair_only_when_asked(runs, tmp_path):
    """Task 1 of run B failed twice; here the fallback plan verifies it instead of the second
    plan: a fallback is no plan the model wrote, so it is chosen only with include_fallbacks."""
    b = tmp_path / "b"
    shutil.copytree(runs["b"], b)
    shutil.rmtree(b / "traces")
    task = runs["tasks"][1]
    recs = _lines(b / "results.jsonl")
    for rec in recs:
        if rec["task_id"] == task.id:
            fb = fallback_plan(task.prompt, "math")
            rec["plans"][-1] = fb.model_dump(mode="json", by_alias=True)
            rec.update(status="success", verified=True, correct=True)
    (b / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert preference_pairs([b])[0] == []
    pairs, _ = preference_pairs([b], include_fallbacks=True)
    assert len(pairs) == 1
    assert _plan_text(pairs[0]["chosen"])["nodes"][0]["id"] == "solve"
    assert "beta" in pairs[0]["rejected"][0]["content"]


SECRET = "PRIVATE-TASK-TEXT-never-exported"


def _private_trace(path):
    """A trace of somebody's private run: its task text must not reach the exported data."""
    events = [
        ev.RunStart(run_id="r", task=SECRET),
        ev.Plan(run_id="r", plan={}),
        ev.Finish(run_id="r", status="success"),
    ]
    path.write_text("".join(e.model_dump_json() + "\n" for e in events))


def test_a_trace_outside_the_run_directory_is_never_read(runs, tmp_path):
    """A shared run directory whose records name traces elsewhere (an absolute path, `..`, a
    symlink out): each such record is skipped and reported, and no outside file is read."""
    a = tmp_path / "shared"
    shutil.copytree(runs["a"], a)
    private = tmp_path / "private"
    private.mkdir()
    _private_trace(private / "run.jsonl")
    (private / "passwd").write_text(f"root:x:0:0:{SECRET}:/root:/bin/bash\n")
    (a / "traces" / "out").symlink_to(private)
    escapes = [str(private / "run.jsonl"), "../private/passwd", "traces/out/run.jsonl"]
    recs = _lines(a / "results.jsonl")
    assert len(recs) == 2
    recs.append({**recs[0], "key": "r1/gsm8k/0", "run": 1})
    for rec, rel in zip(recs, escapes, strict=True):
        rec["trace"] = rel
    (a / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    pairs, summary = preference_pairs([a], metadata=True)
    assert pairs == [] and summary.skipped_records == 3
    assert len(summary.warnings) == 3
    assert all("outside the run directory" in w for w in summary.warnings)
    assert all(repr(rel) in w for rel, w in zip(escapes, summary.warnings, strict=True))
    assert SECRET not in json.dumps([pairs, summary.notes, summary.warnings])
    out = tmp_path / "p.jsonl"
    r = _invoke(str(a), "--out-file", str(out), "--verbose")
    assert r.exit_code == 0 and SECRET not in r.output + out.read_text()
    assert r.output.count("warning: ") == 3 and "3 record(s) skipped" in r.output
