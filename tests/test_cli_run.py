import io
import json
import warnings
from contextlib import asynccontextmanager

import pytest
from click.testing import CliRunner

from verimap.cli import main
from verimap.cli import run as run_mod
from verimap.testing import ScriptedWorld

PLAN = {
    "nodes": [
        {
            "id": "a",
            "instruction": "extract",
            "inputs": ["USER_TASK"],
            "outputs": ["x"],
            "verification": [{"name": "pos", "type": "python", "code": "assert outputs['x'] > 0"}],
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


@pytest.fixture
def world(monkeypatch):
    def reply(nid, k, inp, p):  # b shows its work, as the local defaults require
        return (
            {"x": 21}
            if nid == "a"
            else f"2 * {inp['a.x']} = {2 * inp['a.x']}\n" + json.dumps({"y": 2 * inp["a.x"]})
        )

    w = ScriptedWorld([PLAN], reply)
    seen = {}

    @asynccontextmanager
    async def fake_connect(**endpoint):
        seen.update(endpoint)
        yield w.models()

    monkeypatch.setattr(run_mod, "_connect", fake_connect)
    w.endpoint = seen
    return w


# The scripted world plans two nodes; on the local model a run is one node without a planner.
PLANNED = ("--max-nodes", "2")


def invoke(*args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CliRunner().invoke(main, ["run", *args])


def test_run_prints_answer_table_and_trace(world, tmp_path):
    r = invoke(
        "Double 21", "--model", "gpt-4o-mini", "--sandbox", "process", "--trace-dir", str(tmp_path)
    )
    assert r.exit_code == 0, r.output
    assert "success" in r.output and "42" in r.output and "dbl=PASS" in r.output
    traces = list(tmp_path.glob("*.jsonl"))
    assert len(traces) == 1 and str(traces[0].name) in r.output.replace("\n", "")
    assert world.endpoint["model"] == "gpt-4o-mini"
    assert (
        "plan: 2 node(s): a, b" in r.stderr
        and "b #1: vf dbl PASS" in r.stderr
        and "b: verified" in r.stderr
    )
    quiet = invoke(
        "Double 21", "-q", *PLANNED, "--sandbox", "process", "--trace-dir", str(tmp_path)
    )
    assert quiet.exit_code == 0 and "plan:" not in quiet.stderr


def test_run_json_budget_and_plan_file(world, tmp_path):
    r = invoke(
        "Double 21",
        *PLANNED,
        "--json",
        "--sandbox",
        "process",
        "--trace-dir",
        str(tmp_path),
        "--call-limit",
        "2",
    )
    assert r.exit_code == 3 and json.loads(r.stdout)["status"] == "budget_exhausted"
    r = invoke(
        "Double 21",
        *PLANNED,
        "--sandbox",
        "process",
        "--trace-dir",
        str(tmp_path),
        "--call-limit",
        "2",
    )
    assert (
        "error: LLM call budget exhausted: 2 of 2 calls used" in r.stdout
        and "[bold]" not in r.stdout
    )
    pf = tmp_path / "plan.json"
    pf.write_text(json.dumps(PLAN))
    r = invoke(
        "Double 21",
        "--plan-file",
        str(pf),
        "--json",
        "--sandbox",
        "process",
        "--trace-dir",
        str(tmp_path),
    )
    out = json.loads(r.stdout)
    assert (
        r.exit_code == 0
        and out["final_output"] == {"y": 42}
        and out["usage"]["roles"].get("planner") is None
    )


def test_run_bad_input(world, tmp_path):
    assert invoke("   ").exit_code == 2
    pf = tmp_path / "bad.json"
    pf.write_text('{"nodes": []}')
    r = invoke("t", "--plan-file", str(pf))
    assert r.exit_code == 2 and "empty plan" in r.output


def test_run_as_an_eval_method_uses_its_presets(monkeypatch, tmp_path):
    from verimap.testing import InProcessSandboxDouble
    from verimap.wiring import build

    react = build({"executor": None}, InProcessSandboxDouble(), None, method="react")
    w = ScriptedWorld([react.planner._plan], lambda nid, k, inp, p: {"answer": 42})

    @asynccontextmanager
    async def fake_connect(**endpoint):
        yield w.models()

    monkeypatch.setattr(run_mod, "_connect", fake_connect)
    r = invoke(
        "Double 21",
        "--method",
        "react",
        "--model",
        "gpt-4o-mini",
        "--sandbox",
        "process",
        "--trace-dir",
        str(tmp_path),
        "--json",
        "-q",
    )
    result = json.loads(r.output)
    assert [n["id"] for n in result["plans"][0]["nodes"]] == ["solve"] and w.planner_calls == 0
    assert "--cross-check does nothing" not in r.stderr
    assert result["final_output"] == {"answer": 42} and result["iterations"] == 1
    bad = invoke("Double 21", "--method", "react", "--plan-file", __file__)
    assert bad.exit_code == 2 and "exclude each other" in bad.output


def test_a_cross_check_with_nothing_to_stand_beside_is_named(world, tmp_path):
    def note(*args):
        r = invoke(
            "Double 21",
            "--model",
            "gpt-4o-mini",
            "--sandbox",
            "process",
            "-q",
            "--trace-dir",
            str(tmp_path),
            "--cross-check",
            *args,
        )
        assert r.exit_code == 0, r.output
        return r.stderr

    assert "--cross-check does nothing with --verification none" in note("--verification", "none")
    assert "--cross-check does nothing with --method map-v" in note("--method", "map-v")
    assert "does nothing" not in note()
    assert "--ballot does nothing" in note("--no-cross-check", "--ballot", "strict")
    assert "--ballot does nothing" not in note("--ballot", "strict")
    assert "--ballot does nothing" in note(
        "--no-cross-check", "--method", "map-v", "--ballot", "strict"
    )


def test_an_endpoint_outage_exits_4_not_as_a_failed_task(monkeypatch, tmp_path):
    import socket

    from verimap.llm.openai_model import OpenAIModel

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # nothing listens: refused
    model = OpenAIModel(
        "m",
        base_url=url,
        api_key="sk-test-secret-77",
        max_retries=1,
        backoff_base=0.01,
        backoff_max=0.02,
    )

    @asynccontextmanager
    async def down(**endpoint):
        yield {"planner": model, "executor": model, "judge": model}

    monkeypatch.setattr(run_mod, "_connect", down)
    r = invoke("Double 21", "--sandbox", "process", "--trace-dir", str(tmp_path), "-q")
    assert r.exit_code == run_mod.EXIT_INFRA == 4, r.output
    # The endpoint is named by host and port only: a URL's path and userinfo stay out.
    host = url.removeprefix("http://").removesuffix("/v1")
    assert "infrastructure error:" in r.stdout and f"endpoint {host} is unreachable" in r.stdout
    assert "sk-test-secret-77" not in r.output
    r = invoke("Double 21", "--json", "--sandbox", "process", "--trace-dir", str(tmp_path))
    assert r.exit_code == 4 and json.loads(r.stdout)["error_kind"] == "infrastructure"


def test_run_on_a_terminal_draws_the_live_view_instead_of_the_log(world, tmp_path, monkeypatch):
    from rich.console import Console

    from verimap.observe import live_view

    screen = Console(file=io.StringIO(), force_terminal=True, color_system="standard", width=100)
    monkeypatch.setattr(live_view, "stderr_console", lambda: screen)
    r = invoke("Double 21", *PLANNED, "--sandbox", "process", "--trace-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    drawn = screen.file.getvalue()
    assert "\x1b[" in drawn and "iteration 1" in drawn and "#1 dbl PASS" in drawn
    assert "verified" in drawn and "success" in drawn
    assert "plan: 2 node(s)" not in r.stderr  # no line log beside the view
    assert "success" in r.stdout and "42" in r.stdout and "dbl=PASS" in r.stdout
    quiet = invoke(
        "Double 21", "-q", *PLANNED, "--sandbox", "process", "--trace-dir", str(tmp_path)
    )
    assert quiet.exit_code == 0 and screen.file.getvalue() == drawn


def test_off_a_terminal_the_log_tells_retries_and_replans_without_escape_codes(
    monkeypatch, tmp_path
):
    fixed = {"nodes": [PLAN["nodes"][0], {**PLAN["nodes"][1], "instruction": "double it"}]}

    def outputs(nid, k, inp, prompt):
        if nid == "a":
            return {"x": -1 if k == 0 else 21}
        if "double it" not in prompt:
            return {"y": 0}
        return f"2 * {inp['a.x']} = {2 * inp['a.x']}\n" + json.dumps({"y": 2 * inp["a.x"]})

    w = ScriptedWorld([PLAN, fixed], outputs)

    @asynccontextmanager
    async def fake_connect(**endpoint):
        yield w.models()

    monkeypatch.setattr(run_mod, "_connect", fake_connect)
    r = invoke(
        "Double 21",
        *PLANNED,
        "--sandbox",
        "process",
        "--trace-dir",
        str(tmp_path),
        "--max-attempts",
        "2",
    )
    assert r.exit_code == 0, r.output
    for line in (
        "[it 1] a: retry 1",
        "[it 1] b: failed",
        "[it 2] replanning after node 'b' failed",
        "[it 2] a: reused (verified before, unchanged)",
        "[it 2] b: verified",
    ):
        assert line in r.stderr, line
    assert "\x1b" not in r.stderr and "\x1b" not in r.stdout


def test_the_local_model_plans_small_and_at_most_twice_unless_told(world, tmp_path, monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)

    def config_of(*args):
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        r = invoke("Double 21", "--sandbox", "process", "--trace-dir", str(out), "-q", *args)
        assert r.exit_code in (0, 1), r.output  # the world answers two nodes; one-node runs fail
        (trace,) = out.glob("*.jsonl")
        return json.loads(trace.read_text().splitlines()[0])["data"]["config"]

    local = config_of()
    assert (
        local["loop"]["max_iterations"],
        local["planning"]["plan_repairs"],
        local["sampling"]["temperature"],
    ) == (2, 0, 0.0)
    assert local["planning"]["max_nodes"] == 1
    assert "answer_agreement" in local["verify"]["checks"]
    assert config_of("--max-iterations", "4")["loop"]["max_iterations"] == 4
    assert config_of("--max-nodes", "0")["planning"]["max_nodes"] is None
    assert config_of("--max-nodes", "5")["planning"]["max_nodes"] == 5
    assert local["verify"]["ballot"] == "strict"
    assert config_of("--ballot", "mixed")["verify"]["ballot"] == "mixed"
    remote = config_of("--model", "gpt-4o-mini")
    assert (
        remote["loop"]["max_iterations"],
        remote["planning"]["plan_repairs"],
        remote["planning"]["max_nodes"],
    ) == (5, 3, None)
    assert remote["verify"]["checks"] == ["arithmetic"]


def test_a_cost_budget_on_a_model_with_no_known_price_is_refused_before_any_call(monkeypatch):
    """A cost the price table does not know would be counted as $0: the budget could never trip."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = invoke(
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "no-such-model-anywhere",
        "--cost-limit",
        "0.5",
        "What is 2 + 2?",
    )
    assert res.exit_code == 2, res.output
    assert "no price is known for no-such-model-anywhere" in res.output
    assert "--cost-limit" in res.output


def test_a_question_not_about_a_number_is_not_asked_for_one(monkeypatch, tmp_path):
    """On the local model `verimap run` answers with the one-node plan; before, every task got
    the math node ("give the final numeric answer", a finite-number VF)."""
    w = ScriptedWorld([PLAN], lambda nid, k, inp, p: {"answer": "William Shakespeare"})

    @asynccontextmanager
    async def fake_connect(**endpoint):
        yield w.models()

    monkeypatch.setattr(run_mod, "_connect", fake_connect)
    r = invoke("Who wrote Hamlet?", "--sandbox", "process", "--trace-dir", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{") :])
    (node,) = out["plans"][0]["nodes"]
    assert node["outputs"] == {"answer": "string"} and "numeric" not in node["instruction"]
    assert out["final_output"] == {"answer": "William Shakespeare"}
    assert "numeric" not in w.executor_prompts["solve"][0]
