"""A variable set to nothing (as shells, CI and `docker run -e` leave them) means unset."""

from __future__ import annotations

import pytest

from verimap.base.env import EnvError, getenv, getenv_float, getenv_int

BLANK = ["", "  ", "\t\n"]


@pytest.mark.parametrize("blank", BLANK)
def test_blank_is_the_same_as_unset(monkeypatch, blank):
    monkeypatch.setenv("VERIMAP_X", blank)
    assert getenv("VERIMAP_X") is None
    assert getenv("VERIMAP_X", "d") == "d"
    assert getenv_int("VERIMAP_X", 7) == 7
    assert getenv_float("VERIMAP_X", 0.5) == 0.5


def test_values_are_returned_as_given(monkeypatch):
    monkeypatch.setenv("VERIMAP_X", " a b ")
    assert getenv("VERIMAP_X", "d") == " a b "
    monkeypatch.setenv("VERIMAP_X", " 12 ")
    assert getenv_int("VERIMAP_X", 7) == 12
    assert getenv_float("VERIMAP_X", 0.5) == 12.0
    monkeypatch.delenv("VERIMAP_X")
    assert getenv("VERIMAP_X", "d") == "d"


def test_a_bad_number_names_the_variable(monkeypatch):
    monkeypatch.setenv("VERIMAP_X", "lots")
    with pytest.raises(EnvError, match=r"VERIMAP_X must be an integer, got 'lots'"):
        getenv_int("VERIMAP_X", 7)
    with pytest.raises(ValueError, match=r"VERIMAP_X must be a number, got 'lots'"):
        getenv_float("VERIMAP_X", 0.5)
    monkeypatch.setenv("VERIMAP_X", "1.5")
    with pytest.raises(EnvError, match="VERIMAP_X"):
        getenv_int("VERIMAP_X", 7)


@pytest.mark.parametrize("blank", BLANK)
def test_blank_n_ctx_and_max_tokens_use_the_defaults(monkeypatch, blank):
    from verimap.local.server import DEFAULT_N_CTX, default_n_ctx
    from verimap.policies.small_model import reply_cap

    monkeypatch.setenv("VERIMAP_N_CTX", blank)
    monkeypatch.setenv("VERIMAP_LOCAL_MAX_TOKENS", blank)
    assert default_n_ctx() == DEFAULT_N_CTX
    assert reply_cap() == 1024


def test_a_non_numeric_n_ctx_is_a_server_error_naming_the_variable(monkeypatch):
    from verimap.local.server import ServerError, default_n_ctx

    monkeypatch.setenv("VERIMAP_N_CTX", "8k")
    with pytest.raises(ServerError, match=r"VERIMAP_N_CTX must be an integer, got '8k'"):
        default_n_ctx()
    monkeypatch.setenv("VERIMAP_N_CTX", "4096")
    assert default_n_ctx() == 4096


def test_blank_directories_fall_back_to_the_defaults(monkeypatch, tmp_path):
    from verimap.evals.data import resolve
    from verimap.evals.retrieval import default_cache_dir
    from verimap.local import catalog
    from verimap.sandbox import image

    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("VERIMAP_CACHE_DIR", "VERIMAP_STATE_DIR", "VERIMAP_CACHE", "VERIMAP_DATA"):
        monkeypatch.setenv(name, " ")
    for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, "")
    assert catalog.cache_dir() == tmp_path / ".cache" / "verimap"
    assert catalog.state_dir() == tmp_path / ".local" / "state" / "verimap"
    assert default_cache_dir() == tmp_path / ".cache" / "verimap" / "retrieval"
    assert image.cache_dir() == tmp_path / ".cache" / "verimap" / "sandbox"
    assert resolve("humaneval").origin != "env"


def test_a_blank_docker_host_means_the_local_daemon(monkeypatch):
    from verimap.sandbox.docker import DockerSandbox

    monkeypatch.setenv("DOCKER_HOST", " ")
    assert DockerSandbox(image="verimap-test:none", check=False).transport == "socket"
