"""`verimap eval --ray`'s options: the environment goes to a cluster only by name."""

from __future__ import annotations

import click
import pytest

from verimap.cli.cluster import sent_env


@pytest.fixture(autouse=True)
def env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-own-key-0123456789")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")


def test_only_named_variables_go_and_the_kept_endpoint_is_noted(capsys):
    assert sent_env(["OPENAI_API_KEY", "OPENAI_API_KEY"], None) == ["OPENAI_API_KEY"]
    assert "environment's OPENAI_BASE_URL is not sent" in capsys.readouterr().err
    assert sent_env([], None) == []
    assert "OPENAI_API_KEY and OPENAI_BASE_URL are not sent" in capsys.readouterr().err
    assert sent_env([], "local") == [] and capsys.readouterr().err == ""


def test_a_named_variable_that_is_not_set_is_an_error(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(click.BadParameter, match="HF_TOKEN not set"):
        sent_env(["HF_TOKEN"], None)


def test_ray_env_without_a_cluster_is_refused(tmp_path):
    from click.testing import CliRunner

    from verimap.cli import main

    args = [
        "eval",
        "-b",
        "gsm8k",
        "--limit",
        "1",
        "--ray-env",
        "OPENAI_API_KEY",
        "--out",
        str(tmp_path / "out"),
    ]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert "--ray-env" in r.output and "needs --ray" in r.output
    assert not (tmp_path / "out").exists()
