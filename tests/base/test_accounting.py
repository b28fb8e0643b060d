import asyncio

import pytest

from verimap.base.accounting import (
    Budget,
    BudgetExceeded,
    Ledger,
    MeteredModel,
    ModelCall,
    UnpricedModel,
    metered,
)
from verimap.base.messages import GenerationSettings, ModelRequest, ModelResponse
from verimap.base.model import ModelError
from verimap.base.protocols import Model
from verimap.base.usage import Price, Usage, cost_of, price_known
from verimap.testing import ScriptedModel


def req(role="executor"):
    return ModelRequest(messages=[{"role": "user", "content": "x" * 400}], role=role)


async def test_ledger_records_per_role_including_failures():
    ledger = Ledger()
    m = MeteredModel(ScriptedModel(["a" * 40, RuntimeError("boom"), "b"]), ledger)
    await m.request(req("planner"))
    with pytest.raises(ModelError):
        await m.request(req("executor"))
    await m.request(req("judge"))
    roles = ledger.usage.roles
    assert roles["planner"].calls == 1 and roles["planner"].prompt_tokens == 100
    assert roles["executor"].failed_calls == 1 and roles["executor"].calls == 1
    assert ledger.usage.total.calls == 3
    assert len(ledger.faults) == 1 and "executor model error" in ledger.faults[0]


async def test_every_call_is_heard_with_its_cost_and_no_text():
    reply = ModelResponse(
        content="the secret plan",
        finish_reason="stop",
        usage=Usage(prompt_tokens=120, completion_tokens=30, cached_tokens=64),
    )
    inner = ScriptedModel([reply, RuntimeError("boom")], name="gpt-x")
    inner.base_url = "https://user:pw@models.example:8443/v1"  # type: ignore[attr-defined]
    heard: list[ModelCall] = []
    also: list[ModelCall] = []
    m = MeteredModel(inner, Ledger(on_call=heard.append), on_call=also.append)
    await m.request(
        req("judge").model_copy(
            update={"settings": GenerationSettings(temperature=0.2), "response_schema": {}}
        )
    )
    with pytest.raises(ModelError):
        await m.request(req("executor"))
    assert also == heard
    ok, failed = heard
    assert (ok.role, ok.model, ok.provider, ok.response_model) == (
        "judge",
        "gpt-x",
        "verimap.scripted",
        "gpt-x",
    )
    assert (ok.prompt_tokens, ok.completion_tokens, ok.cached_tokens) == (120, 30, 64)
    assert ok.finish_reason == "stop" and ok.output_type == "json" and ok.temperature == 0.2
    assert (ok.server_address, ok.server_port) == ("models.example", 8443)
    assert ok.duration_s >= 0 and ok.error is None
    assert (
        failed.role == "executor"
        and failed.error_type == "ModelError"
        and "boom" in (failed.error or "")
    )
    dumped = str([c.model_dump() for c in heard])
    assert "secret plan" not in dumped and "xxxx" not in dumped and "pw" not in dumped


async def test_call_budget_refuses_before_the_call():
    m = ScriptedModel(lambda r: "ok")
    metered_m = MeteredModel(m, Ledger(Budget(max_llm_calls=2)))
    await metered_m.request(req())
    await metered_m.request(req())
    with pytest.raises(BudgetExceeded) as ei:
        await metered_m.request(req())
    assert ei.value.limit == "max_llm_calls"
    assert m.calls == 2  # the third call never reached the model


async def test_failed_calls_count_against_the_budget():
    m = ScriptedModel([RuntimeError("down"), RuntimeError("down"), "never"])
    ledger = Ledger(Budget(max_llm_calls=2))
    metered_m = MeteredModel(m, ledger)
    for _ in range(2):
        with pytest.raises(ModelError):
            await metered_m.request(req())
    with pytest.raises(BudgetExceeded):
        await metered_m.request(req())
    assert m.calls == 2
    assert ledger.usage.total.calls == 2 and ledger.usage.total.failed_calls == 2
    assert len(ledger.faults) == 2


async def test_a_metered_model_is_the_model_it_wraps_to_its_callers():
    m = ScriptedModel(["x"], name="gpt-x")
    ledger = Ledger()
    wrapped = MeteredModel(m, ledger)
    assert isinstance(wrapped, Model)
    assert (wrapped.name, wrapped.supports_tools, wrapped.provider) == (
        m.name,
        m.supports_tools,
        m.provider,
    )
    # Metering an already metered model with the same ledger charges each call once.
    twice = metered(wrapped, ledger)
    await twice.request(req())
    assert ledger.usage.total.calls == 1 and wrapped.requests == m.requests


async def test_token_and_cost_budgets():
    ledger = Ledger(Budget(max_tokens=50, max_cost=1.0))
    ledger.check()
    ledger.record("executor", Usage(calls=1, prompt_tokens=60))
    with pytest.raises(BudgetExceeded, match="token"):
        ledger.check()
    ledger2 = Ledger(Budget(max_cost=1.0))
    ledger2.record("executor", Usage(calls=1, cost=1.5))
    with pytest.raises(BudgetExceeded, match="cost"):
        ledger2.check()


def test_wall_clock_budget_uses_clock():
    now = [0.0]
    ledger = Ledger(Budget(timeout_s=5), clock=lambda: now[0])
    ledger.check()
    now[0] = 6.0
    with pytest.raises(BudgetExceeded, match="wall-clock"):
        ledger.check()


async def test_cached_tokens_are_recorded_apart_from_the_prompt():
    reply = ModelResponse(content="x", usage=Usage(calls=1, prompt_tokens=700, cached_tokens=640))
    ledger = Ledger()
    await MeteredModel(ScriptedModel([reply]), ledger).request(req())
    assert ledger.usage.roles["executor"].cached_tokens == 640
    assert ledger.usage.roles["executor"].prompt_tokens == 700


async def test_a_call_records_the_reply_limit_the_endpoint_was_sent():
    # The local client caps every reply (`max_tokens_cap`); the trace shows the cap, not the ask.
    inner = ScriptedModel(["a", "b", "c"])
    heard: list[ModelCall] = []
    m = MeteredModel(inner, Ledger(on_call=heard.append))
    asked = req().model_copy(update={"settings": GenerationSettings(max_tokens=2048)})
    await m.request(asked)
    inner.max_tokens_cap = 1024  # type: ignore[attr-defined]
    await m.request(asked)
    await m.request(req())
    assert [c.max_tokens for c in heard] == [2048, 1024, 1024]


async def test_a_call_cut_off_by_a_timeout_counts_as_failed_with_its_prompt_tokens():
    # Before, a cancelled call left no trace: a run cut off mid-call had no usage for its role.
    heard: list[ModelCall] = []
    ledger = Ledger(on_call=heard.append)
    m = MeteredModel(ScriptedModel(["never"], latency_s=30), ledger)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(m.request(req("executor")), timeout=0.05)
    used = ledger.usage.roles["executor"]
    assert (used.calls, used.failed_calls, used.completion_tokens) == (1, 1, 0)
    assert 100 <= used.prompt_tokens <= 120  # 400 characters sent, about 4 a token
    (call,) = heard
    assert call.error_type == "CallCancelled" and call.prompt_tokens == used.prompt_tokens
    assert not ledger.faults  # a cut-off call is the budget's doing, not the infrastructure's


async def test_a_run_cut_off_mid_call_reports_the_role_it_was_calling():
    import verimap
    from verimap.config import RunConfig
    from verimap.planning.fixed_planners import TemplatePlanner
    from verimap.testing import InProcessSandboxDouble

    plan = {
        "nodes": [
            {
                "id": "a",
                "instruction": "do a",
                "inputs": ["USER_TASK"],
                "outputs": ["x"],
                "verification": [],
            }
        ]
    }
    slow = ScriptedModel(lambda r: "never", latency_s=30)
    run = verimap.build(
        {"executor": slow, "judge": slow},
        InProcessSandboxDouble(),
        config=RunConfig(budget=Budget(timeout_s=0.3)),
        planner=TemplatePlanner(plan),
    )
    r = await asyncio.wait_for(run.run("task"), timeout=10)
    assert r.status == "budget_exhausted"
    assert r.usage.roles["executor"].failed_calls >= 1
    assert r.usage.roles["executor"].prompt_tokens > 0


@pytest.mark.parametrize(
    ("model", "at_least"),
    [("gpt-4o", 2.5), ("gpt-4.1-mini", 0.4), ("gpt-4.1-nano", 0.1), ("claude-sonnet-4-5", 3.0)],
)
def test_well_known_models_cost_their_list_price(model, at_least):
    # The hand-kept table priced gpt-4o and Claude at $0, and gpt-4.1-mini/nano as gpt-4.1.
    million_in = cost_of(Usage(prompt_tokens=1_000_000), model)
    assert price_known(model) and million_in >= at_least
    assert million_in != cost_of(Usage(prompt_tokens=1_000_000), "gpt-4.1") or model == "gpt-4.1"


def test_a_callers_own_price_wins_and_an_unknown_model_is_not_free():
    own = {"my-finetune": Price(input=1.0, output=2.0)}
    used = Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000)
    assert cost_of(used, "my-finetune", own) == 3.0 and price_known("my-finetune", own)
    assert not price_known("my-finetune") and cost_of(used, "my-finetune") == 0.0


async def test_a_cost_budget_on_a_model_with_no_known_price_is_an_error_that_says_so():
    m = ScriptedModel(["never"], name="my-finetune")
    metered_m = MeteredModel(m, Ledger(Budget(max_cost=1.0)))
    with pytest.raises(UnpricedModel, match=r"no price is known for model 'my-finetune'") as ei:
        await metered_m.request(req())
    assert ei.value.limit == "max_cost" and m.calls == 0
    # Without a cost budget, or with a price, the same model may be called.
    await MeteredModel(ScriptedModel(["ok"], name="my-finetune"), Ledger()).request(req())
    priced = ScriptedModel(
        ["ok"], name="my-finetune", prices={"my-finetune": Price(input=1, output=1)}
    )
    await MeteredModel(priced, Ledger(Budget(max_cost=1.0))).request(req())


async def test_a_run_with_a_cost_budget_on_an_unpriced_model_stops_before_its_first_call():
    import verimap
    from verimap.config import RunConfig
    from verimap.testing import InProcessSandboxDouble

    m = ScriptedModel(["never"], name="my-finetune")
    run = verimap.build(
        {"planner": m, "executor": m},
        InProcessSandboxDouble(),
        config=RunConfig(budget=Budget(max_cost=0.5)),
    )
    r = await run.run("task")
    assert r.status == "budget_exhausted" and m.calls == 0
    assert "no price is known for model 'my-finetune'" in (r.error or "")
