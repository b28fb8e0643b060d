"""Properties of the worker module itself (it runs inside the container, stdlib only)."""

import subprocess
import sys

from verimap.sandbox.worker_module import worker, worker_path


def test_worker_loads_no_module_with_a_costly_at_fork_hook():
    """threading and random register at-fork hooks that run in every job's child;
    measured at ~65 page faults (0.4 ms of CPU) per job on the build VM."""
    probe = (
        "import importlib.util, sys\n"
        "before = set(sys.modules)\n"
        f"spec = importlib.util.spec_from_file_location('w', {str(worker_path())!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(sorted({'threading', 'random', 'tempfile', 'subprocess'} & (set(sys.modules) - before)))\n"
    )
    out = subprocess.run(  # -S: no site .pth files preloading modules, like the image
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_fresh_dir_makes_distinct_private_directories(tmp_path):
    made = {worker().fresh_dir(str(tmp_path), "job-") for _ in range(50)}
    assert len(made) == 50
    for path in made:
        assert path.startswith(str(tmp_path / "job-"))
        assert (tmp_path / path).stat().st_mode & 0o777 == 0o700
