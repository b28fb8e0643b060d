"""The staged planner on the REAL local model server (the 0.5B in CI), on a MultiHop-RAG
question of the fixture (the official schema): the model writes a plan of several nodes with
their VFs under the grammar, executors search the fixture corpus, and a natural-language VF
goes to the judge, whose verdict the trace keeps."""

from pathlib import Path

import pytest

import verimap
from verimap.base.accounting import Budget
from verimap.base.events import read_trace
from verimap.base.plan import LLMVF
from verimap.config import Execution, Loop, RunConfig, Sampling, Verify
from verimap.planning.planner import PLANNER_SETTINGS, LLMPlanner, PlannerOptions
from verimap.policies.small_model import ReplyCap
from verimap.testing import HashingEmbedderDouble

pytestmark = pytest.mark.localmodel
np = pytest.importorskip("numpy")
# The MultiHop-RAG fixture: hand-written articles and questions in the official schema.
SAMPLES = Path(__file__).resolve().parents[2] / "datasets"
# About two minutes on the 0.5B with 2 free cores (four planner calls, two nodes, one judge).
TIME_LIMIT_S = 900


async def test_the_model_plans_in_stages_and_the_judge_judges_a_criterion_it_wrote(
    local_models, tmp_path
):
    from verimap.evals import data as d
    from verimap.evals.retrieval import CorpusIndex
    from verimap.evals.tasksets import MultiHopRAG
    from verimap.evals.tools import qa_tools

    _, corpus = d.load_multihoprag(d.resolve("multihoprag", SAMPLES))
    index = CorpusIndex.build(corpus, embedder=HashingEmbedderDouble(), cache_dir=tmp_path)
    bench = MultiHopRAG(SAMPLES, embedder=HashingEmbedderDouble())
    task = next(t for t in bench.tasks() if t.meta["question_type"] == "comparison_query")
    tools = qa_tools(index)
    # Every reply capped (a small model in a repetition loop runs to the cap), greedy sampling.
    models = {role: ReplyCap(m, 200) for role, m in local_models.items()}
    planner = LLMPlanner(
        models["planner"],
        tools,
        PlannerOptions(
            domain="qa",
            decoding="staged",
            min_nodes=2,
            max_nodes=2,
            max_repairs=1,
            settings=PLANNER_SETTINGS.replace(temperature=0.0),
            fallback=False,
        ),
    )
    # One pass, every node run (`fail_accepted`) and every criterion judged (`full_feedback`),
    # the judge reasoning in one reply (no search loop): bounded, whatever the 0.5B answers.
    config = RunConfig(
        loop=Loop(max_retries=1, max_iterations=1, fail_accepted=True),
        sampling=Sampling(temperature=0),
        execution=Execution(executor_max_steps=2),
        verify=Verify(full_feedback=True, judge_tools=False),
        policies=[],
        budget=Budget(max_llm_calls=30, timeout_s=TIME_LIMIT_S),
    )
    coord = verimap.build(models, None, tools, config=config, planner=planner, trace_dir=tmp_path)
    r = await coord.run(task.prompt)

    assert r.usage.roles["planner"].calls >= 3, r.error  # the outline and the two nodes
    assert r.plans, r.error
    plan = r.plans[0]
    assert len(plan.nodes) == 2 and plan.fallback_reason is None and plan.rule is None
    criteria = {(n.id, v.name) for n in plan.nodes for v in n.verification if isinstance(v, LLMVF)}
    assert criteria, plan.to_json()
    judged = [
        (nid, v.name, v.outcome)
        for nid, rep in r.nodes.items()
        for a in rep.attempts
        for v in a.verdicts
        if v.type == "llm" and (nid, v.name) in criteria
    ]
    assert judged and all(o in ("PASS", "FAIL", "ERROR") for *_, o in judged), (judged, r.error)
    events = read_trace(tmp_path / f"{r.run_id}.jsonl")
    labels = [e.purpose for e in events if e.type == "model_call" and e.role == "judge"]
    assert any(p and p.startswith("judge:") for p in labels), labels
    recorded = {
        (e.node_id, e.name) for e in events if e.type == "vf_verdict" and e.vf_type == "llm"
    }
    assert {(nid, name) for nid, name, _ in judged} <= recorded
