"""`import verimap` loads the core and what wires it, never an optional part or its extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import verimap

# Optional parts of verimap, and the extras they need: none is loaded by `import verimap`.
OPTIONAL = (
    "verimap.evals",
    "verimap.view",
    "verimap.integrations",
    "verimap.local",
    "verimap.cli",
    "verimap.observe",
    "ray",
    "rank_bm25",
    "inspect_ai",
    "llama_cpp",
    "opentelemetry",
    "rich",
    "click",
)


def _loaded_by(statement: str) -> list[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=Path(verimap.__file__).parent.parent,
    )
    return json.loads(out.stdout)


def _optional(modules: list[str]) -> list[str]:
    inside = tuple(f"{part}." for part in OPTIONAL)
    return sorted(m for m in modules if m in OPTIONAL or m.startswith(inside))


def test_import_verimap_loads_no_optional_part():
    loaded = _loaded_by("import verimap")
    assert "verimap.core.coordinator" in loaded
    assert _optional(loaded) == []


def test_the_check_sees_an_optional_part_when_one_is_loaded():
    assert "verimap.view" in _optional(_loaded_by("import verimap.view"))
