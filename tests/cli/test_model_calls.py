"""The model-call options of `verimap run` and `verimap eval`."""

from __future__ import annotations

from click.testing import CliRunner

from verimap.cli import main
from verimap.cli.model_calls import CacheMode


def test_cache_before_the_task_says_how_to_write_it():
    r = CliRunner().invoke(main, ["run", "--cache", "What is 2 + 3?"])
    assert r.exit_code == 2
    assert "'What is 2 + 3?' is not a cache mode (off, on, sampled)" in r.output
    assert "write `--cache on`, or put the task first" in r.output


def test_a_cache_mode_is_still_read():
    mode = CacheMode(["off", "on", "sampled"])
    assert mode.convert("sampled", None, None) == "sampled"
    r = CliRunner().invoke(main, ["run", "--cache", "never", "What is 2 + 3?"])
    assert r.exit_code == 2 and "'never' is not a cache mode" in r.output
