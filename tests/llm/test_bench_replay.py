"""benchmarks/_replay.py over real HTTP on loopback: what one run recorded, a later run is served
for byte-identical requests only, so its `sent` count is the measure of a changed request."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from verimap.base.messages import GenerationSettings, ModelRequest, UserMessage
from verimap.base.model import ModelError
from verimap.llm.openai_model import OpenAIModel

from .conftest import Reply, completion

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "benchmarks"))

from _replay import replaying  # noqa: E402


def ask(text: str, temperature: float = 0.0) -> ModelRequest:
    return ModelRequest(
        messages=[UserMessage(content=text)],
        settings=GenerationSettings(temperature=temperature),
        role="executor",
    )


def model(url: str) -> OpenAIModel:
    return OpenAIModel("m", base_url=url, api_key="sk-test-replay", max_retries=0)


async def test_a_second_run_is_served_what_the_first_recorded(http_server, tmp_path):
    http_server.replies = [Reply(body=completion("first")), Reply(body=completion("second"))]
    with replaying(tmp_path) as rec:
        a = await model(http_server.url).request(ask("q1"))
        b = await model(http_server.url).request(ask("q2"))
    assert (a.content, b.content) == ("first", "second")
    assert (rec.sent, rec.replayed) == (2, 0)

    http_server.replies = [Reply(body=completion("live"))]
    with replaying(tmp_path) as again:
        a2 = await model(http_server.url).request(ask("q1"))
        b2 = await model(http_server.url).request(ask("q2"))
    assert (a2.content, b2.content) == ("first", "second")
    assert (again.sent, again.replayed) == (0, 2)
    assert len(http_server.requests) == 2


async def test_a_changed_request_goes_to_the_server_and_is_counted(http_server, tmp_path):
    http_server.replies = [Reply(body=completion("a"))]
    with replaying(tmp_path):
        await model(http_server.url).request(ask("q"))
    http_server.replies = [Reply(body=completion("b"))]
    with replaying(tmp_path) as again:
        other = await model(http_server.url).request(ask("q", temperature=0.7))
    assert other.content == "b"
    assert (again.sent, again.replayed) == (1, 0)


async def test_the_kth_identical_request_gets_the_kth_reply(http_server, tmp_path):
    http_server.replies = [Reply(body=completion("one")), Reply(body=completion("two"))]
    with replaying(tmp_path):
        first = [(await model(http_server.url).request(ask("q", 0.7))).content for _ in range(2)]
    with replaying(tmp_path) as again:
        second = [(await model(http_server.url).request(ask("q", 0.7))).content for _ in range(2)]
    assert first == second == ["one", "two"]
    assert again.sent == 0


async def test_a_server_error_is_not_recorded(http_server, tmp_path):
    http_server.replies = [Reply(status=503, body={"error": {"message": "busy"}})]
    with replaying(tmp_path) as rec, pytest.raises(ModelError):
        await model(http_server.url).request(ask("q"))
    assert rec.sent == 1
    assert not any(tmp_path.rglob("*.json"))


async def test_the_transport_is_restored_after_the_block(http_server, tmp_path):
    http_server.replies = [Reply(body=completion("x"))]
    with replaying(tmp_path):
        await model(http_server.url).request(ask("q"))
    await model(http_server.url).request(ask("q"))
    assert len(http_server.requests) == 2


async def test_a_packed_recording_replays_as_its_directory_and_stays_as_it_was(
    http_server, tmp_path
):
    from _replay import pack

    http_server.replies = [Reply(body=completion("one")), Reply(body=completion("two"))]
    with replaying(tmp_path / "dir"):
        for q in ("q1", "q2"):
            await model(http_server.url).request(ask(q))
    packed = tmp_path / "rec.jsonl.gz"
    assert pack(tmp_path / "dir", packed) == 2
    before = packed.read_bytes()
    assert pack(tmp_path / "dir", tmp_path / "again.jsonl.gz") == 2
    assert (tmp_path / "again.jsonl.gz").read_bytes() == before  # the same bytes every time

    http_server.replies = [Reply(body=completion("live"))]
    with replaying(packed) as again:
        got = [(await model(http_server.url).request(ask(q))).content for q in ("q1", "q2", "q3")]
    assert got == ["one", "two", "live"]
    assert (again.replayed, again.sent) == (2, 1)
    assert packed.read_bytes() == before
