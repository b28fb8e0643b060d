import json
import warnings

import pytest
from click.testing import CliRunner

from verimap.cli import main

PLAN = {
    "nodes": [
        {
            "id": "a",
            "instruction": "extract",
            "inputs": ["USER_TASK"],
            "outputs": ["x"],
            "verification": [
                {
                    "name": "pos",
                    "type": "python",
                    "code": "assert outputs['x'] > 0, 'x must be positive'",
                },
                {"name": "j", "type": "llm", "content": "x is right"},
            ],
        },
        {
            "id": "b",
            "instruction": "double",
            "inputs": ["a.x"],
            "outputs": ["y"],
            "verification": [
                {"name": "dbl", "type": "python", "code": "assert outputs['y'] == 2 * inputs['x']"}
            ],
        },
    ]
}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.fixture
def files(tmp_path):
    def write(name, obj):
        p = tmp_path / name
        p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
        return str(p)

    return write


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_plan_validate_valid_and_invalid(files):
    r = invoke("plan", "validate", files("p.json", PLAN))
    assert r.exit_code == 0 and "valid plan, 2 node(s), final node 'b'" in r.output
    bad = {
        "nodes": [
            {"id": "a", "instruction": "i", "inputs": ["q.z"], "outputs": ["x"]},
            {"id": "a", "instruction": "j", "outputs": ["x"]},
        ]
    }
    r = invoke("plan", "validate", "--json", files("bad.json", bad))
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and not out["valid"] and len(out["problems"]) >= 2


def test_plan_schema_and_show(files):
    r = invoke("plan", "schema")
    assert r.exit_code == 0 and "nodes" in json.loads(r.stdout)["properties"]
    r = invoke("plan", "show", files("p.json", PLAN), "--mermaid")
    assert r.exit_code == 0 and r.output.startswith("flowchart TD") and "a -->|x| b" in r.output
    r = invoke("plan", "show", files("p.json", PLAN))
    assert "b (final)" in r.output and "vf dbl [python]" in r.output


def test_vf_check_pass_fail_and_bad_input(files):
    plan = files("p.json", PLAN)
    r = invoke(
        "vf",
        "check",
        plan,
        "--node",
        "b",
        "--outputs",
        files("o.json", {"y": 6}),
        "--inputs",
        files("i.json", {"a.x": 3}),
        "--sandbox",
        "process",
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["verdicts"][0]["outcome"] == "PASS"
    r = invoke(
        "vf",
        "check",
        plan,
        "--node",
        "a",
        "--outputs",
        files("o2.json", {"x": -1}),
        "--sandbox",
        "process",
    )
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and out["verdicts"][0]["message"] == "x must be positive"
    assert out["verdicts"][1]["outcome"] == "SKIPPED"
    for args, needle in [
        (("--node", "zz", "--outputs", files("o3.json", {})), "no node 'zz'"),
        (("--node", "a", "--outputs", files("o4.json", "not json")), "not valid JSON"),
        (("--node", "a", "--outputs", files("o5.json", [1])), "must hold a JSON object"),
        (("--node", "a", "--outputs", "/nonexistent/o.json"), "cannot read outputs"),
        (
            (
                "--node",
                "b",
                "--outputs",
                files("o6.json", {"y": 1}),
                "--inputs",
                files("i2.json", {"zz": 1}),
            ),
            "not inputs of node",
        ),
    ]:
        r = invoke("vf", "check", plan, *args, "--sandbox", "process")
        assert r.exit_code == 2 and needle in r.output, (args, r.output)
    r = invoke(
        "vf",
        "check",
        files("bad.json", {"nodes": []}),
        "--node",
        "a",
        "--outputs",
        files("o7.json", {}),
    )
    assert r.exit_code == 2 and "empty plan" in r.output


def test_vf_check_with_a_judge(files, monkeypatch):
    from contextlib import asynccontextmanager

    from verimap.cli import vf as vf_mod
    from verimap.testing import ScriptedModel

    judge = ScriptedModel(
        lambda r: (
            {"passed": False, "explanation": "x looks wrong"} if r.response_schema else "thinking"
        )
    )

    @asynccontextmanager
    async def fake_connect(**endpoint):
        yield {"planner": judge, "executor": judge, "judge": judge}

    monkeypatch.setattr(vf_mod, "_connect", fake_connect)
    plan, outs = files("p.json", PLAN), files("o.json", {"x": 3})
    r = invoke(
        "vf", "check", plan, "--node", "a", "--outputs", outs, "--sandbox", "process", "--judge"
    )
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and out["verdicts"][0]["outcome"] == "PASS"
    assert (
        out["verdicts"][1]["outcome"] == "FAIL"
        and out["verdicts"][1]["explanation"] == "x looks wrong"
    )
    assert judge.calls == 2
