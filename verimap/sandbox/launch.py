"""How a worker process starts, in a container or on the host: one boot line for both.

The worker is the package `verimap/sandbox/worker/`, found by this file's
location. A worker process loads it as the top-level package `verimap_worker`
straight from its directory: never through `verimap` (whose imports would sit
in every job process the spawner forks) and without touching `sys.path` (job
processes see no extra import path). Imported rather than run as a script, its
modules load from the bytecode compiled into the image.
"""

from __future__ import annotations

from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parent / "worker"
PACKAGE = "verimap_worker"
WORKER_IN_IMAGE = "/opt/verimap/worker"
BOOT = (
    "import importlib.util as u, sys; d = sys.argv[1]; "
    f"s = u.spec_from_file_location({PACKAGE!r}, d + '/__init__.py', "
    "submodule_search_locations=[d]); "
    f"m = sys.modules[{PACKAGE!r}] = u.module_from_spec(s); s.loader.exec_module(m); "
    f"from {PACKAGE}.serve import main; main(sys.argv[2:])"
)


def worker_argv(python: str, worker_dir: str | Path) -> list[str]:
    """The command that starts a worker from `worker_dir`; append `serve` and its options."""
    return [python, "-I", "-c", BOOT, str(worker_dir)]


# In the image: its python3, the package where the Dockerfiles copy it.
WORKER_COMMAND = tuple(worker_argv("python3", WORKER_IN_IMAGE))
