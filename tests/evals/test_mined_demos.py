"""`verimap export demos`: a plan the model wrote that verified with the right answer becomes a
demonstration of the staged planner, in the stages it writes; nothing else does."""

import json
from typing import Any

import pytest
from click.testing import CliRunner

from verimap.base import events as ev
from verimap.cli import main
from verimap.evals.mined_demos import NOT_VERIFIED, RULE, WRONG, mine_demos, write_demos
from verimap.evals.run_plans import ExportError
from verimap.evals.tasksets import GSM8K_NOTE, QA_NOTE
from verimap.planning.demos import DemoPool, pool
from verimap.planning.fallback import whole_task_plan
from verimap.planning.plan import parse_plan
from verimap.planning.plan_fixes import join_extra_sinks
from verimap.planning.staged_prompts import render_demos
from verimap.planning.staged_schema import ANSWER_TYPES, FINAL, make_node, outline

QUESTION = "A shop sells 3 pens at $2 each and 2 books at $5 each. How much does it take in?"
STEPS = [{"id": "pens", "outputs": [{"name": "pen_total", "type": "number"}]}]
NODES: dict[str, dict[str, Any]] = {
    "pens": {
        "instruction": "Work out what the 3 pens cost together.",
        "inputs": ["USER_TASK"],
        "checks": [{"check": "arithmetic"}],
        "criteria": [],
    },
    "final": {
        "instruction": "Add what the 2 books cost to the pens' total.",
        "inputs": ["USER_TASK", "pens.pen_total"],
        "checks": [
            {"check": "arithmetic"},
            {"check": "number_in_range", "args": {"output": "answer", "min": 0, "max": 100}},
        ],
        "criteria": ["The answer is more than the books alone cost."],
    },
}
ONE_NODE = {"final": {**NODES["final"], "inputs": ["USER_TASK"]}}


def staged_plan(steps, nodes, domain):
    """The plan the staged planner assembles from these replies, as a record keeps it."""
    parts = [*outline({"steps": steps}, set()), (FINAL, {"answer": ANSWER_TYPES[domain]})]
    raw = join_extra_sinks({"nodes": [make_node(i, o, nodes[i]) for i, o in parts]})
    return parse_plan(raw).model_dump(mode="json", by_alias=True)


def task(task_id, prompt, plans, *, verified=True, correct=True, made_by=None, meta=None):
    """A record and its trace: `plans` in order, each replaced by the next after a failed node;
    `made_by` ("rule" or "fallback") makes the last plan one no model wrote."""
    events: list[ev.AnyEvent] = [ev.RunStart(task=prompt)]
    for i, _ in enumerate(plans):
        if i == len(plans) - 1 and made_by == "rule":
            events.append(ev.PlanRule(rule="one-node plan"))
        if i == len(plans) - 1 and made_by == "fallback":
            events.append(ev.PlanFallback(reason="no valid plan"))
        events.append(ev.Plan(plan={}))
        if i < len(plans) - 1:
            events += [ev.NodeFinish(status="failed"), ev.Replan(failed_node="x", failure={})]
    if not verified:
        events.append(ev.NodeFinish(status="failed"))
    events.append(ev.Finish(status="success" if verified else "failed"))
    rec = {
        "task_id": task_id,
        "status": "success" if verified else "failed",
        "verified": verified,
        "correct": correct,
        "plans": plans,
        "meta": meta or {},
    }
    return rec, events


def run_dir(path, benchmark, tasks, *, method="verimap", verification="full"):
    """An eval run directory as `verimap eval --out` leaves it, holding `tasks`."""
    (path / "traces" / "run0").mkdir(parents=True)
    config = {
        "benchmark": benchmark,
        "method": method,
        "run_config": {"verify": {"verification": verification}},
    }
    (path / "config.json").write_text(json.dumps(config))
    lines = []
    for rec, events in tasks:
        name = rec["task_id"].replace("/", "_") + ".jsonl"
        (path / "traces" / "run0" / name).write_text(
            "".join(e.model_dump_json() + "\n" for e in events)
        )
        lines.append(
            {
                "key": f"r0/{rec['task_id']}",
                "run": 0,
                "benchmark": benchmark,
                "method": method,
                "trace": f"traces/run0/{name}",
                **rec,
            }
        )
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


@pytest.fixture
def gsm8k_run(tmp_path):
    good = staged_plan(STEPS, NODES, "math")
    other = staged_plan([], ONE_NODE, "math")
    prompt = QUESTION + GSM8K_NOTE
    return run_dir(
        tmp_path / "gsm8k",
        "gsm8k",
        [
            task("gsm8k/3", prompt, [other, good]),  # verified on its replan
            task("gsm8k/4", "Four? " + prompt, [good], correct=False),
            task("gsm8k/5", "Five? " + prompt, [good], verified=False, correct=False),
            task("gsm8k/6", "Six? " + prompt, [good], made_by="fallback"),
            task("gsm8k/7", "Seven? " + prompt, [good], made_by="rule"),
        ],
    )


def test_only_a_verified_right_plan_the_model_wrote_becomes_a_demonstration(gsm8k_run):
    got, summary = mine_demos([gsm8k_run], "math")
    (demo,) = got.demos
    assert (demo.index, demo.kind, demo.task) == (3, "", QUESTION)
    assert demo.steps == STEPS and demo.nodes == NODES
    assert (got.domain, got.benchmark, got.development) == ("math", "gsm8k", [])
    assert "gsm8k" in got.pool and got.pool.startswith("Mined by `verimap export demos`")
    assert summary.reasons == {WRONG: 1, NOT_VERIFIED: 1, RULE: 2}
    assert (summary.runs, summary.records, summary.demos) == (1, 5, 1)


def test_a_mined_demo_is_a_shipped_one_when_the_planner_wrote_that_plan(tmp_path):
    """A shipped demonstration's plan, as the staged planner assembles it, mined back: the same
    demonstration, field for field, and the same prompt text."""
    shipped = next(d for d in pool("qa").demos if d.index == 242)
    plan = staged_plan(shipped.steps, shipped.nodes, "qa")
    rec = task("multihoprag/242", shipped.task + QA_NOTE, [plan], meta={"question_type": "x"})
    rec[0]["meta"]["question_type"] = shipped.kind
    d = run_dir(tmp_path / "qa", "multihoprag", [rec])
    got, _ = mine_demos([d], "qa")
    assert got.demos == [shipped]
    out = tmp_path / "demos.json"
    write_demos(got, out)
    again = DemoPool.model_validate(json.loads(out.read_text()))
    assert again == got
    assert render_demos(again.demos) == render_demos([shipped])
    assert render_demos(again.demos, with_vfs=False) == render_demos([shipped], with_vfs=False)


def test_one_demonstration_per_task_the_smaller_plan_first(tmp_path, gsm8k_run):
    small = staged_plan([], ONE_NODE, "math")
    prompt = QUESTION + GSM8K_NOTE
    d = run_dir(tmp_path / "again", "gsm8k", [task("gsm8k/3", prompt, [small])])
    got, summary = mine_demos([gsm8k_run, d], "math")
    (demo,) = got.demos
    assert demo.steps == [] and summary.duplicates == 1
    first, _ = mine_demos([d, gsm8k_run], "math")
    assert first.demos == got.demos


def test_a_plan_the_staged_form_cannot_say_and_a_one_node_rule_plan_are_left_out(tmp_path):
    """A Python VF is no catalog check; the whole task as one node, recorded without its rule
    event, is still recognised as no plan the model wrote."""
    python = staged_plan([], ONE_NODE, "math")
    python["nodes"][0]["verification"].append(
        {"name": "positive", "type": "python", "code": "assert outputs['answer'] > 0"}
    )
    prompt = (
        "Write a function to add two numbers.\nYour code should pass this test:\n\n"
        "assert add(1, 2) == 3\n\nThe final answer is the complete Python code of the function "
        "`add` (with any imports it needs)."
    )
    rule = whole_task_plan(prompt, "programming").model_dump(mode="json", by_alias=True)
    math_dir = run_dir(tmp_path / "m", "gsm8k", [task("gsm8k/1", QUESTION, [python])])
    code_dir = run_dir(tmp_path / "p", "mbpp", [task("mbpp/12", prompt, [rule])])
    with pytest.raises(ExportError, match=r"1 ran a plan the staged form cannot say"):
        mine_demos([math_dir], "math")
    with pytest.raises(ExportError, match=r"1 ran a fallback or rule plan"):
        mine_demos([code_dir], "programming")


def test_runs_of_another_domain_or_two_benchmarks_or_no_run_are_refused(tmp_path, gsm8k_run):
    with pytest.raises(ExportError, match=r"a run of gsm8k, a math benchmark, not qa"):
        mine_demos([gsm8k_run], "qa")
    plan = staged_plan([], ONE_NODE, "math")
    a = run_dir(tmp_path / "a", "mbpp", [task("mbpp/12", "x", [plan])])
    b = run_dir(tmp_path / "b", "humaneval", [task("HumanEval/3", "y", [plan])])
    with pytest.raises(ExportError, match=r"of humaneval and mbpp: a pool's indices count one"):
        mine_demos([a, b], "programming")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ExportError, match=r"not an eval run directory"):
        mine_demos([tmp_path / "empty"], "math")


def test_runs_without_a_qualifying_plan_say_why(tmp_path):
    plan = staged_plan(STEPS, NODES, "math")
    d = run_dir(
        tmp_path / "r",
        "gsm8k",
        [
            task("gsm8k/1", "One?", [plan], correct=False),
            task("gsm8k/2", "Two?", [plan], verified=False, correct=False),
        ],
    )
    react = run_dir(
        tmp_path / "react", "gsm8k", [task("gsm8k/3", "Three?", [plan])], method="react"
    )
    map_ = run_dir(
        tmp_path / "map",
        "gsm8k",
        [task("gsm8k/4", "Four?", [plan])],
        method="map",
        verification="none",
    )
    with pytest.raises(ExportError) as e:
        mine_demos([d, react, map_], "math")
    msg = str(e.value)
    assert msg.startswith("no plan qualifies as a demonstration: 3 run(s) and 4 record(s) seen")
    assert "1 verified a wrong answer" in msg and "1 did not end verified" in msg
    assert "1 ran plans without VFs" in msg and "1 skipped (no LLM planner" in msg


def _export(*args):
    return CliRunner().invoke(main, ["export", "demos", *args], catch_exceptions=False)


def test_the_command_writes_a_pool_and_refuses_what_it_cannot_use(tmp_path, gsm8k_run):
    out = tmp_path / "pool" / "demos.json"
    r = _export(str(gsm8k_run), "--domain", "math", "--out-file", str(out))
    assert r.exit_code == 0, r.output
    assert "1 run(s), 5 record(s) seen, 1 demonstration(s) written" in r.output
    assert [d.index for d in DemoPool.model_validate_json(out.read_text()).demos] == [3]
    r = _export(str(gsm8k_run), "--domain", "qa", "--out-file", str(tmp_path / "qa.json"))
    assert r.exit_code == 2 and "not qa" in r.output and not (tmp_path / "qa.json").exists()
    r = _export(str(tmp_path / "missing"), "--domain", "math", "--out-file", str(out))
    assert r.exit_code == 2 and "not a directory" in r.output
    r = _export(str(gsm8k_run), "--domain", "poetry", "--out-file", str(out))
    assert r.exit_code == 2 and "'poetry' is not one of" in r.output


def test_a_demonstration_states_its_problem_as_the_shipped_ones_do():
    from verimap.evals.tasksets import GSM8K, MBPP, MultiHopRAG, get_benchmark, task_index

    from .conftest import SAMPLES

    prompts = {t.id: t.prompt for t in MBPP(SAMPLES / "full", split="sanitized:prompt").tasks()}
    for demo in pool("programming").demos:
        assert MBPP.problem(prompts[f"mbpp/{demo.index}"]) == demo.task
    gsm = get_benchmark("gsm8k", SAMPLES).tasks()[0]
    assert GSM8K.problem(gsm.prompt) + GSM8K_NOTE == gsm.prompt
    qa = MultiHopRAG(SAMPLES)
    assert MultiHopRAG.problem(qa.tasks()[0].prompt) == qa.queries[0].query
    assert MBPP.problem("Write a function.") == "Write a function."
    assert [task_index(i) for i in ("gsm8k/12", "HumanEval/7", "mbpp/602", "capitals/x")] == [
        12,
        7,
        602,
        None,
    ]
