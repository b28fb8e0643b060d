"""Every command that writes a file for the user replaces an existing one only when the path was
typed on the command line or verimap wrote the file: a path from the environment, from
[tool.verimap] of a cloned project or from a default cannot replace `~/.bashrc`."""

import gzip
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from verimap.cli import main
from verimap.evals.report import REPORT_MARK
from verimap.testing import need

BASHRC = "alias ll='ls -l'\n"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A working directory with a fake ~/.bashrc in it, and no VERIMAP_* settings."""
    for name in (
        "VERIMAP_EVAL_REPORT_OUT_FILE",
        "VERIMAP_VIEW_OUT_FILE",
        "VERIMAP_EXPORT_PREFERENCES_OUT_FILE",
        "VERIMAP_HUMANEVAL_SCORE_OUT_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".bashrc").write_text(BASHRC)
    return tmp_path


def eval_dir(root: Path, models: dict | None = None) -> Path:
    """An eval directory with two finished tasks."""
    d = root / "run"
    d.mkdir()
    config = {"benchmark": "gsm8k", "method": "verimap", "models": models or {"executor": "m"}}
    (d / "config.json").write_text(json.dumps(config))
    recs = [
        {
            "key": f"r0/gsm8k/{i}",
            "run": 0,
            "task_id": f"gsm8k/{i}",
            "benchmark": "gsm8k",
            "method": "verimap",
            "correct": bool(i),
            "verified": True,
        }
        for i in range(2)
    ]
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return d


def cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def test_eval_report_refuses_a_path_from_the_environment(home):
    d = eval_dir(home)
    r = cli("eval", "report", str(d), env={"VERIMAP_EVAL_REPORT_OUT_FILE": str(home / ".bashrc")})
    assert r.exit_code == 1 and "refusing to replace" in r.output and ".bashrc" in r.output
    assert (home / ".bashrc").read_text() == BASHRC


def test_eval_report_refuses_a_path_from_pyproject(home):
    d = eval_dir(home)
    (home / "pyproject.toml").write_text(
        f'[tool.verimap.eval.report]\nout-file = "{home / ".bashrc"}"\n'
    )
    r = cli("eval", "report", str(d))
    assert r.exit_code != 0
    assert (home / ".bashrc").read_text() == BASHRC


def test_eval_report_replaces_a_path_typed_on_the_command_line(home):
    d = eval_dir(home)
    r = cli("eval", "report", str(d), "--out-file", str(home / ".bashrc"))
    assert r.exit_code == 0, r.output
    text = (home / ".bashrc").read_text()
    assert text.startswith(REPORT_MARK + "\n# verimap eval report")


def test_eval_report_replaces_its_own_report_whatever_named_the_path(home):
    d = eval_dir(home)
    out = home / "report.md"
    env = {"VERIMAP_EVAL_REPORT_OUT_FILE": str(out)}
    assert cli("eval", "report", str(d), env=env).exit_code == 0
    first = out.read_text()
    out.write_text(first + "a line of an older report\n")
    r = cli("eval", "report", str(d), env=env)
    assert r.exit_code == 0, r.output
    assert out.read_text() == first


def test_view_refuses_a_path_from_the_environment_and_a_page_it_did_not_write(home):
    d = eval_dir(home)
    r = cli("view", str(d), env={"VERIMAP_VIEW_OUT_FILE": str(home / ".bashrc")})
    assert r.exit_code == 1 and "refusing to replace" in r.output
    assert (home / ".bashrc").read_text() == BASHRC
    (d / "report.html").write_text("<p>shipped with the directory</p>")
    r = cli("view", str(d))  # the default: report.html in the directory
    assert r.exit_code == 1 and "refusing to replace" in r.output
    assert (d / "report.html").read_text() == "<p>shipped with the directory</p>"


def test_view_replaces_a_page_it_wrote(home):
    need(shutil.which("dot") is not None, "Graphviz dot is not installed")
    d = eval_dir(home)
    for _ in range(2):
        r = cli("view", str(d))
        assert r.exit_code == 0, r.output
    assert (d / "report.html").read_text().count('<meta name="generator" content="verimap view">')


def test_export_preferences_refuses_a_path_from_the_environment(home):
    d = eval_dir(home)
    env = {"VERIMAP_EXPORT_PREFERENCES_OUT_FILE": str(home / ".bashrc")}
    r = cli("export", "preferences", str(d), env=env)
    assert r.exit_code == 1 and "refusing to replace" in r.output
    assert (home / ".bashrc").read_text() == BASHRC
    r = cli("export", "preferences", str(d), "--out-file", str(home / ".bashrc"))
    assert r.exit_code == 0, r.output
    assert (home / ".bashrc").read_text() != BASHRC


def test_humaneval_score_refuses_a_default_path_beside_the_samples(home):
    samples = home / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "HumanEval/0", "completion": "    return 1\n"}))
    (home / "s.jsonl_results.jsonl").write_text(BASHRC)
    problems = REPO / "datasets" / "humaneval" / "HumanEval.jsonl.gz"
    with gzip.open(problems, "rt") as f:
        assert json.loads(f.readline())["task_id"] == "HumanEval/0"
    r = cli("humaneval", "score", str(samples), "--problems", str(problems))
    assert r.exit_code == 1 and "refusing to replace" in r.output
    assert (home / "s.jsonl_results.jsonl").read_text() == BASHRC
