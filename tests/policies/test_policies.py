"""Policies by name: what each sets, that the user's settings win, and that `verimap.build`
applies the endpoint's policy as the CLI does."""

import pytest

import verimap
from verimap.base.events import EventBus, RunStart
from verimap.base.messages import GenerationSettings, ModelRequest, UserMessage
from verimap.config import Loop, Planning, RunConfig, Sampling, given
from verimap.planning.planner import LLMPlanner
from verimap.policies import Paper, SmallModel, get_policies
from verimap.policies.small_model import ReplyCap
from verimap.testing import InProcessSandboxDouble, ScriptedModel
from verimap.wiring import default_policies, resolve, runs_locally


def local(model: ScriptedModel) -> ScriptedModel:
    """A test double that says it is the local model, as `OpenAIModel(local=True)` does."""
    model.local = True  # type: ignore[attr-defined]
    return model


def apply(config: RunConfig, names: list[str]) -> RunConfig:
    """`config` under `names`, or under its own policies when it names some."""
    user = given(config)
    return resolve({**user, "policies": user.get("policies", names)}).config


def test_the_small_model_policy_fills_what_the_user_left_unset():
    cfg = apply(RunConfig(loop=Loop(max_retries=2)), ["small-model"])
    assert (
        cfg.sampling.temperature,
        cfg.sampling.retry_temperature,
        cfg.planning.max_nodes,
        cfg.loop.max_iterations,
    ) == (
        0.0,
        0.7,
        1,
        2,
    )
    assert cfg.loop.max_retries == 2 and cfg.policies == ["small-model"]
    assert cfg.verify.checks == ["arithmetic", "answer_agreement", "code_agreement"]
    # A temperature the user chose is theirs for retries too.
    mine = apply(
        RunConfig(sampling=Sampling(temperature=0.5), planning=Planning(max_nodes=3)),
        ["small-model"],
    )
    assert (
        mine.sampling.temperature,
        mine.sampling.retry_temperature,
        mine.planning.max_nodes,
    ) == (0.5, None, 3)
    # A config that names its policies keeps them.
    assert apply(RunConfig(policies=[]), ["small-model"]).planning.max_nodes is None


def test_the_paper_policy_turns_every_beyond_paper_switch_off():
    cfg = apply(RunConfig(), ["paper"])
    assert cfg.loop.sequential and not cfg.loop.reuse_verified and cfg.verify.checks == []
    assert RunConfig().execution.opening_calls and not cfg.execution.opening_calls
    assert (
        cfg.sampling.temperature,
        cfg.sampling.top_p,
        cfg.verify.vacuity_check,
        cfg.verify.full_feedback,
    ) == (
        1.0,
        1.0,
        False,
        True,
    )
    assert Paper().planner_options() == {
        "fallback": False,
        "task_examples": False,
        "fix_plans": False,
    }


def test_unknown_policies_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown policy 'fast'"):
        apply(RunConfig(policies=["fast"]), [])
    with pytest.raises(
        ValueError, match="the policies are: small-model, small-model-planner, paper"
    ):
        get_policies(["fast"])


def test_the_local_model_gets_the_small_model_policy_an_endpoint_none():
    assert runs_locally({"executor": local(ScriptedModel(["{}"]))})
    assert not runs_locally({"executor": ScriptedModel(["{}"])})
    assert default_policies(True) == ["small-model"] and default_policies(False) == []
    assert resolve(RunConfig(), local=True).config.policies == ["small-model"]


async def test_the_reply_cap_lowers_a_request_for_more_and_keeps_one_for_less():
    model = ScriptedModel(["ok", "ok"])
    capped = SmallModel(reply_tokens=100).wrap(model)
    assert isinstance(capped, ReplyCap) and capped.limit == 100
    for asked in (4096, 50):
        await capped.request(
            ModelRequest(
                messages=[UserMessage(content="hi")], settings=GenerationSettings(max_tokens=asked)
            )
        )
    assert [r.settings.max_tokens for r in model.requests] == [100, 50]


async def test_build_on_the_local_model_runs_the_small_model_policy_and_says_so():
    model = local(ScriptedModel(['{"answer": 6}'] * 20))
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    coord = verimap.build(
        {"executor": model, "planner": model}, InProcessSandboxDouble(), events=bus
    )
    r = await coord.run("What is 2 * 3?")
    assert r.plans[0].rule == "one-node plan (small-model policy)" and r.plan_rules == [
        "1: one-node plan (small-model policy)"
    ]
    assert r.fallback_iterations == []  # no fallback happened
    (start,) = [e for e in seen if isinstance(e, RunStart)]
    assert start.policies and start.policies[0]["name"] == "small-model"
    assert start.policies[0]["max_nodes"] == 1
    assert all(
        q.settings.max_tokens is not None and q.settings.max_tokens <= 1024 for q in model.requests
    )


async def test_no_policy_on_the_local_model_when_the_config_says_none():
    model = local(ScriptedModel(['{"nodes": []}'] * 8 + ['{"answer": 6}'] * 8))
    coord = verimap.build(
        {"executor": model, "planner": model},
        InProcessSandboxDouble(),
        config=RunConfig(planning=Planning(plan_repairs=0), policies=[]),
    )
    r = await coord.run("What is 2 * 3?")
    assert r.plan_rules == [] and r.fallback_iterations == [1]  # the planner was asked


async def test_the_paper_policy_has_no_fallback_plan():
    planner_model = ScriptedModel(['{"nodes": []}'] * 4)
    coord = verimap.build(
        {"executor": ScriptedModel(["{}"]), "planner": planner_model},
        InProcessSandboxDouble(),
        config=RunConfig(policies=["paper"]),
    )
    assert isinstance(coord.planner, LLMPlanner) and coord.planner.fallback is False
    r = await coord.run("What is 2 * 3?")
    assert r.status == "failed" and "planning failed" in (r.error or "")


def test_under_the_paper_policy_map_v_hands_off_text_as_the_papers_map():
    map_v = resolve({"policies": ["paper"]}, method="map-v").config
    assert (
        map_v.execution.structured_io,
        map_v.execution.context_generations,
        map_v.loop.sequential,
    ) == (False, 2, True)
    verimap_ = resolve({"policies": ["paper"]}, method="verimap").config
    assert (
        verimap_.execution.structured_io
        and verimap_.verify.checks == []
        and not verimap_.loop.reuse_verified
    )


def test_the_shipped_paper_configs_run_the_paper_policy():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2] / "eval"
    configs = [p for p in root.glob("*/*.yaml") if p.parent.name != "examples"]
    assert len(configs) == 18
    for path in configs:
        assert yaml.safe_load(path.read_text())["policy"] == "paper", path


def test_the_planner_variant_lets_the_model_plan_and_the_default_stays_one_node():
    default, planned = (apply(RunConfig(), [n]) for n in ("small-model", "small-model-planner"))
    assert (default.planning.max_nodes, default.planning.plan_repairs) == (1, 0)
    assert (planned.planning.max_nodes, planned.planning.plan_repairs) == (4, 1)
    assert planned.verify.checks == default.verify.checks
    (small,) = get_policies(["small-model"])
    (planner,) = get_policies(["small-model-planner"])
    assert small.planner_options() == {"one_node_rule": "one-node plan (small-model policy)"}
    assert planner.planner_options() == {"decoding": "staged"}
    assert SmallModel(planner="model").planner_options() == planner.planner_options()
    assert planner.record()["planner"] == "model" and small.record()["planner"] == "rule"


async def test_build_under_the_planner_variant_asks_the_model_for_the_plan_in_stages():
    def answer(req):
        if req.schema_name == "outline":
            return {"steps": []}
        if req.schema_name == "node final":
            return {
                "instruction": "Work out 2 * 3.",
                "inputs": ["USER_TASK"],
                "checks": [{"check": "arithmetic"}],
                "criteria": [],
            }
        return '{"answer": 6}'

    model = local(ScriptedModel(answer))
    coord = verimap.build(
        {"executor": model, "planner": model},
        InProcessSandboxDouble(),
        config=RunConfig(policies=["small-model-planner"]),
    )
    assert isinstance(coord.planner, LLMPlanner) and coord.planner.staged is not None
    r = await coord.run("What is 2 * 3?")
    assert r.plan_rules == [] and r.answer == 6, r.error
    assert [q.schema_name for q in model.requests[:2]] == ["outline", "node final"]
