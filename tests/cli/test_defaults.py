"""Flag defaults from VERIMAP_* variables and [tool.verimap] in ./pyproject.toml: the command
line wins, then the environment, then the table, then the built-in default; unknown keys are
warnings that name each one, and settings that run code are refused by name. What an untrusted
table may set is tests/cli/test_trust.py's."""

import click
import pytest
from click.testing import CliRunner

from verimap.cli import eval as eval_mod
from verimap.cli import main
from verimap.cli.defaults import RUNS_CODE, envvar_name, walk


@pytest.fixture
def seen(monkeypatch, tmp_path):
    """What `verimap eval` would run with, without running it, from an empty directory."""
    got: dict = {}

    def fake(**kw):
        got.update(kw)
        return 0

    monkeypatch.setattr(eval_mod, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VERIMAP_STATE_DIR", str(tmp_path / "state"))
    for name in ("VERIMAP_EVAL_MAX_TASKS", "VERIMAP_EVAL_EPOCHS", "VERIMAP_EVAL_QUIET"):
        monkeypatch.delenv(name, raising=False)
    return got


def pyproject(tmp_path, text: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)


def test_every_option_has_its_variable_but_code_never_does():
    for path, cmd in walk(main):
        for p in cmd.params:
            if not isinstance(p, click.Option) or not p.expose_value:
                continue
            if p.name in RUNS_CODE:
                assert p.envvar is None, path
            elif envvar_name(path, p) is not None:
                flag = next(o for o in p.opts if o.startswith("--"))[2:]
                want = "_".join(["VERIMAP", *path, flag]).upper().replace("-", "_")
                assert p.envvar == want, (path, p.opts)


def test_precedence_command_line_environment_table_default(seen, tmp_path, monkeypatch):
    pyproject(tmp_path, "[tool.verimap.eval]\nmax-tasks = 3\nepochs = 2\nquiet = true\n")
    monkeypatch.setenv("VERIMAP_EVAL_MAX_TASKS", "7")
    r = CliRunner().invoke(main, ["eval", "-b", "gsm8k", "--epochs", "5"])
    assert r.exit_code == 0, r.output
    assert (seen["max_tasks"], seen["epochs"], seen["quiet"]) == (7, 5, True)
    assert seen["max_attempts"] is None  # nothing set it: the method's own
    # One line names what the file set, and only that.
    taken = [x for x in r.stderr.splitlines() if "pyproject.toml [tool.verimap]" in x]
    assert taken == [
        "note: from pyproject.toml [tool.verimap] (not trusted: harmless settings "
        "only): quiet = true"
    ]


def test_a_key_under_tool_verimap_is_every_commands_and_a_subtable_wins(seen, tmp_path):
    pyproject(
        tmp_path,
        "[tool.verimap]\nmax_attempts = 2\nepochs = 4\n\n[tool.verimap.eval]\nepochs = 3\n",
    )
    r = CliRunner().invoke(main, ["eval", "-b", "gsm8k"])
    assert r.exit_code == 0, r.output
    assert (seen["max_attempts"], seen["epochs"]) == (2, 3)


def test_unknown_keys_are_each_named_in_a_warning(seen, tmp_path):
    pyproject(
        tmp_path,
        "[tool.verimap]\nbogus = 1\n\n[tool.verimap.eval]\nmax_task = 3\n\n"
        "[tool.verimap.evl]\nx = 1\n",
    )
    r = CliRunner().invoke(main, ["eval", "-b", "gsm8k"])
    assert r.exit_code == 0, r.output
    assert seen["max_tasks"] is None  # the misspelled key set nothing
    said = " ".join(r.stderr.split())
    assert "warning: pyproject.toml: unknown setting [tool.verimap] 'bogus'; ignored" in said
    assert "[tool.verimap.eval] 'max_task' (did you mean 'max-tasks'?)" in said
    assert "[tool.verimap] 'evl' (did you mean 'eval'?)" in said


@pytest.mark.parametrize("table", ["[tool.verimap]", "[tool.verimap.eval]"])
def test_code_to_run_is_refused_from_the_table(seen, tmp_path, table):
    pyproject(tmp_path, f'{table}\nmodels-factory = "verimap.testing:oracle_factory"\n')
    r = CliRunner().invoke(main, ["eval", "-b", "gsm8k"])
    assert r.exit_code == 2 and not seen
    assert "'models-factory' is not allowed" in " ".join(r.output.split())


def test_code_to_run_is_not_read_from_the_environment(seen, monkeypatch):
    monkeypatch.setenv("VERIMAP_EVAL_MODELS_FACTORY", "verimap.testing:oracle_factory")
    r = CliRunner().invoke(main, ["eval", "-b", "gsm8k"])
    assert r.exit_code == 0, r.output
    assert seen["models_factory"] is None


def test_a_python_benchmark_from_the_environment_runs_no_code(seen, monkeypatch):
    monkeypatch.setenv("VERIMAP_EVAL_BENCHMARK", "evil.py@boom")
    r = CliRunner().invoke(main, ["eval"])
    assert r.exit_code == 0, r.output
    assert seen["benchmark"] == "evil.py@boom" and seen["benchmark_runs_code"] is False


def test_a_retired_option_name_is_an_unknown_key(seen, tmp_path):
    pyproject(tmp_path, "[tool.verimap.eval]\nmax-concurrency = 3\nprogress = false\n")
    r = CliRunner().invoke(main, ["eval", "-b", "gsm8k"])
    assert r.exit_code == 0, r.output
    assert (seen["max_tasks"], seen["quiet"]) == (None, False)
    assert "[tool.verimap.eval] 'max-concurrency'" in r.stderr and "'progress'" in r.stderr


def test_the_config_file_sits_between_flags_and_the_environment(seen, tmp_path, monkeypatch):
    (tmp_path / "c.yaml").write_text("benchmark: gsm8k\nepochs: 2\nmax_tasks: 2\n")
    monkeypatch.setenv("VERIMAP_EVAL_MAX_TASKS", "7")
    monkeypatch.setenv("VERIMAP_EVAL_EPOCHS", "9")
    r = CliRunner().invoke(main, ["eval", "--config", "c.yaml", "-c", "5"])
    assert r.exit_code == 0, r.output
    assert (seen["max_tasks"], seen["epochs"]) == (5, 2)


def test_a_retired_option_name_in_a_config_file_is_an_unknown_setting(seen, tmp_path):
    (tmp_path / "c.yaml").write_text("benchmark: gsm8k\nruns: 2\n")
    r = CliRunner().invoke(main, ["eval", "--config", "c.yaml"])
    assert r.exit_code == 2 and not seen
    assert "c.yaml: unknown setting 'runs'" in r.output


def test_no_table_no_defaults(seen, tmp_path):
    pyproject(tmp_path, "[project]\nname = 'x'\n")
    r = CliRunner().invoke(main, ["eval", "-b", "gsm8k"])
    assert r.exit_code == 0 and seen["epochs"] == 1 and seen["max_tasks"] is None
