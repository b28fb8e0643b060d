"""verimap inside Inspect AI: the solver, the scorer, the model adapter and the served models.

Logic tests run Inspect's own eval loop with its `mockllm/model` provider, or with a scripted
verimap world served to Inspect, and no server. The `localmodel` test runs the `inspect eval`
command on a 3-sample GSM8K task with verimap's local model, as CI does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.event import InfoEvent, ModelEvent, SpanBeginEvent
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match

from verimap.base.messages import GenerationSettings, ModelRequest
from verimap.base.model import ModelError
from verimap.base.usage import Usage
from verimap.integrations import completions, shared_models
from verimap.integrations.inspect_ai import trace_file, verified, verimap_solver
from verimap.integrations.inspect_events import NODE_SPAN
from verimap.integrations.inspect_model import (
    InspectModel,
    response_schema,
    to_inspect_choice,
    to_inspect_messages,
    to_inspect_tools,
)
from verimap.testing import InProcessSandboxDouble, ScriptedModel, ScriptedWorld

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GSM8K_LIKE = [
    Sample(
        id="eggs",
        target="18",
        input="Janet's ducks lay 16 eggs a day. She eats 3 and bakes with 4, and sells the rest at $2 each. How many dollars does she make a day?",
    ),
    Sample(
        id="robe",
        target="3",
        input="A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take?",
    ),
    Sample(
        id="sprints",
        target="540",
        input="James runs 3 sprints 3 times a week, 60 meters each sprint. How many meters does he run a week?",
    ),
]
# No planner call (the whole task as one node), one attempt: what mockllm can play.
ONE_NODE = {"planning": {"max_nodes": 1}, "loop": {"max_retries": 1, "max_iterations": 1}}


# A planned run a scripted world plays: two nodes, each with a Python VF, the last one strong.
EGGS_PLAN = {
    "nodes": [
        {
            "id": "left",
            "instruction": "Count the eggs left to sell.",
            "inputs": ["USER_TASK"],
            "outputs": {"eggs": "integer"},
            "verification": [
                {"name": "positive", "type": "python", "code": "assert outputs['eggs'] > 0"}
            ],
        },
        {
            "id": "money",
            "instruction": "Dollars for the eggs at $2 each.",
            "inputs": ["left.eggs"],
            "outputs": {"answer": "number"},
            "verification": [
                {
                    "name": "price",
                    "type": "python",
                    "code": "assert approx(outputs['answer'], 2 * inputs['left.eggs'])",
                }
            ],
        },
    ]
}


def eggs_outputs(node: str, k: int, inputs: dict[str, Any], prompt: str) -> dict[str, Any]:
    return {"eggs": 9} if node == "left" else {"answer": 18}


def mock_model(answer: str = '{"answer": 18}') -> Any:
    """mockllm answering `answer` to every call, with its usage given (mockllm would count the
    tokens with tiktoken, whose encoding it downloads)."""

    def reply(*_: Any) -> ModelOutput:
        out = ModelOutput.from_content("mockllm/model", answer)
        out.usage = ModelUsage(input_tokens=40, output_tokens=8, total_tokens=48)
        return out

    return get_model("mockllm/model", custom_outputs=reply)


def run_eval(solver: Any, tmp_path: Path, samples: list[Sample], model: Any) -> EvalLog:
    task = Task(dataset=samples, solver=solver, scorer=[match(numeric=True), verified()])
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path), display="none")
    return log


def infos(sample: Any, source: str) -> list[InfoEvent]:
    return [e for e in sample.events if isinstance(e, InfoEvent) and e.source == source]


# ---- the solver and the scorer, in Inspect's eval loop ------------------------------------------


def test_the_solver_runs_verimap_on_every_sample_and_the_log_holds_its_run(tmp_path):
    solver = verimap_solver(
        "verimap",
        sandbox=InProcessSandboxDouble(),
        domain="math",
        config=ONE_NODE,
        trace_dir=str(tmp_path / "traces"),
    )
    log = run_eval(solver, tmp_path, GSM8K_LIKE, mock_model())

    assert log.status == "success", log.error
    assert log.location and Path(log.location).is_file()
    samples = log.samples or []
    assert len(samples) == 3 and all(set(s.scores or {}) == {"match", "verified"} for s in samples)
    by_id = {s.id: s for s in samples}
    assert by_id["eggs"].output.completion == "18" and by_id["eggs"].scores["match"].value == "C"
    assert by_id["robe"].scores["match"].value == "I"
    run = by_id["eggs"].metadata["verimap"]
    assert run["status"] == "success" and run["answer"] == 18 and run["verified"] is False
    # A finite-number VF is weak: the answer is not verified, and the scorer says why.
    assert by_id["eggs"].scores["verified"].value == "I"
    assert "weak" in (by_id["eggs"].scores["verified"].explanation or "")
    assert (
        run["usage"]["executor"]["calls"] == 1 and run["usage"]["executor"]["prompt_tokens"] == 40
    )
    assert log.results and log.results.scores[1].metrics["verified_share"].value == 0.0

    for s in samples:
        (plan,) = infos(s, "verimap/plan")
        assert isinstance(plan.data, dict) and plan.data["plan"]["nodes"][0]["id"] == "solve"
        (verdict,) = infos(s, "verimap/vf_verdict")
        assert isinstance(verdict.data, dict)
        assert verdict.data["name"] == "finite_number" and verdict.data["outcome"] == "PASS"
        # The executor's call is a model event inside the span of its node, as is the verdict.
        (node,) = [e for e in s.events if isinstance(e, SpanBeginEvent) and e.type == NODE_SPAN]
        (call,) = [e for e in s.events if isinstance(e, ModelEvent)]
        assert node.name == "node solve" and call.span_id == node.id == verdict.span_id
        assert call.role == "executor" and call.model == "mockllm/model"

    # The file on disk opens, with the same samples and scores.
    again = read_eval_log(log.location)
    assert again.status == "success" and len(again.samples or []) == 3
    assert {s.id: s.scores["match"].value for s in again.samples or []} == {
        s.id: s.scores["match"].value for s in samples
    }
    assert infos((again.samples or [])[0], "verimap/vf_verdict")
    # verimap's own traces too, for `verimap view`.
    traces = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert traces == ["eggs-1.jsonl", "robe-1.jsonl", "sprints-1.jsonl"]


def test_a_verimap_model_served_through_inspect_runs_a_planned_and_verified_run(tmp_path):
    world = ScriptedWorld([EGGS_PLAN], eggs_outputs)
    solver = verimap_solver(
        "verimap",
        planner=world.model,
        executor=world.model,
        sandbox=InProcessSandboxDouble(),
        domain="math",
        config={"loop": {"max_retries": 1}, "verify": {"vacuity_check": False}},
    )
    log = run_eval(solver, tmp_path, GSM8K_LIKE[:1], mock_model())

    assert log.status == "success", log.error
    (s,) = log.samples or []
    assert s.output.completion == "18" and s.scores["match"].value == "C"
    assert s.metadata["verimap"]["verified"] is True and s.scores["verified"].value == "C"
    calls = [e for e in s.events if isinstance(e, ModelEvent)]
    # Every role's calls went through Inspect, as the served model, labelled with the role.
    assert {e.model for e in calls} == {"verimap/scripted-world"}
    assert Counter(e.role for e in calls) == {"planner": 1, "executor": 2}
    spans = {
        e.name: e.id for e in s.events if isinstance(e, SpanBeginEvent) and e.type == NODE_SPAN
    }
    assert set(spans) == {"node left", "node money"}
    executor_spans = {e.span_id for e in calls if e.role == "executor"}
    assert executor_spans == set(spans.values())
    (plan_event,) = infos(s, "verimap/plan")
    assert isinstance(plan_event.data, dict) and len(plan_event.data["plan"]["nodes"]) == 2
    assert {v.data["name"] for v in infos(s, "verimap/vf_verdict") if isinstance(v.data, dict)} >= {
        "positive",
        "price",
    }
    # The planner's schema is not Inspect's to hold, but the served model got it whole.
    planner_call = next(e for e in calls if e.role == "planner")
    assert planner_call.config.response_schema is None
    assert planner_call.call and planner_call.call.request["response_schema"]["$defs"]


def test_inspects_cache_serves_a_rerun_without_a_model_call(tmp_path, monkeypatch):
    monkeypatch.setenv("INSPECT_CACHE_DIR", str(tmp_path / "cache"))
    worlds = []
    for _ in range(2):
        world = ScriptedWorld([EGGS_PLAN], eggs_outputs)
        solver = verimap_solver(
            "verimap",
            planner=world.model,
            executor=world.model,
            sandbox=InProcessSandboxDouble(),
            domain="math",
            config={"loop": {"max_retries": 1}, "verify": {"vacuity_check": False}},
        )
        task = Task(dataset=GSM8K_LIKE[:1], solver=solver, scorer=verified())
        (log,) = inspect_eval(
            task, model=mock_model(), log_dir=str(tmp_path), display="none", cache=True
        )
        assert log.status == "success", log.error
        worlds.append((world, log))
    (first, log1), (second, log2) = worlds
    assert first.model.calls == 3 and second.model.calls == 0
    (s1,), (s2,) = log1.samples or [], log2.samples or []
    assert s2.metadata["verimap"]["answer"] == s1.metadata["verimap"]["answer"] == 18
    assert {e.cache for e in s2.events if isinstance(e, ModelEvent)} == {"read"}


def test_a_baseline_runs_too_and_a_sample_without_a_run_is_not_verified(tmp_path):
    solver = verimap_solver("sc", sandbox=InProcessSandboxDouble(), domain="math", samples=3)
    log = run_eval(solver, tmp_path, GSM8K_LIKE[1:2], mock_model("Half of 2 is 1, so 2 + 1 = 3."))
    assert log.status == "success", log.error
    (s,) = log.samples or []
    assert s.output.completion == "3" and s.scores["match"].value == "C"
    run = s.metadata["verimap"]
    assert run["method"] == "sc" and run["usage"]["executor"]["calls"] == 3
    assert s.scores["verified"].value == "I"  # a vote verifies nothing

    plain = Task(dataset=GSM8K_LIKE[:1], scorer=verified())
    (log,) = inspect_eval(plain, model=mock_model(), log_dir=str(tmp_path), display="none")
    (s,) = log.samples or []
    assert (
        s.scores["verified"].value == "I" and "no verimap run" in s.scores["verified"].explanation
    )


def test_a_served_models_failure_errors_the_sample_with_its_usage_counted(tmp_path):
    down = ScriptedModel(
        lambda req: ModelError("endpoint down", usage=Usage(calls=3, failed_calls=3))
    )
    solver = verimap_solver("react", executor=down, sandbox=InProcessSandboxDouble(), domain="math")
    task = Task(dataset=GSM8K_LIKE[:1], solver=solver, scorer=verified())
    (log,) = inspect_eval(
        task, model=mock_model(), log_dir=str(tmp_path), display="none", fail_on_error=False
    )
    (s,) = log.samples or []
    assert s.error is not None and "infrastructure" in s.error.message
    assert "endpoint down" in s.error.message
    # The served model's own error reached verimap through Inspect, with what it had cost.
    assert s.metadata["verimap"]["usage"]["executor"]["failed_calls"] == 3
    assert any(isinstance(e, ModelEvent) and e.error for e in s.events)


def test_an_inspect_sample_limit_ends_the_run_and_then_the_sample(tmp_path):
    solver = verimap_solver(
        "verimap", sandbox=InProcessSandboxDouble(), domain="math", config=ONE_NODE
    )
    task = Task(dataset=GSM8K_LIKE[:1], solver=solver, scorer=verified(), token_limit=20)
    (log,) = inspect_eval(task, model=mock_model(), log_dir=str(tmp_path), display="none")
    (s,) = log.samples or []
    assert s.limit is not None and s.limit.type == "token"
    assert s.metadata["verimap"]["status"] == "failed" and s.scores["verified"].value == "I"


def test_an_unknown_method_fails_when_the_solver_is_made():
    with pytest.raises(ValueError, match="unknown method 'verimapp'"):
        verimap_solver("verimapp")


# ---- the adapter's mapping -----------------------------------------------------------------------


def test_messages_tools_and_tool_choice_map_to_inspect_types():
    req = ModelRequest.model_validate(
        {
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "2+2?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {
                                "name": "calculator",
                                "arguments": '{"expression": "2+2"}',
                            },
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "calculator", "arguments": "{oops"},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "name": "calculator", "content": "4"},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "calculator",
                        "description": "Evaluate arithmetic.",
                        "parameters": {
                            "type": "object",
                            "properties": {"expression": {"type": "string"}},
                            "required": ["expression"],
                            "additionalProperties": False,
                        },
                    },
                }
            ],
            "tool_choice": "required",
        }
    )
    system, user, assistant, tool = to_inspect_messages(req.messages)
    assert (system.role, user.text, tool.tool_call_id, tool.function) == (
        "system",
        "2+2?",
        "c1",
        "calculator",
    )
    good, bad = assistant.tool_calls or []
    assert good.arguments == {"expression": "2+2"} and bad.arguments == {} and bad.parse_error
    (info,) = to_inspect_tools(req.tools)
    assert info.name == "calculator" and info.parameters.required == ["expression"]
    assert to_inspect_choice("required", True) == "any" and to_inspect_choice(None, False) is None
    named = to_inspect_choice({"type": "function", "function": {"name": "calculator"}}, True)
    assert getattr(named, "name", None) == "calculator"


def test_a_schema_is_sent_only_when_inspect_holds_it_whole():
    closed = {
        "type": "object",
        "properties": {"answer": {"type": "number"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    sent = response_schema(ModelRequest(messages=[], response_schema=closed, schema_name="outputs"))
    assert (
        sent and sent.name == "outputs" and sent.json_schema.model_dump(exclude_none=True) == closed
    )
    refs = {"$defs": {"N": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/N"}}}
    assert response_schema(ModelRequest(messages=[], response_schema=refs)) is None


async def test_the_adapter_maps_usage_stop_reasons_and_inspect_settings_win():
    def reply(messages: Any, tools: Any, choice: Any, config: Any) -> ModelOutput:
        seen.append(config)
        out = ModelOutput.from_content("mockllm/model", "done", stop_reason="max_tokens")
        out.usage = ModelUsage(
            input_tokens=30,
            output_tokens=7,
            total_tokens=47,
            input_tokens_cache_read=10,
            total_cost=0.002,
        )
        return out

    seen: list[Any] = []
    base = get_model("mockllm/model", config=GenerateConfig(temperature=0.2), custom_outputs=reply)
    model = InspectModel(base)
    resp = await model.request(
        ModelRequest(
            messages=[{"role": "user", "content": "hi"}],
            settings=GenerationSettings(temperature=1.0, max_tokens=64),
        )
    )
    assert resp.content == "done" and resp.finish_reason == "length"
    assert resp.usage == Usage(
        calls=1, prompt_tokens=40, completion_tokens=7, cached_tokens=10, cost=0.002
    )
    assert seen[0].temperature == 0.2 and seen[0].max_tokens == 64


# ---- what the answer becomes ---------------------------------------------------------------------

HUMANEVAL_PROMPT = 'from typing import List\n\n\ndef evens(xs: List[int]) -> List[int]:\n    """The even numbers of xs."""\n'
HUMANEVAL_TEST = "def check(candidate):\n    assert candidate([1, 2, 3, 4]) == [2, 4]\n    assert candidate([]) == []\n"


def inspect_evals_find_code(completion: str) -> str:
    """inspect_evals' HumanEval extraction: the first fenced block, then what follows the first
    `:\\n    ` (the signature removed)."""
    import re

    blocks = re.findall(r"```python\n(.*?)```", completion, re.S) + re.findall(
        r"```\n(.*?)```", completion, re.S
    )
    code = blocks[0] if blocks else completion
    return code[code.find(":\n    ") + 2 :]


@pytest.mark.parametrize(
    "answer",
    [
        # helpers and imports before the function, two-space indentation, in a fence
        "Here it is:\n```python\nimport math\n\ndef keep(x):\n  return x % 2 == 0\n\ndef evens(xs):\n  return [x for x in xs if keep(x)]\n```",
        {
            "code": "def evens(xs: List[int]) -> List[int]:\n    return [x for x in xs if x % 2 == 0]\n"
        },
    ],
)
def test_code_answers_become_completions_inspect_evals_humaneval_scores(answer):
    text = completions.completion(answer, "programming", "evens")
    program = (
        HUMANEVAL_PROMPT
        + inspect_evals_find_code(text)
        + "\n"
        + HUMANEVAL_TEST
        + "\ncheck(evens)\n"
    )
    exec(compile(program, "<humaneval>", "exec"), {})  # the scorer's own program runs clean


def test_math_answers_become_the_number_alone():
    assert completions.completion(18.0, "math") == "18"
    assert completions.completion({"answer": "$1,250.50"}, "math") == "1250.5"
    assert completions.completion("no number here", "math") == "no number here"
    assert completions.completion({"a": 1, "b": 2}, None) == '{"a": 1, "b": 2}'


# ---- settings, shared models, packaging ----------------------------------------------------------


def test_local_model_rules_apply_under_the_users_settings():
    from verimap.wiring import resolve

    def run_config(method: str, config: Any, local: bool) -> dict[str, Any]:
        return resolve(config, method=method, local=local).config.model_dump()

    mine = {"loop": {"max_retries": 2}}
    remote = run_config("verimap", mine, local=False)
    assert remote["loop"]["max_retries"] == 2 and remote["policies"] == []
    assert remote["planning"]["max_nodes"] is None
    local = run_config("verimap", mine, local=True)
    assert local["loop"]["max_retries"] == 2 and local["sampling"]["temperature"] == 0.0
    assert local["planning"]["max_nodes"] == 1
    assert local["loop"]["max_iterations"] == 2 and local["policies"] == ["small-model"]
    one_pass = run_config("map", None, local=True)
    assert one_pass["loop"]["max_iterations"] == 1  # map is one pass, whatever the policy says
    sampled = run_config("verimap", {"sampling": {"temperature": 0.5}}, local=True)
    assert sampled["sampling"]["temperature"] == 0.5
    assert sampled["sampling"]["retry_temperature"] is None
    with pytest.raises(ValueError, match=r"'loop\.max_retires'"):
        run_config("verimap", {"loop": {"max_retires": 2}}, local=False)


def test_a_config_knob_outside_its_part_fails_when_the_solver_is_made():
    from verimap.integrations.inspect_ai import verimap_solver

    with pytest.raises(ValueError, match=r"'max_retries' \(it is now loop.max_retries\)"):
        verimap_solver("verimap", config={"max_retries": 2})


async def test_the_fallback_models_are_opened_once_and_closed_after_the_last_sample(monkeypatch):
    opened: list[str] = []

    @contextlib.asynccontextmanager
    async def fake_connect(**_: Any):
        opened.append("open")
        await asyncio.sleep(0.01)
        yield {"planner": "m", "executor": "m", "judge": "m"}
        opened.append("closed")

    monkeypatch.setattr("verimap.local.endpoint.connect", fake_connect)
    monkeypatch.setattr(shared_models, "LINGER_S", 0.05)
    shared = shared_models.SharedModels()

    async def sample() -> None:
        async with shared.use() as models:
            assert models["executor"] == "m"
            await asyncio.sleep(0.02)

    await asyncio.gather(sample(), sample(), sample())
    assert opened == ["open"]
    await sample()  # within the linger: the same models
    assert opened == ["open"]
    await asyncio.sleep(0.2)
    assert opened == ["open", "closed"] and shared.models is None


def test_importing_the_integration_without_inspect_names_the_extra():
    code = (
        "import sys; sys.modules['inspect_ai'] = None\n"
        "try:\n    import verimap.integrations.inspect_ai\n"
        "except ModuleNotFoundError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "pip install 'verimap[inspect]'" in out.stdout, out.stderr


@pytest.fixture
def entry_points_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python sees pyproject's `inspect_ai` entry points as an install
    writes them, in a dist-info of their own (so a test does not depend on when verimap was
    last installed; a second copy of an installed entry point is harmless)."""
    points = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    info = tmp_path / "site" / "verimap_entry_points-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: verimap-entry-points\nVersion: 0\n"
    )
    lines = [f"{k} = {v}" for k, v in points["inspect_ai"].items()]
    (info / "entry_points.txt").write_text("[inspect_ai]\n" + "\n".join(lines) + "\n")
    paths = [str(info.parent), str(REPO), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def test_inspect_finds_the_solver_and_scorer_by_name_through_the_entry_point(entry_points_env):
    code = (
        "from inspect_ai._util.registry import registry_lookup\n"
        "print(registry_lookup('solver', 'verimap/verimap_solver') is not None,"
        " registry_lookup('scorer', 'verimap/verified') is not None)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=entry_points_env,
    )
    assert out.stdout.split() == ["True", "True"], out.stderr


# ---- `inspect eval` on the local model -----------------------------------------------------------


@pytest.mark.localmodel
def test_inspect_eval_runs_verimap_on_three_gsm8k_samples_with_the_local_model(
    local_model_file, entry_points_env, tmp_path
):
    """The issue's goal: `inspect eval` with the solver named on the command line, no model
    (so verimap's local model serves every role, through Inspect), each run budgeted."""
    env = {**entry_points_env, "VERIMAP_MODEL_FILE": str(local_model_file)}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "INSPECT_EVAL_MODEL", "INSPECT_LOG_DIR"):
        env.pop(var, None)  # no endpoint and no Inspect model: verimap's local model
    budget = json.dumps({"budget": {"max_llm_calls": 6, "timeout_s": 120}})
    cmd = [
        sys.executable,
        "-m",
        "inspect_ai",
        "eval",
        f"{HERE / 'gsm8k_task.py'}@gsm8k",
        "--limit",
        "3",
        "--max-samples",
        "1",
        "--display",
        "plain",
        "--log-dir",
        str(tmp_path / "logs"),
        "--solver",
        "verimap/verimap_solver",
        "-S",
        "domain=math",
        "-S",
        f"config={budget}",
    ]
    started = time.monotonic()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    took = time.monotonic() - started
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    (path,) = (tmp_path / "logs").glob("*.eval")
    log = read_eval_log(str(path))
    assert log.status == "success", log.error
    assert log.eval.solver == "verimap/verimap_solver"
    samples = log.samples or []
    assert len(samples) == 3, f"took {took:.0f}s"
    for s in samples:
        run = s.metadata["verimap"]
        assert set(s.scores or {}) == {"match", "verified"}
        assert run["status"] in ("success", "failed", "partial", "budget_exhausted")
        assert s.scores["verified"].value == ("C" if run["verified"] else "I")
        calls = [e for e in s.events if isinstance(e, ModelEvent)]
        assert calls and all(e.model.startswith("verimap/") for e in calls)
        assert infos(s, "verimap/plan") and infos(s, "verimap/finish")
    scores = {s.id: (s.output.completion, s.scores["match"].value) for s in samples}
    print(f"inspect eval, 3 GSM8K samples on the local model: {took:.0f}s; {scores}")


# ---- what the solver writes: trace files, the transcript -----------------------------------------


def test_a_sample_ids_trace_file_stays_inside_the_trace_dir(tmp_path):
    traces = tmp_path / "deep" / "traces"
    sample = Sample(id="../../escaped", target="3", input=GSM8K_LIKE[1].input)
    solver = verimap_solver(
        "verimap",
        sandbox=InProcessSandboxDouble(),
        domain="math",
        config=ONE_NODE,
        trace_dir=str(traces),
    )
    log = run_eval(solver, tmp_path, [sample], mock_model('{"answer": 3}'))
    assert log.status == "success", log.error
    (written,) = traces.iterdir()
    assert written.name.startswith(".._.._escaped-") and written.name.endswith("-1.jsonl")
    assert not (tmp_path / "escaped-1.jsonl").exists()
    for sid in ("../x", "..", "a/b", "a\x1b]0;t\x07", 7):
        p = trace_file(traces, sid, 2)
        assert p.parent == traces and p.name.isprintable() and p.name.endswith("-2.jsonl")
    assert trace_file(traces, "eggs", 1).name == "eggs-1.jsonl"
    assert trace_file(traces, "a/b", 1) != trace_file(traces, "a_b", 1)


def test_the_transcript_of_a_served_model_is_redacted_and_the_model_gets_it_whole(
    tmp_path, monkeypatch
):
    secret = "hunter2-s3cret-value"
    monkeypatch.setenv("VERIMAP_TEST_API_KEY", secret)
    plan = json.loads(json.dumps(EGGS_PLAN))
    plan["nodes"][0]["instruction"] += f" The key is {secret}."
    prompts: list[str] = []

    def outputs(node: str, k: int, inputs: dict[str, Any], prompt: str) -> dict[str, Any]:
        prompts.append(prompt)
        return eggs_outputs(node, k, inputs, prompt)

    world = ScriptedWorld([plan], outputs)
    solver = verimap_solver(
        "verimap",
        planner=world.model,
        executor=world.model,
        sandbox=InProcessSandboxDouble(),
        domain="math",
        config={"loop": {"max_retries": 1}, "verify": {"vacuity_check": False}},
    )
    log = run_eval(solver, tmp_path, GSM8K_LIKE[:1], mock_model())
    assert log.status == "success", log.error
    (s,) = log.samples or []
    assert s.metadata["verimap"]["verified"] is True  # the plan reached verimap whole
    assert any(secret in p for p in prompts)  # and so did the executor's prompt
    calls = [e for e in s.events if isinstance(e, ModelEvent)]
    assert {e.role for e in calls} == {"planner", "executor"}
    assert secret not in s.model_dump_json()
    assert "[REDACTED]" in s.model_dump_json()
    assert log.location and secret not in read_eval_log(log.location).model_dump_json()
