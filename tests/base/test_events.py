import json

import pytest

from verimap.base.events import (
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


def test_the_trace_writer_appends_to_its_own_traces_only(tmp_path):
    from verimap.base.out_files import OutFileError

    trace = tmp_path / "run.jsonl"
    for run in ("a", "b"):
        writer = JsonlTraceWriter(trace)
        writer(NodeStart(run_id=run, node_id="n"))
        writer.close()
    assert [e.run_id for e in read_trace(trace)] == ["a", "b"]
    bashrc = tmp_path / ".bashrc"
    bashrc.write_text("alias ll='ls -l'\n")
    link = tmp_path / "planted.jsonl"
    link.symlink_to(bashrc)
    for path in (bashrc, link):
        with pytest.raises(OutFileError, match="refusing"):
            JsonlTraceWriter(path)
    assert bashrc.read_text() == "alias ll='ls -l'\n"
