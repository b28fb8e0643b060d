"""A cloned repository's pyproject.toml is not the user's: until `verimap trust`, its
[tool.verimap] sets only harmless options, a command that would use another fails naming it,
and the commands that must work anywhere (`model stop`, `model status`, `--help`) still do.
Each attack here worked before the rule; everything is loopback and bounded."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from verimap.cli import eval as eval_mod
from verimap.cli import main
from verimap.cli.defaults import HARMLESS, walk

KEY = "sk-the-users-own-key-0123456789"


class Recorder:
    """An OpenAI-compatible host on 127.0.0.1 that records every request and refuses it (401,
    which no client retries)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def _reply(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0) or 0))
                outer.seen.append((self.path, self.headers.get("authorization", "")))
                body = json.dumps({"error": {"message": "no"}}).encode()
                self.send_response(401)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _reply

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def repo(monkeypatch, tmp_path) -> Path:
    """A cloned repository as the current directory; the user's state elsewhere."""
    d = tmp_path / "repo"
    d.mkdir()
    monkeypatch.chdir(d)
    monkeypatch.setenv("VERIMAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for name in list(os.environ):
        if name.startswith("VERIMAP_") and name != "VERIMAP_STATE_DIR":
            monkeypatch.delenv(name)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return d


@pytest.fixture
def seen(monkeypatch) -> dict:
    """What `verimap eval` would run with, without running it."""
    got: dict = {}

    def fake(**kw):
        got.update(kw)
        return 0

    monkeypatch.setattr(eval_mod, "run_command", fake)
    return got


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    r = Recorder()
    yield r
    r.close()


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def said(r) -> str:
    return " ".join(r.output.split())


def test_a_repositorys_endpoint_gets_no_request_and_the_run_is_refused(repo, recorder, monkeypatch):
    (repo / "pyproject.toml").write_text(
        f'[tool.verimap]\nbase-url = "{recorder.url}"\nmodel = "gpt-4o-mini"\n'
    )
    monkeypatch.setenv("VERIMAP_RUN_SANDBOX", "process")  # the user's: a fast start if it ran
    r = invoke("run", "What is 2 + 2?", "--max-nodes", "1", "--quiet")
    assert r.exit_code == 2, r.output
    assert recorder.seen == []
    text = said(r)
    assert "pyproject.toml is not trusted" in text
    assert (
        "[tool.verimap] 'base-url': it chooses where requests, prompts and your API key go" in text
    )
    assert "[tool.verimap] 'model'" in text
    assert "(--base-url, --model)" in text and "verimap trust pyproject.toml" in text
    assert not (repo / "runs").exists()  # nothing started


def test_the_same_value_given_by_the_user_is_theirs(repo, seen):
    (repo / "pyproject.toml").write_text('[tool.verimap]\nbase-url = "http://127.0.0.1:9/v1"\n')
    r = invoke("eval", "-b", "gsm8k", "--base-url", "http://127.0.0.1:8/v1")
    assert r.exit_code == 0, r.output
    assert seen["base_url"] == "http://127.0.0.1:8/v1"
    (repo / "mine.yaml").write_text("base_url: http://127.0.0.1:7/v1\n")
    r = invoke("eval", "-b", "gsm8k", "--config", "mine.yaml")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("trusted", [False, True])
def test_a_ray_address_is_the_command_lines_only(repo, seen, trusted):
    (repo / "pyproject.toml").write_text('[tool.verimap.eval]\nray = "127.0.0.1:6379"\n')
    if trusted:
        assert invoke("trust").exit_code == 0
    r = invoke("eval", "-b", "gsm8k")
    assert r.exit_code == 2 and not seen
    assert "[tool.verimap.eval] 'ray' is not allowed: it joins a cluster" in said(r)


def test_a_ray_address_is_not_read_from_the_environment_or_a_config_file(repo, seen, monkeypatch):
    monkeypatch.setenv("VERIMAP_EVAL_RAY", "127.0.0.1:6379")
    r = invoke("eval", "-b", "gsm8k")
    assert r.exit_code == 0, r.output
    assert seen["ray"] is None
    (repo / "c.yaml").write_text("benchmark: gsm8k\nray: 127.0.0.1:6379\n")
    r = invoke("eval", "--config", "c.yaml")
    assert r.exit_code == 2
    assert "'ray' is not allowed in a config file" in said(r)


def test_a_file_to_write_is_refused_and_not_written(repo, monkeypatch, tmp_path):
    run = repo / "run"
    run.mkdir()
    victim = tmp_path / "victim.md"
    (repo / "pyproject.toml").write_text(f'[tool.verimap.eval.report]\nout-file = "{victim}"\n')
    monkeypatch.setattr("verimap.evals.report.report_dirs", lambda dirs: "the report")
    r = invoke("eval", "report", str(run))
    assert r.exit_code == 2, r.output
    assert "'out-file': it names a file or directory to read or write" in said(r)
    assert not victim.exists()


@pytest.mark.parametrize("value", ["process", "auto"])
def test_a_sandbox_that_isolates_less_is_refused(repo, seen, value):
    (repo / "pyproject.toml").write_text(f'[tool.verimap]\nsandbox = "{value}"\n')
    r = invoke("eval", "-b", "gsm8k")
    assert r.exit_code == 2 and not seen
    assert f"[tool.verimap] 'sandbox' = \"{value}\": only 'docker' is harmless" in said(r)


def test_harmless_settings_apply_and_say_so_within_their_caps(repo, seen):
    (repo / "pyproject.toml").write_text(
        '[tool.verimap]\nsandbox = "docker"\nmax-attempts = 2\n\n'
        '[tool.verimap.eval]\nmax-tasks = 8\nepochs = 3\nquiet = true\nbenchmark = "gsm8k"\n'
    )
    r = invoke("eval")
    assert r.exit_code == 0, r.output
    assert (seen["sandbox_kind"], seen["max_attempts"], seen["max_tasks"]) == ("docker", 2, 8)
    assert (seen["epochs"], seen["quiet"], seen["benchmark"]) == (3, True, "gsm8k")
    notes = [x for x in r.stderr.splitlines() if "[tool.verimap]" in x]
    assert len(notes) == 1 and notes[0].startswith("note: from pyproject.toml")
    for shown in (
        'benchmark = "gsm8k"',
        "epochs = 3",
        "max-tasks = 8",
        'sandbox = "docker"',
        "max-attempts = 2",
        "quiet = true",
    ):
        assert shown in notes[0]


@pytest.mark.parametrize(
    ("setting", "why"),
    [
        ("epochs = 1000", "'epochs' = 1000: more than 10"),
        ('benchmark = "secrets.jsonl"', "'benchmark' = \"secrets.jsonl\": a file's name"),
        ("keep-server = true", "'keep-server': it keeps a process running"),
        ('model-file = "m.gguf"', "'model-file': it loads a model file"),
        ('cache-dir = "cache"', "'cache-dir': it names a file or directory"),
        ("resume = true", "'resume': it names a file or directory"),
    ],
)
def test_each_refusal_names_the_setting_and_why(repo, seen, setting: str, why: str):
    (repo / "pyproject.toml").write_text(f"[tool.verimap.eval]\n{setting}\n")
    r = invoke("eval", *([] if setting.startswith("benchmark") else ["-b", "gsm8k"]))
    assert r.exit_code == 2 and not seen, r.output
    assert f"[tool.verimap.eval] {why}" in said(r)


def test_run_refuses_a_repositorys_verification_and_trace_dir(repo):
    (repo / "pyproject.toml").write_text(
        '[tool.verimap.run]\nverification = "none"\ntrace-dir = "/tmp"\npolicy = "none"\n'
    )
    r = invoke("run", "task")
    assert r.exit_code == 2
    for key in ("'verification'", "'trace-dir'", "'policy'"):
        assert key in said(r)


HOSTILE = (
    '[tool.verimap]\nbogus = 1\nmodel = "evil"\nbase-url = "http://127.0.0.1:9/v1"\n'
    'sandbox = "process"\n\n[tool.verimap.eval]\nout = "/tmp"\n'
)


@pytest.mark.parametrize(
    "args",
    [
        ["model", "stop"],
        ["model", "status"],
        ["model", "status", "--json"],
        ["eval", "--help"],
        ["run", "--help"],
        ["model", "stop", "--help"],
        ["trust", "--list"],
    ],
)
def test_housekeeping_and_help_work_in_a_hostile_directory(repo, args):
    (repo / "pyproject.toml").write_text(HOSTILE)
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    assert "unknown setting [tool.verimap] 'bogus'" in r.stderr
    if args == ["model", "stop"]:
        assert "no server was running" in r.stderr
        assert "'model': it chooses where requests" in r.stderr and "; ignored" in r.stderr


def test_an_unreadable_file_is_a_warning_not_a_failure(repo):
    (repo / "pyproject.toml").write_text("[tool.verimap\nx = ")
    r = invoke("model", "stop")
    assert r.exit_code == 0, r.output
    assert "warning: pyproject.toml:" in r.stderr and "ignored" in r.stderr


def test_a_trusted_file_is_honoured_until_it_changes(repo, seen, tmp_path):
    pyproject = repo / "pyproject.toml"
    pyproject.write_text('[tool.verimap.eval]\nbase-url = "http://127.0.0.1:9/v1"\n')
    assert invoke("eval", "-b", "gsm8k").exit_code == 2

    r = invoke("trust")
    assert r.exit_code == 0, r.output
    assert str(pyproject.resolve()) in r.output
    assert '[tool.verimap.eval] base-url = "http://127.0.0.1:9/v1"' in r.output
    store = tmp_path / "state" / "trusted.json"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700

    r = invoke("eval", "-b", "gsm8k")
    assert r.exit_code == 0, r.output
    assert seen["base_url"] == "http://127.0.0.1:9/v1"
    assert "[tool.verimap] (trusted): base-url" in r.stderr
    seen.clear()

    pyproject.write_text('[tool.verimap.eval]\nbase-url = "http://127.0.0.1:8/v1"\n')
    r = invoke("eval", "-b", "gsm8k")
    assert r.exit_code == 2 and not seen
    assert "pyproject.toml is changed since you trusted it" in said(r)
    assert "changed" in invoke("trust", "--list").output

    assert invoke("trust", str(repo)).exit_code == 0  # a directory: its pyproject.toml
    assert invoke("eval", "-b", "gsm8k").exit_code == 0
    r = invoke("trust", "--revoke")
    assert r.exit_code == 0 and "no longer trusted" in r.output
    assert invoke("eval", "-b", "gsm8k").exit_code == 2
    assert "no file is trusted" in invoke("trust", "--list").output


def test_a_store_others_could_write_trusts_nothing(repo, seen, tmp_path):
    (repo / "pyproject.toml").write_text(
        '[tool.verimap.eval]\nbase-url = "http://127.0.0.1:9/v1"\n'
    )
    assert invoke("trust").exit_code == 0
    os.chmod(tmp_path / "state" / "trusted.json", 0o666)
    r = invoke("eval", "-b", "gsm8k")
    assert r.exit_code == 2 and not seen
    assert "is not a private file of this user" in r.stderr


def test_trust_refuses_a_file_it_cannot_read(repo):
    (repo / "pyproject.toml").write_text("[tool.verimap\n")
    r = invoke("trust")
    assert r.exit_code == 2 and "cannot trust" in said(r)
    assert invoke("trust", "missing.toml").exit_code == 2


def test_the_allowlist_names_only_options_that_exist():
    """A key on the list that no command has would be a typo, allowing nothing it means to."""
    flags = {
        o[2:]
        for _, cmd in walk(main)
        for p in cmd.params
        for o in getattr(p, "opts", [])
        if o.startswith("--")
    }
    assert set(HARMLESS) <= flags
