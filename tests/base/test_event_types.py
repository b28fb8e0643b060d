"""Typed events: every type round-trips through a trace line read strictly and leniently, the
wire format is the one traces always had, and no payload makes the lenient reader raise."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from verimap.base import events as ev
from verimap.base.events import EventBus, JsonlTraceWriter, read_trace
from verimap.base.run_context import RunContext
from verimap.base.usage import Usage, UsageByRole
from verimap.base.verdicts import VFVerdict
from verimap.observe.trace_files import as_event, read_typed_events

WIRE_KEYS = ["type", "run_id", "ts", "node_id", "iteration", "attempt", "data"]

# One event of every type (two where a type has two shapes), with the fields its emitter sends.
EXAMPLES: list[ev.TypedEvent] = [
    ev.RunStart(task="How much?", config={"loop": {"max_retries": 3}}),
    ev.RunStart(task="t", config={}, method="sc", parameters={"samples": 4}),
    ev.Plan(
        plan={
            "nodes": [
                {
                    "id": "a",
                    "instruction": "i",
                    "inputs": ["USER_TASK"],
                    "outputs": {"x": "number"},
                    "verification": [],
                }
            ]
        }
    ),
    ev.PlanInvalid(problems=["node 'a' has no verification functions"], reply="{}"),
    ev.PlanFallback(reason="no valid plan after 2 repairs"),
    ev.PlanRule(rule="one-node plan (small-model policy)"),
    ev.VfVacuous(vf="positive"),
    ev.PlanKept(failed_node="a", error="the reply holds no JSON object"),
    ev.NodeStart(instruction="Compute x.", inputs={"USER_TASK": "t", "b.y": [1, 2]}),
    ev.NodeReused(outputs={"x": 1}),
    ev.Attempt(),
    ev.ToolCall(tool="calculator", arguments='{"expression": "6*7"}', result="42", duration_s=0.01),
    ev.ModelCall(
        role="executor",
        model="m",
        provider="openai",
        purpose="execute:a",
        server_address="127.0.0.1",
        server_port=8080,
        temperature=0.0,
        max_tokens=512,
        prompt_tokens=10,
        completion_tokens=2,
        cost=0.001,
        duration_s=0.5,
        finish_reason="stop",
    ),
    ev.Agreement(answers=[{"x": 1}], needed=2),
    ev.CrossCheck(
        kind="program", program=1, answer=391.0, reply="def solution(): ...", tries=1, printed="391"
    ),
    ev.CrossCheck(kind="code", reference=0, agreed=False, compared=12, input="f(3)"),
    ev.VfVerdict(
        name="positive",
        vf_type="python",
        outcome="FAIL",
        message="x <= 0",
        traceback="AssertionError",
        weight=1.0,
        strength="weak",
        verify_s=0.2,
    ),
    ev.AttemptResult(passed=False, error="no JSON", outputs=None, reply="I think..."),
    ev.AttemptResult(passed=True, score=1.0, outputs={"x": 1}, reply=""),
    ev.Retry(feedback={"previous_outputs": {"x": -1}, "failures": [], "fresh": False}),
    ev.RetriesStopped(reason="no answer can reach 3 agreeing votes"),
    ev.NodeFinish(status="unconfirmed", outputs={"x": 1}, answers=[{"x": 1}, {"x": 2}]),
    ev.Replan(failed_node="a", failure={"node_id": "a", "verdicts": []}),
    ev.BudgetExhausted(error="max_llm_calls=3 reached"),
    ev.Error(error="RuntimeError: boom", traceback="Traceback (most recent call last): ..."),
    ev.Finish(
        status="success",
        final_output={"x": 1},
        error=None,
        error_kind=None,
        iterations=1,
        retries=0,
        wall_time_s=1.5,
        usage=UsageByRole(roles={"executor": Usage(calls=1, prompt_tokens=10)}),
    ),
    ev.Replies(replies=["The answer is 391."], answers=[391], program={"answer": 391.0}),
    ev.Vote(
        by="value",
        samples=3,
        groups=[{"answer": 18, "count": 2, "samples": [0, 2]}],
        winner=18,
        share=2 / 3,
    ),
]


def test_the_examples_cover_every_event_type():
    assert {type(e) for e in EXAMPLES} == set(ev.EVENT_TYPES.values())
    assert len(ev.EVENT_TYPES) == 25


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.type)
def test_each_event_round_trips_through_a_trace_line(tmp_path, event):
    path = tmp_path / "t.jsonl"
    bus, seen, writer = EventBus(), [], JsonlTraceWriter(path)
    bus.subscribe(seen.append)
    bus.subscribe(writer)
    ctx = RunContext(run_id="r", sink=bus.emit).for_iteration(2).for_attempt("a", 1)
    ctx.emit(event)
    writer.close()
    (sent,) = seen
    assert type(sent) is type(event) and sent.data == event.data
    assert (sent.run_id, sent.iteration, sent.node_id, sent.attempt) == ("r", 2, "a", 1)
    line = json.loads(path.read_text())
    assert list(line) == WIRE_KEYS and line["type"] == event.TYPE and line["data"] == event.data
    # What an emitter gave is what the line holds: no defaults filled in, no key renamed.
    assert line["data"].keys() == {
        ("type" if name == "vf_type" else name) for name in event.model_fields_set
    }
    assert read_trace(path) == [sent] and ev.parse_event(path.read_text()) == sent
    typed, problems = read_typed_events(path)
    assert typed == [sent] and problems == []
    assert as_event(line) == (sent, None)


def test_lines_written_before_the_types_read_the_same():
    """Lines as the emitters wrote them when every event was `Event(type, data=dict)`."""
    old = [
        {
            "type": "vf_verdict",
            "data": {
                "name": "p",
                "type": "llm",
                "outcome": "PASS",
                "message": "",
                "traceback": "",
                "explanation": "fine",
                "weight": 1.0,
                "strength": None,
                "verify_s": 0.5,
            },
        },
        {
            "type": "model_call",
            "data": {
                "role": "judge",
                "model": "m",
                "provider": "openai",
                "response_model": "m",
                "server_address": None,
                "server_port": None,
                "output_type": "json",
                "temperature": None,
                "top_p": None,
                "max_tokens": 256,
                "prompt_tokens": 5,
                "completion_tokens": 1,
                "cached_tokens": 0,
                "cost": 0.0,
                "duration_s": 0.1,
                "finish_reason": "stop",
                "tool_calls": 0,
                "error": None,
                "error_type": None,
            },
        },
        {
            "type": "cross_check",
            "data": {
                "kind": "program",
                "program": 2,
                "answer": None,
                "reply": "r",
                "tries": 1,
                "error": "TIMEOUT: t",
                "sandbox_fault": False,
            },
        },
        {"type": "finish", "data": {"status": "failed", "error": "e"}},
        {"type": "node_start", "node_id": "x", "iteration": 1},
    ]
    for line in old:
        e = ev.parse_event({"run_id": "r", "ts": 1.0, **line})
        assert e.type == line["type"] and e.data == line.get("data", {})
        assert ev.parse_event(e.wire()) == e
    assert ev.parse_event(old[0]).vf_type == "llm"  # type: ignore[union-attr]


def test_a_misspelled_or_mistyped_field_is_a_validation_error():
    with pytest.raises(ValidationError, match="Extra inputs"):
        ev.NodeStart(instruction="i", input={})  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="valid string"):
        ev.ToolCall(tool=1)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="finite"):
        ev.AttemptResult(passed=True, score=float("nan"))
    with pytest.raises(ValidationError):  # the verdict's VF type is `type` on the wire only
        ev.parse_event(
            {"type": "vf_verdict", "data": {"name": "n", "vf_type": "python", "outcome": "PASS"}}
        )


def test_read_trace_is_strict_on_known_types_and_generic_on_others(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"type": "my_step", "run_id": "r", "data": {"k": 1}}) + "\n")
    (e,) = read_trace(p)
    assert type(e) is ev.Event and e.data == {"k": 1}
    p.write_text(json.dumps({"type": "node_finish", "run_id": "r", "data": {"stat": "ok"}}) + "\n")
    with pytest.raises(ValidationError):
        read_trace(p)


def test_the_verdict_event_carries_every_field_of_a_verdict():
    """`VfVerdict` repeats `result.VFVerdict`'s fields (its `type` is taken by the envelope):
    a field added there must be added here, or every verdict stops validating."""
    fields = set(VFVerdict.model_fields) - {"type"} | {"vf_type", "verify_s"}
    assert fields == {k for k, _ in ev.VfVerdict.DATA_KEYS}
    v = VFVerdict(name="n", type="check", outcome="FAIL", message="m", strength="strong")
    e = ev.VfVerdict.of(v, 0.25)
    assert e.data == {**v.model_dump(mode="json"), "verify_s": 0.25}


def test_a_secret_in_a_typed_payload_is_masked_on_the_bus_and_in_the_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0987654321")
    bus, seen, writer = EventBus(), [], JsonlTraceWriter(tmp_path / "t.jsonl")
    bus.subscribe(seen.append)
    bus.subscribe(writer)
    bus.emit(
        ev.NodeStart(
            run_id="r", instruction="use tok-0987654321", inputs={"api_key": "abc", "n": 3}
        )
    )
    writer.close()
    (e,) = seen
    assert isinstance(e, ev.NodeStart)
    assert e.instruction == f"use {ev.REDACTED}" and e.inputs == {"api_key": ev.REDACTED, "n": 3}
    assert "tok-0987654321" not in (tmp_path / "t.jsonl").read_text()
    clean = ev.Attempt(run_id="r")
    assert bus.emit(clean) is clean  # nothing to mask: not rebuilt


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3)
    ),
    max_leaves=8,
)
_types = st.sampled_from([*ev.EVENT_TYPES, "note"])


@st.composite
def _records(draw: st.DrawFn) -> dict:
    typ = draw(_types)
    cls = ev.EVENT_TYPES.get(typ)
    keys = [k for _, k in cls.DATA_KEYS] if cls is not None else []
    # Keys of the type (and the attribute `vf_type`), keys it does not have, marked `zz`.
    key = st.sampled_from([*keys, "vf_type"]) | st.text(max_size=4).map(lambda s: f"zz{s}")
    data = draw(st.dictionaries(key, _json, max_size=6))
    return {
        "type": typ,
        "run_id": "r",
        "ts": 1.0,
        "node_id": draw(st.none() | st.just("a")),
        "iteration": 1,
        "attempt": draw(st.none() | st.just(1)),
        "data": data,
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(_records(), min_size=1, max_size=5))
def test_any_payload_validates_or_is_read_as_a_generic_event_with_a_reason(
    tmp_path_factory, records
):
    for record in records:
        e, why = as_event(record)
        known = record["type"] in ev.EVENT_TYPES
        if known and why is None:
            assert isinstance(e, ev.EVENT_TYPES[record["type"]])
            assert e.data.keys() == record["data"].keys() and ev.parse_event(e.wire()) == e
        else:
            assert type(e) is ev.Event and e.type == record["type"]
            assert e.data == record["data"] and (why is None) == (not known)
        if why is not None:
            assert why.startswith(f"a `{record['type']}` event that does not validate (")
            assert "zz" not in why  # the reason never quotes what the line holds
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    events, problems = read_typed_events(path)
    assert [e.type for e in events] == [r["type"] for r in records] and problems == []
