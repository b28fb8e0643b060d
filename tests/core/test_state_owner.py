"""The run's state has one owner: no module of the package but the coordinator's names it."""

import ast
import inspect
from pathlib import Path

import verimap
from verimap.core.coordinator import Coordinator

STATE = {"RunState", "_RunState"}


def names(tree: ast.AST) -> set[str]:
    """Every identifier a module uses: names, attributes, definitions and imports."""
    found: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Attribute):
            found.add(n.attr)
        elif isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found.add(n.name)
        elif isinstance(n, ast.ImportFrom | ast.Import):
            found.update(a.asname or a.name.rsplit(".", 1)[-1] for a in n.names)
            found.update((n.module or "").split(".") if isinstance(n, ast.ImportFrom) else ())
    return found


def test_the_run_state_is_named_by_the_coordinator_module_alone():
    package = Path(verimap.__file__).parent
    owner = Path(inspect.getsourcefile(Coordinator) or "").resolve()
    naming = {
        path.resolve()
        for path in package.rglob("*.py")
        if names(ast.parse(path.read_text(encoding="utf-8"))) & (STATE | {"run_state"})
    }
    assert naming == {owner}, sorted(str(p.relative_to(package)) for p in naming)
