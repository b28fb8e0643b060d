import pytest

from verimap.accounting import BudgetExceeded, Ledger, MeteredModel, ModelCall, metered
from verimap.config import Budget
from verimap.llm.base import GenerationSettings, Model, ModelError, ModelRequest, ModelResponse
from verimap.testing import ScriptedModel
from verimap.usage import Usage


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
        content="the secret plan", finish_reason="stop",
        usage=Usage(prompt_tokens=120, completion_tokens=30, cached_tokens=64),
    )  # fmt: skip
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
