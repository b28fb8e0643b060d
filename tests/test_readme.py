"""The README is the front door: short, and its commands are the ones the project runs."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_the_readme_is_at_most_150_lines():
    assert len(README.splitlines()) <= 150


def test_the_readme_test_command_is_what_ci_runs():
    makefile = (REPO / "Makefile").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in README and re.search(r"^\s*make test\s*$", ci, re.M)
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "python3 -m pytest" in recipe and "python3 -m pytest" in README


def test_the_readme_custom_benchmark_is_the_tested_example():
    """tests/evals/test_custom_benchmarks.py runs EXAMPLE as written; the README shows it."""
    source = (REPO / "tests" / "evals" / "test_custom_benchmarks.py").read_text()
    parts = re.search(r"EXAMPLE = \(\n((?:\s+\"[^\"]*\"\n)+)\)", source)
    assert parts, "the example's definition moved"
    example = "".join(re.findall(r'"([^"]*)"', parts.group(1)))
    assert example.startswith("verimap eval -b ") and example in README


def test_every_relative_link_in_the_readme_exists():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert local, "the README links to its docs"
    assert [t for t in local if not (REPO / t).exists()] == []
