"""The layering the code is meant to keep, checked on the import graph (grimp).

Imports under `if TYPE_CHECKING:` are left out: they never run, and a type may name
a module above it. Function-level imports count: they run.
"""

from __future__ import annotations

import ast
import graphlib
from collections import defaultdict
from pathlib import Path

import grimp
import pytest

import verimap

MAX_LINES = 500
PACKAGE_DIR = Path(verimap.__file__).parent


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        "verimap", include_external_packages=True, exclude_type_checking_imports=True
    )


def _edges(graph: grimp.ImportGraph, level: int | None) -> dict[str, set[str]]:
    """verimap's import graph, modules cut to their first `level` name parts (None: whole)."""

    def cut(m: str) -> str:
        return m if level is None else ".".join(m.split(".")[:level])

    g: dict[str, set[str]] = defaultdict(set)
    for m in graph.modules:
        if not m.startswith("verimap"):
            continue
        for imported in graph.find_modules_directly_imported_by(m):
            if imported.startswith("verimap") and cut(imported) != cut(m):
                g[cut(m)].add(cut(imported))
    return g


def _cycle(g: dict[str, set[str]]) -> list[str]:
    """One import cycle of `g` (a -> b -> ... -> a), or []."""
    try:
        graphlib.TopologicalSorter(g).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return []


def test_every_library_directory_is_a_regular_package():
    """A namespace package (no __init__.py) is invisible to import-graph tools and type
    checkers that look for packages, so a cycle through it would go unseen here."""
    missing = [
        str(d.relative_to(PACKAGE_DIR))
        for d in PACKAGE_DIR.rglob("*")
        if d.is_dir() and any(d.glob("*.py")) and not (d / "__init__.py").exists()
    ]
    assert missing == []


def test_no_module_imports_one_that_imports_it_back(graph):
    assert _cycle(_edges(graph, None)) == []


def test_no_package_imports_one_that_imports_it_back(graph):
    """The floors: verimap.llm, verimap.sandbox, verimap.evals, verimap.view, ... and the
    top-level modules form a DAG, so every arrow runs down."""
    assert _cycle(_edges(graph, 2)) == []


def test_model_access_depends_on_nothing_above_it(graph):
    allowed = {"verimap.llm", "verimap.env", "verimap.errors", "verimap.redaction", "verimap.usage"}
    assert _edges(graph, 2)["verimap.llm"] <= allowed


@pytest.mark.parametrize("external", ["click"])
def test_command_line_wiring_stays_in_the_cli(graph, external):
    users = graph.find_modules_that_directly_import(external)
    assert sorted(m for m in users if not m.startswith("verimap.cli")) == []


def test_no_module_is_over_the_line_limit_unless_it_says_why():
    """A module past MAX_LINES must say why in its docstring ("over 500 lines: ...")."""
    long = []
    for path in PACKAGE_DIR.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") <= MAX_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if f"over {MAX_LINES} lines:" not in doc.lower():
            long.append(f"{path.relative_to(PACKAGE_DIR)}: {text.count(chr(10))} lines")
    assert long == []
