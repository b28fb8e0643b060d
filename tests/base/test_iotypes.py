"""Typed node outputs: names, coercion, and the executor's schema agreeing with validation."""

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verimap.base import iotypes
from verimap.base.plan import Node, PlanError
from verimap.core.executor import coerce_outputs, outputs_schema
from verimap.planning.plan import parse_plan


def node(outputs) -> Node:
    return Node(id="n", instruction="do", inputs=["USER_TASK"], outputs=outputs)


@pytest.mark.parametrize(
    ("spec", "value", "expected"),
    [
        ("number", "17", 17),
        ("number", " $1,234.50 ", 1234.5),
        ("number", 2.5, 2.5),
        ("number", "-3e2", -300.0),
        ("integer", 17.0, 17),
        ("integer", "23", 23),
        ("string", 1999, "1999"),
        ("boolean", True, True),
        ("list[number]", [1, "2"], [1, 2]),
        ("code", "def f(): pass", "def f(): pass"),
        ("any", {"value": 17}, {"value": 17}),
        ({"type": "array", "items": {"type": "string"}}, ["a"], ["a"]),
    ],
)
def test_values_are_coerced_to_their_type(spec, value, expected):
    got = iotypes.coerce(spec, value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("spec", "value", "message"),
    [
        ("number", {"value": 17}, 'expected number, got object {"value": 17}'),
        ("number", True, "expected number, got boolean true"),
        ("number", "about 17 pens", "expected number, got string"),
        ("number", float("nan"), "expected number"),
        ("integer", 17.5, "expected integer, got number 17.5"),
        ("string", ["a"], "expected string, got list"),
        ("boolean", "maybe", "expected boolean"),
        ("list[integer]", [1, "x"], "expected list[integer]"),
        ({"type": "object", "required": ["a"]}, {}, "'a' is a required property"),
    ],
)
def test_values_that_do_not_fit_get_a_precise_message(spec, value, message):
    with pytest.raises(iotypes.TypeMismatch) as ei:
        iotypes.coerce(spec, value)
    assert message in str(ei.value)


def test_an_uncoercible_output_names_the_output():
    out, problems = coerce_outputs(
        node({"price": "number", "n": "integer"}), {"price": {"value": 17}, "n": "23"}
    )
    assert problems == ['price: expected number, got object {"value": 17}'] and out["n"] == 23


def test_plans_accept_every_spelling_of_outputs_and_store_canonical_types():
    p = parse_plan(
        {
            "nodes": [
                {
                    "id": "a",
                    "instruction": "x",
                    "inputs": ["USER_TASK"],
                    "outputs": ["p: int", "q", {"name": "r", "type": "List[Str]"}],
                },
                {
                    "id": "b",
                    "instruction": "y",
                    "inputs": ["a.p", "a.q", "a.r"],
                    "outputs": {"answer": "float"},
                },
            ]
        }
    )
    assert p.node("a").outputs == {"p": "integer", "q": "any", "r": "list[string]"}
    assert p.node("b").outputs == {"answer": "number"}
    again = parse_plan(json.loads(p.to_json()))
    assert again.model_dump() == p.model_dump()


def test_an_unknown_type_names_the_node_and_the_output():
    with pytest.raises(PlanError) as ei:
        parse_plan(
            {
                "nodes": [
                    {
                        "id": "ex",
                        "instruction": "x",
                        "inputs": ["USER_TASK"],
                        "outputs": {"price": "numbr"},
                    }
                ]
            }
        )
    assert any(
        p.startswith("node 'ex': output 'price': unknown type 'numbr'") for p in ei.value.problems
    )


def test_an_invalid_schema_type_is_a_plan_error():
    with pytest.raises(PlanError) as ei:
        parse_plan(
            {
                "nodes": [
                    {
                        "id": "ex",
                        "instruction": "x",
                        "inputs": ["USER_TASK"],
                        "outputs": {"p": {"type": 5}},
                    }
                ]
            }
        )
    assert "invalid JSON Schema" in str(ei.value)


def test_the_plan_schema_has_types_and_still_takes_bare_names():
    from verimap.base.plan import plan_json_schema

    schema = plan_json_schema()
    typed = {
        "nodes": [
            {"id": "a", "instruction": "x", "inputs": ["USER_TASK"], "outputs": {"p": "number"}}
        ]
    }
    bare = {"nodes": [{"id": "a", "instruction": "x", "inputs": ["USER_TASK"], "outputs": ["p"]}]}
    jsonschema.validate(typed, schema)
    jsonschema.validate(bare, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"nodes": [{**typed["nodes"][0], "outputs": {"p": "numbr"}}]}, schema)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
type_specs = st.sampled_from(iotypes.TYPE_NAMES) | st.sampled_from(
    [{"type": "array", "items": {"type": "integer"}}, {"type": "object", "required": ["a"]}]
)


@settings(max_examples=300, deadline=None)
@given(
    specs=st.lists(type_specs, min_size=1, max_size=3),
    values=st.lists(json_values, min_size=3, max_size=3),
)
def test_the_response_schema_accepts_exactly_what_validates(specs, values):
    """A value the executor's grammar admits is accepted unchanged, except code that does not
    parse (no grammar says "parses as Python"); whatever validation accepts (after coercion) is
    something the grammar admits."""
    n = node({f"o{i}": s for i, s in enumerate(specs)})
    value = {f"o{i}": values[i] for i in range(len(specs))}
    schema_ok = jsonschema.Draft202012Validator(outputs_schema(n)).is_valid(value)
    coerced, problems = coerce_outputs(n, value)
    if schema_ok:
        assert all("expected Python code that parses" in p for p in problems)
        assert problems or coerced == value
    if not problems:
        assert jsonschema.Draft202012Validator(outputs_schema(n)).is_valid(coerced)


@pytest.mark.parametrize("spec", [t for t in iotypes.TYPE_NAMES if t != "any"])
def test_probe_values_have_their_type(spec):
    for make in (iotypes.null_value, iotypes.absurd_value, iotypes.plausible_value):
        assert iotypes.coerce(spec, make(spec)) == make(spec)


def test_code_that_does_not_parse_is_a_type_mismatch_saying_where():
    assert iotypes.coerce("code", "```python\ndef f():\n    return 1\n```").startswith("```")
    with pytest.raises(iotypes.TypeMismatch, match=r"SyntaxError: .* \(line 2\)"):
        iotypes.coerce("code", 'def f():\n    """unterminated\n')


def test_code_the_grammar_admits_but_that_does_not_parse_is_named():
    n = node({"o0": "code"})
    assert jsonschema.Draft202012Validator(outputs_schema(n)).is_valid({"o0": ":"})
    _, problems = coerce_outputs(n, {"o0": ":"})
    assert problems and "expected Python code that parses" in problems[0]
