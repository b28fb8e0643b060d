"""A plan's shape: its graph read once, equal to what the plan's own methods answer."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verimap.base.plan import Edge, Node, Plan, PlanError, node_work


def make(nid: str, reads: list[str], final: bool = False) -> Node:
    return Node(
        id=nid,
        instruction=f"do {nid}",
        inputs=[f"{r}.v" for r in reads] or ["USER_TASK"],
        outputs={"v": "int", "w": "list[str]"},
        final=final,
    )


def edge(source: str, target: str) -> Edge:
    return Edge.model_validate({"from": source, "to": target})


@st.composite
def plans(draw) -> Plan:
    """A DAG of up to 8 nodes: inputs and bare edges point forward, the last node is final."""
    size = draw(st.integers(1, 8))
    nodes: list[Node] = []
    edges: list[Edge] = []
    for i in range(size):
        earlier = st.sets(st.integers(0, i - 1), max_size=3) if i else st.just(set())
        nodes.append(make(f"n{i}", [f"n{p}" for p in sorted(draw(earlier))], i == size - 1))
        edges.extend(edge(f"n{p}", f"n{i}") for p in sorted(draw(earlier)))
    return Plan(nodes=nodes, edges=edges)


def generations(plan: Plan, node_id: str) -> dict[str, int]:
    """How many edges each ancestor of `node_id` is from it at the fewest."""
    dist = {node_id: 0}
    changed = True
    while changed:
        changed = False
        for s, t in plan.edge_set():
            if t in dist and dist.get(s, len(plan.nodes) + 1) > dist[t] + 1:
                dist[s] = dist[t] + 1
                changed = True
    del dist[node_id]
    return dist


@given(plans())
def test_the_shape_says_what_the_plan_says(plan):
    shape = plan.shape()
    assert shape.plan is plan and list(shape.nodes) == [n.id for n in plan.nodes]
    assert shape.order == tuple(plan.topological_order())
    assert shape.final == plan.final_node().id
    for n in plan.nodes:
        assert shape.parents[n.id] == tuple(plan.parents(n.id))
        assert shape.children[n.id] == tuple(plan.children(n.id))
        assert shape.sources[n.id] == tuple(n.parent_ids())
        assert dict(shape.lineage[n.id]) == generations(plan, n.id)
        assert list(shape.lineage[n.id]) == plan.ancestors(n.id)
        for g in range(1, len(plan.nodes)):
            near = [a for a, gen in shape.lineage[n.id].items() if gen <= g]
            assert near == plan.ancestors(n.id, g)
        assert shape.input_types[n.id] == {f"{s}.{v}": "integer" for s, v in n.input_refs()}
        assert shape.work[n.id] == node_work(plan, n.id)


def test_a_diamond_with_a_bare_edge():
    plan = Plan(
        nodes=[
            make("a", []),
            make("b", ["a"]),
            make("c", ["a"]),
            make("d", ["b", "c"]),
            make("e", ["d"]),
        ],
        edges=[edge("a", "e")],
    )
    shape = plan.shape()
    assert shape.order[0] == "a" and shape.order[-1] == "e" and shape.final == "e"
    assert shape.lineage["e"] == {"a": 1, "d": 1, "b": 2, "c": 2}
    assert shape.lineage["d"] == {"b": 1, "c": 1, "a": 2}
    assert shape.parents["e"] == ("a", "d") and shape.sources["e"] == ("d",)
    assert shape.children["a"] == ("b", "c", "e")
    assert shape.input_types["d"] == {"b.v": "integer", "c.v": "integer"}
    assert shape.work["b"] != shape.work["c"] and '"do c"' not in shape.work["b"]


def test_a_plan_without_one_final_node_has_no_shape():
    plan = Plan(nodes=[make("a", []), make("b", [])])
    with pytest.raises(PlanError, match="no unique final node"):
        plan.shape()
