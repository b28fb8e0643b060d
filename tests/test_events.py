import json

from verimap.events import (
    REDACTED,
    Event,
    EventBus,
    JsonlTraceWriter,
    NodeStart,
    read_trace,
    redact,
)


def test_redacts_env_secrets_fields_and_key_shapes(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "super-secret-value-123")
    data = {
        "msg": "using super-secret-value-123 now",
        "api_key": "abc",
        "nested": [{"Authorization": "Bearer abcdefghijklmnop"}],
        "other": "token sk-ABCDEFGHIJKLMNOPQRSTUV here",
        "n": 3,
    }
    out = redact(data)
    text = json.dumps(out)
    assert (
        "super-secret-value-123" not in text
        and "sk-ABCDEFGHIJ" not in text
        and "abcdefghijklmnop" not in text
    )
    assert out["api_key"] == REDACTED and out["n"] == 3 and out["msg"].startswith("using ")


async def test_bus_fanout_sync_async_and_failing_subscriber(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_TOKEN", "tok-1234567890")
    bus = EventBus()
    seen, aseen = [], []

    async def asub(e):
        aseen.append(e.type)

    def bad(e):
        raise RuntimeError("sub broke")

    writer = JsonlTraceWriter(tmp_path / "t" / "run.jsonl")
    bus.subscribe(seen.append)
    bus.subscribe(asub)
    bus.subscribe(bad)
    bus.subscribe(writer)
    bus.emit(NodeStart(run_id="r", instruction="key tok-1234567890"))
    await bus.drain()
    writer.close()
    assert seen[0].instruction == f"key {REDACTED}"
    assert aseen == ["node_start"]
    assert bus.errors and "sub broke" in bus.errors[0]
    events = read_trace(tmp_path / "t" / "run.jsonl")
    assert (
        isinstance(events[0], NodeStart)
        and "tok-1234567890" not in (tmp_path / "t" / "run.jsonl").read_text()
    )


def test_unsubscribe():
    bus = EventBus()
    seen = []
    off = bus.subscribe(seen.append)
    off()
    bus.emit(Event(type="x", run_id="r"))
    assert seen == []
