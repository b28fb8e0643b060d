"""Every --help follows the naming rules (docs/cli.md#names): one concept, one name, in every
command; the old spellings still work for a release, warn, and stay out of --help."""

import re
from collections import defaultdict
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from verimap.cli import main
from verimap.cli.names import RenamedOption, walk

COMMANDS = [(path, cmd) for path, cmd in walk(main, ())]
OPTIONS = [
    (path, p)
    for path, cmd in COMMANDS
    for p in cmd.params
    if isinstance(p, click.Option) and not p.hidden
]
RETIRED = {"--max-retries", "--max-calls", "--max-tokens", "--max-cost", "--max-parallel",
           "--max-concurrency", "--concurrency", "--progress", "--no-progress", "--runs", "-r",
           "--output"}  # fmt: skip
# A concept -> its one spelling, wherever it exists.
CONCEPTS = {
    "max_attempts": {"--max-attempts"},
    "max_parallel_nodes": {"--max-parallel-nodes"},
    "max_tasks": {"--max-tasks", "-c"},
    "epochs": {"--epochs"},
    "quiet": {"--quiet", "-q"},
    "out": {"--out", "-o"},
    "out_file": {"--out-file"},
    "call_limit": {"--call-limit"},
    "token_limit": {"--token-limit"},
    "cost_limit": {"--cost-limit"},
    "time_limit": {"--time-limit"},
}


def spellings(p: click.Option) -> set[str]:
    return {*p.opts, *p.secondary_opts}


def test_no_visible_option_uses_a_retired_spelling():
    old = {o.spelling for _, p in OPTIONS for o in getattr(p, "old", ())}
    assert old >= RETIRED, "every retired spelling is still accepted as an alias"
    for path, p in OPTIONS:
        assert not spellings(p) & RETIRED, (path, p.opts)
    for path, cmd in COMMANDS:  # `-o` retired for a file where it now means a directory
        visible = {s for p in cmd.params if isinstance(p, click.Option) for s in spellings(p)}
        assert not visible & {o.spelling for p in cmd.params for o in getattr(p, "old", ())}, path


def test_one_concept_one_name_everywhere():
    by_spelling, by_dest = defaultdict(set), defaultdict(set)
    for _path, p in OPTIONS:
        for s in spellings(p):
            by_spelling[s].add(p.name)
        by_dest[p.name].add(frozenset(spellings(p)))
    assert {s: d for s, d in by_spelling.items() if len(d) > 1} == {}
    assert {d: s for d, s in by_dest.items() if len(s) > 1} == {}
    for concept, names in CONCEPTS.items():
        assert by_dest[concept] == {frozenset(names)}, concept


def test_out_is_a_directory_and_timeout_is_per_unit():
    for path, p in OPTIONS:
        if "-o" in p.opts:
            assert isinstance(p.type, click.Path) and not p.type.file_okay, path
        if "--out-file" in p.opts:
            assert isinstance(p.type, click.Path) and not p.type.dir_okay, path
        if "--timeout" in p.opts:
            assert "per" in (p.help or "").lower(), (path, p.help)


@pytest.mark.parametrize("path", [path for path, _ in COMMANDS], ids=" ".join)
def test_help_hides_the_old_spellings(path):
    r = CliRunner().invoke(main, [*path, "--help"])
    assert r.exit_code == 0, r.output
    for old in RETIRED - {"-r"}:
        assert not re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", r.output), (path, old)


# (command, old spelling and value, the parameter it sets, the value it gets)
ALIASES = [
    ("run", ["--max-retries", "2"], "max_attempts", 2),
    ("run", ["--max-parallel", "3"], "max_parallel_nodes", 3),
    ("run", ["--max-calls", "5"], "call_limit", 5),
    ("run", ["--max-tokens", "100"], "token_limit", 100),
    ("run", ["--max-cost", "0.5"], "cost_limit", 0.5),
    ("run", ["--timeout", "60"], "time_limit", 60.0),
    ("eval", ["--max-retries", "2"], "max_attempts", 2),
    ("eval", ["--max-parallel", "2"], "max_parallel_nodes", 2),
    ("eval", ["--max-concurrency", "3"], "max_tasks", 3),
    ("eval", ["--runs", "3"], "epochs", 3),
    ("eval", ["-r", "3"], "epochs", 3),
    ("eval", ["--no-progress"], "quiet", True),
    ("eval", ["--progress"], "quiet", False),
    ("eval report", ["-o", "t.md"], "out_file", Path("t.md")),
    ("eval report", ["--output", "t.md"], "out_file", Path("t.md")),
    ("view", ["-o", "v.html"], "out_file", Path("v.html")),
    ("view", ["--out", "v.html"], "out_file", Path("v.html")),
    ("export preferences", ["-o", "p.jsonl"], "out_file", Path("p.jsonl")),
    ("export preferences", ["--out", "p.jsonl"], "out_file", Path("p.jsonl")),
    ("humaneval score", ["--concurrency", "2"], "max_tasks", 2),
    ("humaneval score", ["--out", "r.jsonl"], "out_file", Path("r.jsonl")),
]


def command(path: str) -> click.Command:
    return dict((" ".join(p), c) for p, c in COMMANDS)[path]


def test_every_alias_is_tested():
    declared = {
        (" ".join(path), o.spelling)
        for path, cmd in COMMANDS
        for p in cmd.params
        if isinstance(p, RenamedOption)
        for o in p.old
    }
    assert declared == {(cmd, args[0]) for cmd, args, _, _ in ALIASES}


@pytest.mark.parametrize("cmd,args,param,value", ALIASES, ids=lambda x: str(x))
def test_an_old_spelling_still_works_and_warns(cmd, args, param, value, capsys):
    ctx = command(cmd).make_context(cmd, list(args), resilient_parsing=True)
    assert ctx.params[param] == value
    new = next(p for p in ctx.command.params if p.name == param)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"warning: {args[0]} is deprecated; use " in err
    if args[0] != "--progress":
        assert new.opts[0] in err or new.opts[-1] in err


def test_the_new_spelling_wins_over_the_old(capsys):
    ctx = command("run").make_context("run", ["--max-retries", "2", "--max-attempts", "5", "T"])
    assert ctx.params["max_attempts"] == 5


def test_old_spellings_through_a_whole_eval(tmp_path):
    """The aliases reach the run: epochs, tasks in flight and quiet as before."""
    from tests.evals.test_eval_cli import SAMPLES

    args = ["eval", "-b", "gsm8k", "-m", "react", "-n", "2", "--runs", "2", "--max-concurrency",
            "1", "--no-progress", "--max-retries", "1", "-o", str(tmp_path / "o"), "--data-dir",
            str(SAMPLES), "--models-factory", "verimap.testing:oracle_factory", "--sandbox",
            "process"]  # fmt: skip
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    for old, new in [("--runs", "--epochs"), ("--max-concurrency", "--max-tasks"),
                     ("--no-progress", "--quiet"), ("--max-retries", "--max-attempts")]:  # fmt: skip
        assert f"warning: {old} is deprecated; use {new}" in r.stderr
    import json

    config = json.loads((tmp_path / "o" / "config.json").read_text())
    assert config["runs"] == 2
