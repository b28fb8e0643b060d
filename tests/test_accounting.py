import pytest

from verimap.accounting import BudgetExceeded, Ledger, ModelCall, call_model, use_ledger
from verimap.config import Budget
from verimap.llm.base import ModelError, ModelRequest, ModelResponse
from verimap.testing import ScriptedModel
from verimap.usage import Usage


def req(role="executor"):
    return ModelRequest(messages=[{"role": "user", "content": "x" * 400}], role=role)


async def test_ledger_records_per_role_including_failures():
    m = ScriptedModel(["a" * 40, RuntimeError("boom"), "b"])
    ledger = Ledger()
    with use_ledger(ledger):
        await call_model(m, req("planner"))
        with pytest.raises(ModelError):
            await call_model(m, req("executor"))
        await call_model(m, req("judge"))
    roles = ledger.usage.roles
    assert roles["planner"].calls == 1 and roles["planner"].prompt_tokens == 100
    assert roles["executor"].failed_calls == 1 and roles["executor"].calls == 1
    assert ledger.usage.total.calls == 3


async def test_every_call_is_heard_with_its_cost_and_no_text():
    reply = ModelResponse(
        content="the secret plan", finish_reason="stop",
        usage=Usage(prompt_tokens=120, completion_tokens=30, cached_tokens=64),
    )  # fmt: skip
    m = ScriptedModel([reply, RuntimeError("boom")], name="gpt-x")
    m.base_url = "https://user:pw@models.example:8443/v1"  # type: ignore[attr-defined]
    heard: list[ModelCall] = []
    with use_ledger(Ledger(on_call=heard.append)):
        await call_model(
            m, req("judge").model_copy(update={"temperature": 0.2, "response_schema": {}})
        )
        with pytest.raises(ModelError):
            await call_model(m, req("executor"))
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
    ledger = Ledger(Budget(max_llm_calls=2))
    with use_ledger(ledger):
        await call_model(m, req())
        await call_model(m, req())
        with pytest.raises(BudgetExceeded) as ei:
            await call_model(m, req())
    assert ei.value.limit == "max_llm_calls"
    assert m.calls == 2  # the third call never reached the model


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


async def test_no_ledger_means_no_accounting():
    m = ScriptedModel(["x"])
    assert (await call_model(m, req())).content == "x"
