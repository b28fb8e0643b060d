"""The staged planner's demonstrations: every one is a valid plan, written in the stages and
with the checks of its domain, and the problems they were written for are known by index."""

import json

import pytest

from verimap.base.check_names import DOMAIN_CHECKS
from verimap.base.plan import LLMVF, CheckVF
from verimap.planning.demos import (
    DOMAINS,
    Demo,
    DemoFileError,
    DemoPool,
    held_out,
    merged,
    nearest,
    pool,
    read_pool,
)
from verimap.planning.plan import parse_plan
from verimap.planning.plan_checks import plan_quality_problems
from verimap.planning.plan_fixes import join_extra_sinks
from verimap.planning.staged_schema import (
    ANSWER_TYPES,
    FINAL,
    make_node,
    node_schema,
    outline,
    replies_of,
)


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


@pytest.mark.parametrize("domain", DOMAINS)
def test_replies_of_reads_every_demonstration_back_from_its_plan(domain):
    for demo in pool(domain).demos:
        assert replies_of(assembled(demo, domain), domain) == (demo.steps, demo.nodes)


def _two_nodes(first: str, first_vfs: list, final_vfs: list) -> dict:
    return {
        "nodes": [
            {
                "id": first,
                "instruction": "Look it up.",
                "inputs": ["USER_TASK"],
                "outputs": {"fact": "string"},
                "verification": first_vfs,
            },
            {
                "id": "solve",
                "instruction": "Answer from the fact.",
                "inputs": [f"{first}.fact"],
                "outputs": {"result": "string"},
                "verification": [
                    {
                        "name": "is_entity",
                        "type": "check",
                        "check": "entity",
                        "args": {"output": "result"},
                    },
                    *final_vfs,
                ],
            },
        ]
    }


def test_replies_of_names_what_the_staged_form_cannot_say():
    python = {"name": "long", "type": "python", "code": "assert len(outputs['fact'])"}
    sums = {"name": "sums", "type": "check", "check": "arithmetic"}
    with pytest.raises(ValueError) as e:
        replies_of(parse_plan(_two_nodes("Look", [python], [sums])), "qa")
    assert str(e.value) == (
        "node id 'Look' is not one the outline's grammar admits; node 'Look': long is a python "
        "VF, not a qa check; node 'solve': sums is a check arithmetic, not a qa check"
    )
    steps, nodes = replies_of(parse_plan(_two_nodes("look", [], [])), "qa")
    assert steps == [{"id": "look", "outputs": [{"name": "fact", "type": "string"}]}]
    assert set(nodes) == {"look", "final"} and nodes["final"]["inputs"] == ["look.fact"]
    assert nodes["final"]["checks"] == [{"check": "entity", "args": {"output": "answer"}}]


def test_a_pool_file_is_read_whole_or_refused_naming_the_file(tmp_path):
    good = pool("math").model_dump(mode="json")
    cases = {
        "missing.json": None,
        "text.json": "not json",
        "shape.json": json.dumps({**good, "demos": [{"task": "t"}]}),
        "domain.json": json.dumps({**good, "domain": "poetry"}),
    }
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
    expected = {
        "missing.json": "cannot read it",
        "text.json": "not JSON",
        "shape.json": r"not a pool of demonstrations \(demos\.0\.index: Field required",
        "domain.json": "domain 'poetry' is none of qa, math, programming",
    }
    for name, why in expected.items():
        with pytest.raises(DemoFileError, match=rf"demonstrations file {tmp_path / name}: {why}"):
            read_pool(tmp_path / name)
    (tmp_path / "math.json").write_text(json.dumps(good))
    assert read_pool(tmp_path / "math.json", "math") == pool("math")
    with pytest.raises(DemoFileError, match="holds math demonstrations; this run plans qa tasks"):
        read_pool(tmp_path / "math.json", "qa")


def test_a_pool_beside_the_shipped_one_is_searched_with_it():
    task = "Did TechCrunch report on Flipboard's ActivityPub integration before The Verge did?"
    mined = Demo(index=9, task=task.replace("Did", "Has"), nodes={"final": {}})
    copy = pool("qa").demos[0].model_copy(update={"index": 10})
    extra = DemoPool(domain="qa", pool="mined", benchmark="multihoprag", demos=[mined, copy])
    assert nearest(task, "qa", 1, extra) == [mined]
    assert nearest(task, "qa", 1) == [d for d in pool("qa").demos if d.index == 242]
    assert merged("qa", extra) == [*pool("qa").demos, mined]  # a shipped task is not repeated
    assert merged("math", extra) == pool("math").demos
