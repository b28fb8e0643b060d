"""Endpoint choice: local by default, a configured endpoint when asked; CLI options."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from verimap.base.model import ModelError
from verimap.cli import endpoint_options
from verimap.llm.openai_model import OpenAIModel
from verimap.local.endpoint import (
    connect,
    default_temperature,
    is_remote,
    resolve_local,
)
from verimap.policies import SmallModel


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for k in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "VERIMAP_MODEL_FILE",
        "VERIMAP_LOCAL_MODEL",
        "VERIMAP_DIALECT",
    ):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("VERIMAP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("VERIMAP_STATE_DIR", str(tmp_path / "state"))


def test_local_unless_an_endpoint_is_configured(monkeypatch):
    assert not is_remote(None, None)
    assert not is_remote("qwen2.5-coder-0.5b", None)
    assert not is_remote("local", None)
    assert is_remote("gpt-4o-mini", None)
    assert is_remote(None, "http://127.0.0.1:8000/v1")
    assert is_remote("qwen2.5-coder-0.5b", "http://127.0.0.1:8000/v1")  # an explicit URL wins
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert is_remote(None, None)
    assert not is_remote("0.5b", None)


def test_local_models_sample_greedily_unless_told_otherwise(monkeypatch, tmp_path):
    assert default_temperature() == SmallModel().temperature == 0.0
    assert default_temperature(model="0.5b") == 0.0
    assert default_temperature(model_file=tmp_path / "m.gguf") == 0.0
    assert default_temperature(model="gpt-4o-mini") is None
    assert default_temperature(base_url="http://127.0.0.1:8000/v1") is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert default_temperature() is None


def test_missing_weights_error_names_the_pull_command():
    with pytest.raises(ModelError, match=r"verimap model pull --model qwen2\.5-coder-0\.5b"):
        resolve_local("0.5b")
    with pytest.raises(ModelError, match=r"verimap model pull --model qwen2\.5-coder-1\.5b"):
        resolve_local(None)


def test_model_file_option_and_env(tmp_path, monkeypatch):
    f = tmp_path / "my-model.gguf"
    f.write_bytes(b"GGUF")
    assert resolve_local(None, f).model_file == f
    monkeypatch.setenv("VERIMAP_MODEL_FILE", str(f))
    choice = resolve_local(None)
    assert (choice.model_file, choice.alias) == (f, "my-model")
    with pytest.raises(ModelError, match="model file not found"):
        resolve_local(None, tmp_path / "missing.gguf")


async def test_remote_connect_builds_one_model_per_role(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    async with connect(
        planner_model="gpt-4.1", executor_model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1"
    ) as models:
        assert set(models) == {"planner", "executor", "judge"}
        assert [models[r].name for r in ("planner", "executor", "judge")] == [
            "gpt-4.1",
            "gpt-4o-mini",
            "gpt-4o-mini",
        ]
        assert models["executor"] is models["judge"]
        assert all(
            isinstance(m, OpenAIModel) and m.base_url == "http://127.0.0.1:9/v1"
            for m in models.values()
        )


async def test_local_connect_rejects_per_role_models_without_endpoint():
    with pytest.raises(ModelError, match="needs an endpoint"):
        async with connect(model="0.5b", planner_model="qwen2.5-coder-1.5b"):
            pass


async def test_unknown_dialect_is_rejected(monkeypatch):
    monkeypatch.setenv("VERIMAP_DIALECT", "yaml")
    with pytest.raises(ModelError, match="unknown dialect"):
        async with connect(model="gpt-4o-mini"):
            pass


def test_endpoint_options_decorator_passes_all_flags():
    seen = {}

    @click.command()
    @endpoint_options
    def cmd(**kw):
        seen.update(kw)

    r = CliRunner().invoke(
        cmd,
        [
            "--model",
            "m",
            "--planner-model",
            "p",
            "--base-url",
            "http://h/v1",
            "--keep-server",
            "--model-file",
            "x.gguf",
        ],
    )
    assert r.exit_code == 0, r.output
    assert seen["model"] == "m" and seen["planner_model"] == "p" and seen["keep_server"] is True
    assert seen["base_url"] == "http://h/v1" and str(seen["model_file"]) == "x.gguf"
    assert seen["executor_model"] is None and seen["judge_model"] is None


def test_missing_runtime_error_names_the_install_command(monkeypatch, tmp_path):
    from verimap.local import server

    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    monkeypatch.setattr(server, "runtime_available", lambda: False)
    with pytest.raises(server.ServerError, match=r"setup_local_model\.sh.*verimap\[local\]"):
        server.start_server(f)


def test_cli_pull_rejects_unknown_model():
    from verimap.cli import main

    r = CliRunner().invoke(main, ["model", "pull", "--model", "gpt-5"])
    assert r.exit_code != 0 and "unknown local model 'gpt-5'" in r.output


def test_cli_status_json_lists_catalog():
    import json

    from verimap.cli import main

    r = CliRunner().invoke(main, ["model", "status", "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert {m["name"] for m in report["models"]} == {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    assert not any(m["pulled"] for m in report["models"])  # empty VERIMAP_CACHE_DIR
    assert report["servers"] == []


@pytest.mark.parametrize("blank", ["", "  "])
def test_blank_openai_variables_mean_the_local_model(monkeypatch, blank):
    monkeypatch.setenv("OPENAI_API_KEY", blank)
    monkeypatch.setenv("OPENAI_BASE_URL", blank)
    assert not is_remote(None, None)
    assert default_temperature() == SmallModel().temperature
    assert is_remote("gpt-4o-mini", None)


def test_blank_local_model_variables_mean_the_default_model(monkeypatch):
    monkeypatch.setenv("VERIMAP_MODEL_FILE", " ")
    monkeypatch.setenv("VERIMAP_LOCAL_MODEL", "")
    with pytest.raises(ModelError, match=r"verimap model pull --model qwen2\.5-coder-1\.5b"):
        resolve_local(None)


async def test_the_local_model_is_cached_by_its_file_s_content(monkeypatch, tmp_path):
    from verimap.base.messages import ModelRequest, UserMessage
    from verimap.llm.cache import CachedModel
    from verimap.local import server as srv

    def running(model_file, *, alias, keep, timeout):  # a server already up: nothing starts
        info = srv.ServerInfo(
            pid=1, port=9, model_file=str(model_file), alias=alias, token="t" * 16
        )
        return info, False

    monkeypatch.setattr(srv, "ensure_server", running)
    req = ModelRequest(messages=[UserMessage(content="2 + 2?")])
    keys = []
    for where, fill in (("a", b"\x01"), ("b", b"\x02")):  # one name, one size, two models
        weights = tmp_path / where / "qwen.gguf"
        weights.parent.mkdir()
        weights.write_bytes(b"GGUF" + fill * 60)
        async with connect(model_file=weights, cache="on") as models:
            cached = models["executor"]
            assert isinstance(cached, CachedModel)
            keys.append(cached.key(req))
    assert keys[0] != keys[1]
