"""VF code is normalised, and what can be found before it runs is reported with its line."""

import pytest

from verimap.base.plan import Node, PlanError, PythonVF
from verimap.base.plan_vfs import normalize_code
from verimap.planning.plan import parse_plan
from verimap.planning.vfcheck import vf_problems

NODE = Node(
    id="calc", instruction="x", inputs=["USER_TASK", "ex.price"], outputs={"total": "number"}
)


@pytest.mark.parametrize(
    "raw",
    [
        "```python\nassert outputs['total'] > 0\n```",
        "```\nassert outputs['total'] > 0\n```",
        "    assert outputs['total'] > 0",
        "\n\n  assert outputs['total'] > 0\n",
        "\n```python3\nassert outputs['total'] > 0\n```\n",  # any language tag, a blank line first
    ],
)
def test_fences_and_indentation_are_normalised(raw):
    assert normalize_code(raw) == "assert outputs['total'] > 0\n"


def test_first_line_flush_and_the_rest_indented_is_repaired():
    raw = "x = outputs['total']\n    assert x > 0\n    assert x < 1e9"
    assert normalize_code(raw) == "x = outputs['total']\nassert x > 0\nassert x < 1e9\n"


def test_a_plan_stores_normalised_code():
    p = parse_plan(
        {
            "nodes": [
                {
                    "id": "a",
                    "instruction": "x",
                    "inputs": ["USER_TASK"],
                    "outputs": {"v": "number"},
                    "verification": [
                        {
                            "name": "pos",
                            "type": "python",
                            "code": "```python\n  assert outputs['v'] > 0\n```",
                        }
                    ],
                }
            ]
        }
    )
    assert p.nodes[0].verification[0].code == "assert outputs['v'] > 0\n"


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        (
            "assert outputs['price'] > 0",
            "line 1: outputs['price'] is not an output of this node (its outputs: total)",
        ),
        (
            "x = 1\nassert inputs['quantity'] > 0 and outputs['total']",
            "line 2: inputs['quantity'] is not an input",
        ),
        ("outputs['total'] > 0", "line 1: the comparison's result is thrown away"),
        ("outputs['total'] > 0", "checks nothing: it has no assert"),
        (
            "def verify(inputs, outputs):\n    ok = outputs['total'] > 0",
            "its verify() has no return",
        ),
        (
            "import os\nassert outputs['total']",
            "Line 1: import of 'os' is not allowed (sandbox policy)",
        ),
        ("assert outputs['total'] > 0 +", "does not compile: invalid syntax (line 1)"),
        ("assert outputs.get('totl') is not None", "outputs['totl'] is not an output"),
    ],
)
def test_static_problems_are_named_with_their_line(code, needle):
    problems = vf_problems(NODE, PythonVF(name="v", code=code))
    assert any(needle in p for p in problems), problems
    assert all(p.startswith("node 'calc': python VF 'v'") for p in problems)


@pytest.mark.parametrize(
    "code",
    [
        "assert approx(outputs['total'], inputs['ex.price'] * 3)",
        "assert outputs['total'] > inputs['price']",  # a bare input name, unambiguous
        "def verify(inputs, outputs):\n    return outputs['total'] > 0",
        "if outputs['total'] < 0:\n    raise ValueError('negative')",
    ],
)
def test_sound_vfs_have_no_problems(code):
    assert vf_problems(NODE, PythonVF(name="v", code=code)) == []


def test_parse_plan_reports_every_vf_problem_at_once():
    with pytest.raises(PlanError) as ei:
        parse_plan(
            {
                "nodes": [
                    {
                        "id": "a",
                        "instruction": "x",
                        "inputs": ["USER_TASK"],
                        "outputs": {"v": "number"},
                        "verification": [
                            {"name": "k", "type": "python", "code": "assert outputs['w']"},
                            {
                                "name": "i",
                                "type": "python",
                                "code": "import socket\nassert outputs['v']",
                            },
                        ],
                    }
                ]
            }
        )
    text = str(ei.value)
    assert "outputs['w'] is not an output" in text and "import of 'socket' is not allowed" in text


def test_loading_an_output_that_is_not_code_as_code_is_a_vf_problem():
    """run_examples on a parsed string can never pass (HumanEval/1, run r34): caught at plan time."""
    node = Node(
        id="parse",
        instruction="i",
        inputs=["USER_TASK"],
        outputs={
            "paren_string": "string",
            "groups": "list[string]",
            "code": "string",
            "impl": "code",
            "solution": "any",
        },
    )
    for out, bad in (
        ("paren_string", True),
        ("groups", True),
        ("code", False),
        ("impl", False),
        ("solution", False),
    ):
        for fn in ("run_examples", "load_function"):
            arg = "inputs['USER_TASK']" if fn == "run_examples" else "'f'"
            vf = PythonVF(name="ex", code=f"{fn}(outputs['{out}'], {arg})")
            found = [p for p in vf_problems(node, vf) if "as code" in p]
            assert bool(found) is bad, (out, fn, found)
    assert (
        "node 'parse': python VF 'ex' line 1"
        in vf_problems(
            node, PythonVF(name="ex", code="run_examples(outputs['groups'], inputs['USER_TASK'])")
        )[0]
    )
