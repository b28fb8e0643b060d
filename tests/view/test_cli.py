import shutil

import pytest
from click.testing import CliRunner

from verimap.cli import main

from .conftest import need_dot


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def eval_copy(oracle_dirs, tmp_path):
    need_dot()
    d = tmp_path / "verimap"
    shutil.copytree(oracle_dirs[0], d)
    return d


def test_view_writes_report_html_into_the_eval_directory(eval_copy):
    r = invoke("view", eval_copy)
    assert r.exit_code == 0, r.output
    out = eval_copy / "report.html"
    assert out.is_file() and f"wrote {out}" in r.output and out.resolve().as_uri() in r.output
    assert "<svg" in out.read_text()


def test_view_of_several_inputs_to_one_file(eval_copy, oracle_dirs, tmp_path):
    trace = next((eval_copy / "traces").rglob("*.jsonl"))
    out = tmp_path / "all.html"
    r = invoke("view", eval_copy, oracle_dirs[1], trace, "--out-file", out, "--max-chars", 500)
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "gsm8k/verimap, gsm8k/react" in text and 'id="r0"' in text


def test_view_errors_are_one_clear_line(eval_copy, tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    r = invoke("view", tmp_path / "empty")
    assert r.exit_code == 1 and "neither a trace" in r.output and "Traceback" not in r.output
    r = invoke("view", tmp_path / "missing")
    assert r.exit_code == 2 and "does not exist" in r.output
    monkeypatch.setattr("verimap.view.svg.shutil.which", lambda name: None)
    r = invoke("view", eval_copy, "--out-file", tmp_path / "x.html")
    assert r.exit_code == 1 and "apt-get install graphviz" in r.output
    assert not (tmp_path / "x.html").exists()
    monkeypatch.undo()
    r = invoke("view", eval_copy, "--out-file", tmp_path / "no" / "such" / "dir.html")
    assert r.exit_code == 1 and "cannot write" in r.output
