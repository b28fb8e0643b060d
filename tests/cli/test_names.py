"""Every --help follows the naming rules (docs/cli.md#names): one concept, one name, in every
command; a retired spelling is no option of any command, and --help never shows it."""

import re
from collections import defaultdict

import click
import pytest
from click.testing import CliRunner

from verimap.cli import main
from verimap.cli.defaults import walk

COMMANDS = [(path, cmd) for path, cmd in walk(main, ())]
OPTIONS = [
    (path, p)
    for path, cmd in COMMANDS
    for p in cmd.params
    if isinstance(p, click.Option) and not p.hidden
]
RETIRED = {
    "--max-retries",
    "--max-calls",
    "--max-tokens",
    "--max-cost",
    "--max-parallel",
    "--max-concurrency",
    "--concurrency",
    "--progress",
    "--no-progress",
    "--runs",
    "-r",
    "--output",
}
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


def test_no_option_uses_a_retired_spelling():
    for path, cmd in COMMANDS:
        for p in cmd.params:
            if isinstance(p, click.Option):
                assert not spellings(p) & RETIRED, (path, p.opts)


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


# (command, a retired spelling with its value): each is refused as the unknown option it is.
RETIRED_USES = [
    ("run", ["--max-retries", "2"]),
    ("run", ["--max-parallel", "3"]),
    ("run", ["--max-calls", "5"]),
    ("run", ["--max-tokens", "100"]),
    ("run", ["--max-cost", "0.5"]),
    ("run", ["--timeout", "60"]),
    ("eval", ["--max-concurrency", "3"]),
    ("eval", ["--runs", "3"]),
    ("eval", ["-r", "3"]),
    ("eval", ["--no-progress"]),
    ("eval", ["--progress"]),
    ("eval report", ["-o", "t.md"]),
    ("eval report", ["--output", "t.md"]),
    ("view", ["-o", "v.html"]),
    ("view", ["--out", "v.html"]),
    ("export preferences", ["-o", "p.jsonl"]),
    ("export preferences", ["--out", "p.jsonl"]),
    ("humaneval score", ["--concurrency", "2"]),
    ("humaneval score", ["--out", "r.jsonl"]),
]


def command(path: str) -> click.Command:
    return dict((" ".join(p), c) for p, c in COMMANDS)[path]


@pytest.mark.parametrize("cmd,args", RETIRED_USES, ids=lambda x: str(x))
def test_a_retired_spelling_is_a_usage_error(cmd, args):
    with pytest.raises(click.NoSuchOption) as e:
        command(cmd).make_context(cmd, list(args))
    assert e.value.option_name == args[0] and e.value.exit_code == 2
