"""Locate the sandbox worker and load it as a module on the host.

The worker lives in the top-level `sandbox/` folder (source tree, editable
install) or, in a wheel, in `verimap/_sandbox/`. The host imports the very same
file for the codec and the restricted runtime's constants, so both sides of the
boundary always agree.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType


def sandbox_dir() -> Path:
    """The directory holding worker.py and the Dockerfiles."""
    pkg = Path(__file__).resolve().parent.parent
    for candidate in (pkg / "_sandbox", pkg.parent / "sandbox"):
        if (candidate / "worker.py").is_file():
            return candidate
    raise FileNotFoundError(
        "verimap sandbox files not found (expected verimap/_sandbox/ in a wheel "
        "or sandbox/ next to the verimap package in a source checkout)"
    )


def worker_path() -> Path:
    return sandbox_dir() / "worker.py"


@functools.cache
def worker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verimap_sandbox_worker", worker_path())
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
