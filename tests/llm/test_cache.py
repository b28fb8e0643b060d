"""The disk cache of model calls, around the real client on a loopback endpoint."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import stat

import pytest

from verimap.base.accounting import Budget, BudgetExceeded, Ledger, MeteredModel, ModelCall
from verimap.base.messages import GenerationSettings, ModelRequest, ModelResponse, UserMessage
from verimap.base.model import ModelError
from verimap.base.usage import Usage
from verimap.llm import cache
from verimap.llm.cache import (
    CachedModel,
    CacheError,
    CallStore,
    default_cache_dir,
    is_sampled,
    user_secret,
)
from verimap.llm.openai_model import OpenAIModel

from .conftest import Reply, completion, error

KEY = "sk-test-cache-key-9876"


def ask(text: str = "hi", role: str = "executor", **settings) -> ModelRequest:
    return ModelRequest(
        messages=[UserMessage(content=text)],
        settings=GenerationSettings(**settings),
        role=role,
    )


def client(url: str, name: str = "m", key: str = KEY) -> OpenAIModel:
    return OpenAIModel(name, base_url=url, api_key=key, max_retries=0)


async def test_a_greedy_request_is_answered_from_disk_the_second_time(http_server, tmp_path):
    http_server.replies = [Reply(body=completion("42", prompt=11, completion_tokens=4))]
    m = CachedModel(client(http_server.url), tmp_path)
    first = await m.request(ask(temperature=0))
    again = await CachedModel(client(http_server.url), tmp_path).request(ask(temperature=0))
    assert len(http_server.requests) == 1
    assert (again.content, again.model, again.finish_reason) == ("42", "m", "stop")
    assert (first.usage.calls, first.usage.prompt_tokens) == (1, 11)
    assert again.usage == Usage(
        cached_calls=1, saved_prompt_tokens=11, saved_completion_tokens=4, saved_cost=0.0
    )


async def test_the_key_is_the_request_the_endpoint_and_the_account(http_server, tmp_path):
    http_server.replies = [Reply(body=completion())]
    await CachedModel(client(http_server.url), tmp_path).request(ask(temperature=0))
    await CachedModel(client(http_server.url), tmp_path).request(ask(temperature=0))
    assert len(http_server.requests) == 1  # the same request at the same endpoint
    differs = [
        (client(http_server.url, name="m2"), ask(temperature=0)),
        (client(http_server.url + "/other"), ask(temperature=0)),
        (client(http_server.url, key="sk-another-key-1234"), ask(temperature=0)),
        (client(http_server.url), ask(temperature=0, max_tokens=9)),
        (client(http_server.url), ask(role="judge", temperature=0)),
        (client(http_server.url), ask("hello", temperature=0)),
    ]
    for model, req in differs:
        await CachedModel(model, tmp_path).request(req)
    assert len(http_server.requests) == 1 + len(differs)
    files = list(tmp_path.rglob("*.json"))
    assert len(files) == 1 + len(differs)
    assert all(KEY not in f.read_text() for f in files)
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700


def test_sampled_means_above_zero_or_left_to_the_endpoint():
    assert is_sampled(ask()) and is_sampled(ask(temperature=0.7))
    assert not is_sampled(ask(temperature=0)) and not is_sampled(ask(temperature=0, seed=3))


async def test_sampled_requests_are_not_cached_unless_asked(http_server, tmp_path, caplog):
    http_server.replies = [Reply(body=completion())]
    m = CachedModel(client(http_server.url), tmp_path)
    with caplog.at_level(logging.INFO, logger="verimap"):
        for _ in range(2):
            await m.request(ask(temperature=0.7))
            await m.request(ask())  # the endpoint's default temperature: sampled
    assert len(http_server.requests) == 4 and not list(tmp_path.rglob("*.json"))
    assert caplog.text.count("are not cached; `--cache sampled` caches them too") <= 1


async def test_with_sampled_a_re_run_replays_the_samples_in_order(http_server, tmp_path):
    http_server.replies = [Reply(body=completion("a")), Reply(body=completion("b"))]
    m = CachedModel(client(http_server.url), tmp_path, sampled=True)
    first = [(await m.request(ask(temperature=0.7))).content for _ in range(2)]
    assert first == ["a", "b"]  # repeats within a run stay distinct samples
    rerun = CachedModel(client(http_server.url), tmp_path, sampled=True)
    assert [(await rerun.request(ask(temperature=0.7))).content for _ in range(2)] == first
    assert len(http_server.requests) == 2


async def test_a_corrupt_entry_is_a_miss_reported_once_and_rewritten(http_server, tmp_path, caplog):
    http_server.replies = [Reply(body=completion("fresh"))]
    m = CachedModel(client(http_server.url), tmp_path)
    path = m.store.path(m.key(ask(temperature=0)))
    path.parent.mkdir(parents=True)
    path.write_text('{"format": 1, "key": "trunc')
    other = m.store.path(m.key(ask("other", temperature=0)))
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_text(json.dumps({"format": 1, "key": other.stem, "response": {"usage": "x"}}))
    with caplog.at_level(logging.WARNING, logger="verimap"):
        assert (await m.request(ask(temperature=0))).content == "fresh"
        await m.request(ask("other", temperature=0))
        path.write_text("garbage")
        assert m.store.get(path.stem) is None
    assert len(http_server.requests) == 2
    assert caplog.text.count(f"cache entry {path} is unreadable") == 1
    assert caplog.text.count(f"cache entry {other} is unreadable") == 1
    path.unlink()
    await m.request(ask(temperature=0))
    assert m.store.get(path.stem) is not None  # rewritten with the fresh reply
    hit = await m.request(ask(temperature=0))
    assert hit.content == "fresh" and hit.usage.cached_calls == 1


async def test_failed_calls_are_not_stored(http_server, tmp_path):
    http_server.replies = [error(400, "bad request")]
    m = CachedModel(client(http_server.url), tmp_path)
    with pytest.raises(ModelError):
        await m.request(ask(temperature=0))
    assert not list(tmp_path.rglob("*.json"))


async def test_a_metered_hit_is_no_call_but_budgets_count_it(http_server, tmp_path):
    http_server.replies = [Reply(body=completion(prompt=10, completion_tokens=5))]
    await CachedModel(client(http_server.url), tmp_path).request(ask(temperature=0))
    heard: list[ModelCall] = []
    ledger = Ledger(Budget(max_llm_calls=1), on_call=heard.append)
    m = MeteredModel(CachedModel(client(http_server.url), tmp_path), ledger)
    await m.request(ask(temperature=0))
    total = ledger.usage.total
    assert (total.calls, total.cached_calls, total.saved_tokens, total.total_tokens) == (
        0,
        1,
        15,
        0,
    )
    assert heard[0].cache_hit and heard[0].prompt_tokens == 0
    with pytest.raises(BudgetExceeded, match="1 of 1 calls"):  # a re-run stops where it stopped
        await m.request(ask("next", temperature=0))
    assert len(http_server.requests) == 1


def test_the_default_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("VERIMAP_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "verimap" / "calls"
    monkeypatch.setenv("VERIMAP_CACHE_DIR", str(tmp_path / "own"))
    assert default_cache_dir() == tmp_path / "own"


def _write_many(root: str, n: int) -> None:
    store = CallStore(root)
    for i in range(n):
        store.put("ab" * 32, ModelResponse(content=f"same key {i}"), {})
        store.put(f"{i:02x}" + "c" * 62, ModelResponse(content=str(i)), {})


def test_processes_writing_at_once_leave_only_whole_entries(tmp_path, caplog):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_many, args=(str(tmp_path), 60)) for _ in range(3)]
    for p in procs:
        p.start()
    store = CallStore(tmp_path)
    with caplog.at_level(logging.WARNING, logger="verimap"):
        seen = [store.get("ab" * 32) for _ in range(300)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(r is None or r.content.startswith("same key") for r in seen)
    assert "unreadable" not in caplog.text
    assert not list(tmp_path.rglob(".tmp-*"))
    assert len(list(tmp_path.rglob("*.json"))) == 61


# ---- what the key holds, and whose cache it is ----------------------------------------------


def gguf(path, content: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_two_model_files_of_one_name_and_size_have_their_own_entries(tmp_path, monkeypatch):
    a = gguf(tmp_path / "a" / "qwen.gguf", b"GGUF" + b"\x01" * 60)
    b = gguf(tmp_path / "b" / "qwen.gguf", b"GGUF" + b"\x02" * 60)
    same = gguf(tmp_path / "c" / "qwen.gguf", a.read_bytes())
    assert a.stat().st_size == b.stat().st_size

    def key(weights) -> str:
        m = CachedModel(
            client("http://127.0.0.1:1/v1"),
            tmp_path / "cache",
            endpoint="local/qwen",
            model_file=weights,
        )
        return m.key(ask(temperature=0))

    assert key(a) != key(b)
    assert key(a) == key(same)  # the content names the model, wherever it lies
    # Hashed once per file: a second model on the same file reads nothing.
    monkeypatch.setattr(cache.hashlib, "file_digest", lambda *a, **k: pytest.fail("hashed again"))
    assert key(a) == key(same)


def test_a_missing_model_file_is_a_clear_error(tmp_path):
    m = CachedModel(
        client("http://127.0.0.1:1/v1"),
        tmp_path / "cache",
        endpoint="local/qwen",
        model_file=tmp_path / "gone.gguf",
    )
    with pytest.raises(CacheError, match="cannot read the model file"):
        m.key(ask(temperature=0))


def test_the_url_s_query_and_the_account_are_in_the_key(tmp_path, monkeypatch):
    base = "http://127.0.0.1:1/v1"

    def key(url: str) -> str:
        return CachedModel(client(url), tmp_path).key(ask(temperature=0))

    keys = {key(base), key(base + "?api-version=1"), key(base + "?api-version=2")}
    assert len(keys) == 3
    plain = key(base)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-one")
    org = key(base)
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-one")
    assert len({plain, org, key(base)}) == 3


def test_the_api_key_is_in_the_key_as_an_hmac_under_the_user_s_secret(tmp_path):
    secret_a, secret_b = b"a" * 32, b"b" * 32
    m = CachedModel(client("http://127.0.0.1:1/v1"), tmp_path, secret=secret_a)
    digest = m.where()["credential"]
    assert digest and KEY not in json.dumps(m.where())
    # Not a plain hash, which anyone holding the cache could test guesses of the key against.
    assert digest != hashlib.sha256(KEY.encode()).hexdigest()
    other_user = CachedModel(client("http://127.0.0.1:1/v1"), tmp_path, secret=secret_b)
    assert other_user.where()["credential"] != digest
    assert other_user.key(ask(temperature=0)) != m.key(ask(temperature=0))
    other_key = CachedModel(
        client("http://127.0.0.1:1/v1", key="sk-another-key-1234"), tmp_path, secret=secret_a
    )
    assert other_key.where()["credential"] != digest
    with_password = CachedModel(client("http://u:hunter2pass@127.0.0.1:1/v1"), tmp_path)
    assert "hunter2pass" not in json.dumps(with_password.where())


async def test_a_cache_written_by_another_user_answers_nothing(http_server, tmp_path):
    http_server.replies = [Reply(body=completion("theirs"))]
    await CachedModel(client(http_server.url), tmp_path, secret=b"x" * 32).request(
        ask(temperature=0)
    )
    mine = await CachedModel(client(http_server.url), tmp_path).request(ask(temperature=0))
    assert len(http_server.requests) == 2 and mine.usage.cached_calls == 0


def test_the_user_s_secret_is_made_once_private_and_refused_when_not(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "_secrets", {})
    path = tmp_path / "state" / cache.SECRET_FILE
    first = user_secret(path)
    assert len(first) == 32 and user_secret(path) == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    monkeypatch.setattr(cache, "_secrets", {})
    assert user_secret(path) == first  # read back by the next process
    path.chmod(0o644)
    monkeypatch.setattr(cache, "_secrets", {})
    with pytest.raises(CacheError, match="not a private file"):
        user_secret(path)


async def test_a_secret_in_a_reply_is_not_stored(http_server, tmp_path, monkeypatch):
    env_key = "env-held-secret-value-42"
    monkeypatch.setenv("OPENAI_API_KEY", env_key)
    shaped = "sk-proj-abcdefghijklmnop0123456789"
    http_server.replies = [Reply(body=completion(f"keys: {shaped} and {env_key} and {KEY}"))]
    m = CachedModel(client(http_server.url), tmp_path)
    live = await m.request(ask(temperature=0))
    assert shaped in live.content  # the run itself gets the reply as it came
    (entry,) = tmp_path.rglob("*.json")
    text = entry.read_text()
    assert shaped not in text and env_key not in text and KEY not in text
    assert "[REDACTED]" in text
    again = await CachedModel(client(http_server.url), tmp_path).request(ask(temperature=0))
    assert again.usage.cached_calls == 1 and shaped not in again.content


def test_a_cache_directory_others_may_write_is_refused(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(CacheError, match=r"may be written by others \(mode 777\)"):
        CachedModel(client("http://127.0.0.1:1/v1"), root)
    root.chmod(0o775)
    with pytest.raises(CacheError, match="chmod go-w"):
        CachedModel(client("http://127.0.0.1:1/v1"), root)
    root.chmod(0o755)
    CachedModel(client("http://127.0.0.1:1/v1"), root)


def test_a_cache_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(root, 65534, -1)
    else:  # no chown without root: this process is the other user instead
        uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)
    with pytest.raises(CacheError, match="belongs to another user"):
        CachedModel(client("http://127.0.0.1:1/v1"), root)


def test_a_new_cache_directory_is_made_private(tmp_path):
    CachedModel(client("http://127.0.0.1:1/v1"), tmp_path / "new" / "calls")
    assert stat.S_IMODE((tmp_path / "new" / "calls").stat().st_mode) == 0o700
