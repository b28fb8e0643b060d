"""One test per validation problem: each plan error gets its own precise message."""

import json

import pytest

from verimap.base.plan import PlanError, plan_json_schema, to_mermaid
from verimap.planning.plan import parse_plan


def node(id, inputs=("USER_TASK",), outputs=("x",), vfs=(), **kw):
    return {
        "id": id,
        "instruction": f"do {id}",
        "inputs": list(inputs),
        "outputs": list(outputs),
        "verification": list(vfs),
        **kw,
    }


def problems(data) -> list[str]:
    with pytest.raises(PlanError) as ei:
        parse_plan(data)
    return ei.value.problems


def test_valid_plan_gets_implied_edges_and_final_node():
    p = parse_plan({"nodes": [node("a"), node("b", inputs=["<a.x>"], outputs=["y"])]})
    assert {e.as_tuple() for e in p.edges} == {("a", "b")}
    assert p.node("b").inputs == ["a.x"]
    assert p.final_node().id == "b"


def test_duplicate_ids():
    assert any(
        "duplicate node id 'a'" in p for p in problems({"nodes": [node("a"), node("a", inputs=[])]})
    )


def test_input_names_unknown_node():
    probs = problems({"nodes": [node("a", inputs=["zz.x"])]})
    assert any("unknown node 'zz'" in p for p in probs)


def test_input_names_missing_variable():
    probs = problems({"nodes": [node("a"), node("b", inputs=["a.nope"])]})
    assert any("node 'a' has no output 'nope'" in p for p in probs)


def test_edge_contradicting_inputs():
    data = {"nodes": [node("a"), node("b", inputs=["a.x"])], "edges": [{"from": "b", "to": "a"}]}
    probs = problems(data)
    assert any("contradicts" in p for p in probs)


def test_cycle_names_its_nodes():
    data = {
        "nodes": [node("a", inputs=["c.x"]), node("b", inputs=["a.x"]), node("c", inputs=["b.x"])]
    }
    cyc = [p for p in problems(data) if p.startswith("cycle")]
    assert cyc and all(n in cyc[0] for n in "abc")


def test_several_sinks_without_final_flag():
    probs = problems({"nodes": [node("a"), node("b")]})
    assert any(
        "no final node: several nodes (a, b) have no node reading their outputs" in p for p in probs
    )


def test_several_final_flags():
    probs = problems({"nodes": [node("a", final=True), node("b", inputs=["a.x"], final=True)]})
    assert any("several nodes are flagged final" in p for p in probs)


def test_final_flag_resolves_several_sinks():
    p = parse_plan({"nodes": [node("a"), node("b", final=True)]})
    assert p.final_node().id == "b"


@pytest.mark.parametrize("data", [{"nodes": []}, {}, {"edges": []}])
def test_empty_plan(data):
    assert any("empty plan" in p for p in problems(data))


def test_duplicate_vf_names():
    vfs = [
        {"name": "v", "type": "python", "code": "assert True"},
        {"name": "v", "type": "llm", "content": "c"},
    ]
    assert any(
        "duplicate verification name 'v'" in p for p in problems({"nodes": [node("a", vfs=vfs)]})
    )


def test_python_vf_that_does_not_compile():
    vfs = [{"name": "v", "type": "python", "code": "assert (1"}]
    assert any(
        "does not compile" in p and "'v'" in p for p in problems({"nodes": [node("a", vfs=vfs)]})
    )


def test_all_problems_reported_at_once():
    vfs = [{"name": "v", "type": "python", "code": "def ("}]
    data = {"nodes": [node("a", vfs=vfs), node("a", inputs=[]), node("b", inputs=["q.x"])]}
    assert len(problems(data)) >= 3


@pytest.mark.parametrize("bad", ["not json", "[1, 2]", '{"nodes": [{"id": 3}]}', 42])
def test_garbage_never_crashes(bad):
    with pytest.raises(PlanError):
        parse_plan(bad)


def test_schema_and_mermaid():
    schema = plan_json_schema()
    assert "nodes" in schema["properties"]
    p = parse_plan(json.dumps({"nodes": [node("a"), node("b", inputs=["a.x"])]}))
    m = to_mermaid(p)
    assert "a -->|x| b" in m and 'b(["' in m


def test_vf_kind_is_inferred_when_type_is_missing_and_named_when_unknown():
    p = parse_plan(
        {
            "nodes": [
                node(
                    "a",
                    vfs=[
                        {"name": "p", "code": "assert outputs['x']"},
                        {"name": "j", "content": "x is right"},
                    ],
                )
            ]
        }
    )
    assert [v.type for v in p.nodes[0].verification] == ["python", "llm"]
    bad = problems({"nodes": [node("a", vfs=[{"name": "p", "type": "sql", "code": "x"}])]})
    assert bad == [
        'node \'a\' verification.0: a VF needs "type": "python" (with "code"), "llm" (with "content") or "check" (with "check", the name of a built-in or catalog check, and its "args")'
    ]


def test_schema_makes_constrained_models_write_vf_types_and_reference_inputs():
    import re

    defs = plan_json_schema()["$defs"]
    assert {"name", "type", "code"} <= set(defs["PythonVF"]["required"])
    assert {"name", "type", "content"} <= set(defs["LLMVF"]["required"])
    pattern = re.compile(defs["Node"]["properties"]["inputs"]["items"]["pattern"])
    assert pattern.match("USER_TASK") and pattern.match("extract.total")
    assert pattern.match("total")  # a bare name must stay closable; the validator explains it
    assert not pattern.match("12") and not pattern.match("3 boxes") and not pattern.match("a.b c")


def test_bare_input_name_gets_a_suggestion_when_one_node_outputs_it():
    p = problems({"nodes": [node("a", outputs=["g"]), node("b", inputs=["g"], outputs=["z"])]})
    assert "node 'b': input 'g' must be 'USER_TASK' or '<node_id>.<var>'; did you mean 'a.g'?" in p


@pytest.mark.parametrize("bad_id", ["a\n", "a\r\n", "\na", "a b"])
def test_a_node_id_with_a_newline_is_not_an_identifier(bad_id):
    # `re.match` with `$` accepted "a\n": ids reach file names, HTML and prompts, so match whole.
    probs = problems({"nodes": [node(bad_id)]})
    assert f"node id {bad_id!r} must be an identifier (letters, digits, _ or -)" in probs
