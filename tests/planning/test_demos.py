"""The staged planner's demonstrations: every one is a valid plan, written in the stages and
with the checks of its domain, and the problems they were written for are known by index."""

import json

import pytest

from verimap.base.check_names import DOMAIN_CHECKS
from verimap.base.plan import LLMVF, CheckVF
from verimap.planning.demos import DOMAINS, held_out, nearest, pool
from verimap.planning.plan import parse_plan
from verimap.planning.plan_checks import plan_quality_problems
from verimap.planning.plan_fixes import join_extra_sinks
from verimap.planning.staged_schema import ANSWER_TYPES, FINAL, make_node, node_schema, outline


def assembled(demo, domain):
    steps = [*outline({"steps": demo.steps}, set()), (FINAL, {"answer": ANSWER_TYPES[domain]})]
    return parse_plan(
        join_extra_sinks({"nodes": [make_node(i, o, demo.nodes[i]) for i, o in steps]})
    )


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_demonstration_is_a_valid_plan_its_grammar_admits(domain):
    import jsonschema

    for demo in pool(domain).demos:
        plan = assembled(demo, domain)
        assert not plan_quality_problems(plan, answer_types=(ANSWER_TYPES[domain],)), demo.index
        assert [n.id for n in plan.nodes] == [s["id"] for s in demo.steps] + [FINAL]
        available: list[str] = []
        for n in plan.nodes:
            reply = demo.nodes[n.id]
            schema = node_schema(
                domain,
                list(n.outputs),
                available,
                min_criteria=int(domain == "qa" and n.id == FINAL),
            )
            jsonschema.validate(reply, schema)
            available += [f"{n.id}.{o}" for o in n.outputs]
            assert {v.check for v in n.verification if isinstance(v, CheckVF)} <= set(
                DOMAIN_CHECKS[domain]
            )
        assert (
            any(isinstance(v, LLMVF) for n in plan.nodes for v in n.verification)
            or domain == "math"
        )


def test_the_multihoprag_demonstrations_cover_every_question_type_and_are_held_out():
    qa = pool("qa")
    assert {d.kind for d in qa.demos} == {
        "inference_query",
        "comparison_query",
        "temporal_query",
        "null_query",
    }
    assert {d.index for d in qa.demos} == {944, 1016, 809, 1465, 2097, 242, 587}
    assert held_out("qa") == {d.index for d in qa.demos} | set(qa.development)
    assert len(qa.development) == 5
    assert sum(len(d.steps) >= 1 for d in qa.demos) >= 5  # most decompose: one node a source


def test_the_nearest_demonstrations_come_first():
    task = "Did TechCrunch report on Flipboard's ActivityPub integration before The Verge did?"
    assert nearest(task, "qa", 1)[0].index == 242
    assert nearest("A concert ticket costs $40 and a discount ...", "math", 2)[0].index == 40
    assert len(nearest(task, "qa", 10)) == len(pool("qa").demos)
    with pytest.raises(ValueError, match="no demonstrations for domain 'poetry'"):
        pool("poetry")
    assert json.loads(json.dumps(pool("qa").model_dump()))["domain"] == "qa"
