"""The layering the code keeps, checked on the import graph (grimp).

Every import counts: those under `if TYPE_CHECKING:` too (a type names what a module stands
on as surely as a call does) and those inside functions (they run). Also: no run id, commit
hash, model size or seed in a comment or docstring (the runs live in git history, the records
in design/decisions.md); no decision id or model size in a string a user can see.
"""

from __future__ import annotations

import ast
import graphlib
import io
import re
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

import grimp
import pytest

import verimap

PACKAGE_DIR = Path(verimap.__file__).parent

# The floors, from the ground up. A module imports only from its own floor or below; within a
# floor, packages import each other without a cycle. `verimap` is the package's face.
LAYERS: list[tuple[str, ...]] = [
    # the vocabulary: errors, events, verdicts, usage, RunContext, the plan model, the protocols
    ("verimap.base",),
    ("verimap.config",),  # the knobs of one run
    ("verimap.llm", "verimap.sandbox"),  # model backends; where untrusted code runs
    ("verimap.tools",),  # what an executor may call
    ("verimap.planning",),  # the planners and what they check in a plan
    ("verimap.checks",),  # verification the framework brings
    ("verimap.core",),  # the loop
    # what wires and watches a run: policies, the local model, `build`, other methods, telemetry
    ("verimap.policies", "verimap.local", "verimap.wiring", "verimap.methods", "verimap.observe"),
    # the entry points
    (
        "verimap.evals",
        "verimap.integrations",
        "verimap.view",
        "verimap.testing",
        "verimap.cli",
        "verimap.__main__",
        "verimap",
    ),
]
MAX_TOP_LEVEL_MODULES = 10


def _floor(module: str) -> int:
    """The floor of `module`: the index in LAYERS of its top-level package or module."""
    top = ".".join(module.split(".")[:2])
    return next(i for i, floor in enumerate(LAYERS) if top in floor)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """Every import, those under `if TYPE_CHECKING:` included."""
    return grimp.build_graph(
        "verimap", include_external_packages=True, exclude_type_checking_imports=False
    )


@pytest.fixture(scope="module")
def running(graph) -> grimp.ImportGraph:
    """The imports that run: those under `if TYPE_CHECKING:` left out."""
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


def test_every_package_has_a_floor(graph):
    """A new top-level package or module is placed in LAYERS, so the layering covers it."""
    unplaced = set()
    for m in graph.modules:
        if m.startswith("verimap"):
            try:
                _floor(m)
            except StopIteration:
                unplaced.add(".".join(m.split(".")[:2]))
    assert sorted(unplaced) == []


def test_no_import_runs_up_a_floor(graph):
    upward = sorted(
        f"{m} -> {imported}"
        for m in graph.modules
        if m.startswith("verimap")
        for imported in graph.find_modules_directly_imported_by(m)
        if imported.startswith("verimap") and _floor(imported) > _floor(m)
    )
    assert upward == []


def test_the_floor_check_sees_imports_made_for_types_only(tmp_path):
    """An import under `if TYPE_CHECKING:` is an edge of the graph the floors are checked on."""
    pkg = tmp_path / "floorpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from floorpkg.high import X\n"
    )
    (pkg / "high.py").write_text("X = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        g = grimp.build_graph("floorpkg", exclude_type_checking_imports=False, cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert g.find_modules_directly_imported_by("floorpkg.low") == {"floorpkg.high"}


def test_at_most_ten_modules_at_the_top():
    """The top of the package shows its parts: its face, `python -m verimap`, the run's knobs,
    `build` and the test doubles; everything else lives in a package of its floor."""
    top = sorted(p.name for p in PACKAGE_DIR.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_no_module_imports_one_that_imports_it_back(running):
    """On the imports that run; a module may name a type of one that imports it (the verifier's
    checks name the verifier), which is no cycle at import time."""
    assert _cycle(_edges(running, None)) == []


def test_no_package_imports_one_that_imports_it_back(graph):
    """The packages of verimap (`verimap.base`, `verimap.llm`, ..., `verimap.cli`) and its
    top-level modules form a DAG, imports for types included."""
    assert _cycle(_edges(graph, 2)) == []


def test_model_backends_stand_on_the_ground_floor_only(graph):
    assert _edges(graph, 2)["verimap.llm"] <= {"verimap.base"}


@pytest.mark.parametrize("external", ["click"])
def test_command_line_wiring_stays_in_the_cli(graph, external):
    users = graph.find_modules_that_directly_import(external)
    assert sorted(m for m in users if not m.startswith("verimap.cli")) == []


# A run id (`r52`, `r32-r36`, `r41v2`, `runs/bench-r28`) or a commit hash in a comment or a
# docstring: the code says why in a sentence and cites a record of design/decisions.md.
# A hash needs a digit and a letter (so neither `1000000` nor "defaced"), unless "commit" or
# "code of" names it. Code is not read: a sha256 constant or a prompt may hold anything.
RUN_ID = re.compile(r"\br\d{2,3}(?:v\d+[a-z]*)?\b")
COMMIT_HASH = re.compile(
    r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
    r"|\b(?:[Cc]ommit|[Cc]ode of)\W{1,3}[0-9a-f]{7,40}\b"
)


def _notes(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every docstring (any string standing alone as a
    statement, so attribute docstrings too) in `source`."""
    notes = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    notes += [
        (node.lineno, node.value.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]
    return notes


# A model size told as a measurement ("the 1.5B wrote ..."): a model's own name keeps its size
# ("Qwen2.5-Coder-1.5B-Instruct"). A seed told with its number ("on seed 123456").
MODEL_SIZE = re.compile(r"(?<![\w.-])\d+(?:\.\d+)? ?B\b")
SEED = re.compile(r"(?<![\w-])seeds?\W{1,3}\d+")
DECISION_ID = re.compile(r"\bD\d{2}\b")


def _run_ids_and_hashes(source: str) -> list[tuple[int, str]]:
    return [
        (line, m.group())
        for line, text in _notes(source)
        for pattern in (RUN_ID, COMMIT_HASH, MODEL_SIZE, SEED)
        for m in pattern.finditer(text)
    ]


def _literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal in `source` that is not a docstring (f-strings'
    literal parts included): what a message, an error, a report or a prompt can show."""
    tree = ast.parse(source)
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def _shown_ids(source: str) -> list[tuple[int, str]]:
    return [
        (line, m.group())
        for line, text in _literals(source)
        for pattern in (DECISION_ID, MODEL_SIZE)
        for m in pattern.finditer(text)
    ]


def test_the_run_id_scan_reads_comments_and_docstrings_only():
    source = (
        '"""Measured in r41v2 and runs/bench-r28 on the 1.5B."""\n'
        "SHA = 'a1cd7a8e3f00'  # code of 1240991, see r32-r36\n"
        "MODEL = 'the 0.5B, seed 7'  # Qwen2.5-Coder-1.5B-Instruct, --seed 0, seed + k\n"
        "def f():\n"
        "    '''Kept since c9d4c28; on seed 123456 it failed.'''\n"
        "    return 'r52 a1cd7a8'  # 1000000 tokens, a defaced plan, r2d2, the 7 B model\n"
    )
    assert [hit for _, hit in _run_ids_and_hashes(source)] == [
        "r32",
        "r36",
        "code of 1240991",
        "7 B",
        "r41v2",
        "r28",
        "1.5B",
        "c9d4c28",
        "seed 123456",
    ]


def test_the_shown_text_scan_reads_string_literals_only():
    source = (
        '"""Chosen in D23 for the 1.5B."""\n'
        "NAME = 'Qwen2.5-Coder-1.5B-Instruct'  # D24\n"
        "def f(n):\n"
        "    '''D25.'''\n"
        "    raise ValueError(f'not confirmed (D23, D24), {n} left' 'on the 1.5B')\n"
    )
    assert sorted(hit for _, hit in _shown_ids(source)) == ["1.5B", "D23", "D24"]


def test_no_decision_id_or_model_size_in_text_a_user_can_see():
    """Console messages, errors, report and view text, CLI help and prompts say what happened
    in words; a decision id or "the 1.5B" means nothing to the person reading them."""
    found = [
        f"{path.relative_to(PACKAGE_DIR)}:{line}: {hit}"
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        for line, hit in _shown_ids(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_no_run_id_commit_hash_model_size_or_seed_in_comments_or_docstrings():
    """Comments and docstrings state contracts and invariants. Runs, commits, the model a
    measurement was taken on and its seed belong in design/decisions.md, eval/ and the CHANGELOG;
    a measurement gets at most one sentence and cites its record (`design/decisions.md, D07`)."""
    found = [
        f"{path.relative_to(PACKAGE_DIR)}:{line}: {hit}"
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        for line, hit in _run_ids_and_hashes(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_every_decision_a_comment_cites_exists():
    """`(decisions.md, D07)` in a comment or docstring names a record `## D07: ...` of
    design/decisions.md."""
    decisions = PACKAGE_DIR.parent / "design" / "decisions.md"
    if not decisions.is_file():
        pytest.skip("design/ is not next to the package (an installed wheel)")
    entries = set(re.findall(r"^## (D\d+):", decisions.read_text(encoding="utf-8"), re.M))
    cited = {
        f"{path.relative_to(PACKAGE_DIR)}:{line}: {d}"
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        for line, text in _notes(path.read_text(encoding="utf-8"))
        for d in re.findall(r"decisions\.md,\s+(D\d+)", text)
        if d not in entries
    }
    assert cited == set()


# The core loop and what it stands on: they know no policy (a policy is applied where a run is
# wired: verimap.wiring, verimap.methods, the CLI), so no rule of a setting is woven into the loop.
CORE = ("verimap.core", "verimap.planning", "verimap.checks", "verimap.base", "verimap.config")


def _chains(graph: grimp.ImportGraph, importers: str | tuple[str, ...], imported: str) -> list:
    """Every shortest import chain from a module under `importers` to one under `imported`."""
    sources = [m for m in graph.modules if m.startswith(importers)]
    targets = [m for m in graph.modules if m.startswith(imported)]
    assert sources and targets
    return [
        chain
        for m in sources
        for t in targets
        if (chain := graph.find_shortest_chain(importer=m, imported=t)) is not None
    ]


def test_the_core_never_imports_a_policy(graph):
    assert _chains(graph, CORE, "verimap.policies") == []


def test_planning_does_not_know_the_loop(graph):
    """The planner writes plans for any loop: nothing in verimap.planning reaches the core, the
    coordinator least of all. What a replan is told (`FailureContext`) is on the ground floor,
    where the coordinator that fills it in and the planner that reads it both find it."""
    assert _chains(graph, "verimap.planning", "verimap.core.coordinator") == []
    assert _chains(graph, "verimap.planning", "verimap.core") == []


# The steps verimap ships and what only they use; the rest of `verimap.core` is the loop.
STEPS = (
    "verimap.core.executor",
    "verimap.core.verifier",
    "verimap.core.vf_checks",
    "verimap.core.agent",
    "verimap.core.prompts",
)


def test_the_loop_types_its_steps_against_protocols(graph):
    """The coordinator and its helpers take any planner, executor, verifier and check of the
    right shape (`verimap.base.roles`, `verimap.base.verification`): through every import chain,
    types included, they reach only the ground floor, the run's knobs and each other, never a
    planner, executor, verifier or check verimap ships, nor a backend."""
    loop = {m for m in graph.modules if m.startswith("verimap.core.") and m not in STEPS}
    assert "verimap.core.coordinator" in loop
    reached = {
        m
        for importer in loop
        for m in graph.find_upstream_modules(importer)
        if m.startswith("verimap")
    }
    beyond = {m for m in reached - loop if not m.startswith(("verimap.base.", "verimap.config"))}
    assert sorted(beyond) == []
