"""The constants host and worker share: one module, read by the host without running the worker."""

import json
import subprocess
import sys

import pytest

from verimap.sandbox import SandboxUnavailable
from verimap.sandbox.policy import PolicyViolation, compile_vf
from verimap.sandbox.pool import WorkerHandle
from verimap.sandbox.worker import candidate, constants, helpers, restricted, wire

from .test_pool import FAKE_WORKER


def test_the_host_side_loads_no_module_that_runs_the_worker():
    # the host needs the constants, the codec and the example reader; nothing that serves,
    # supervises, spawns or runs a job (which a test double may still import on purpose)
    probe = (
        "import sys\n"
        "import verimap.sandbox.docker, verimap.sandbox.policy, verimap.sandbox.process\n"
        "import verimap.sandbox.pooled, verimap.sandbox.image\n"
        "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules"
        " if m.startswith('verimap.sandbox.worker.')))\n"
        "print(sorted(m for m in sys.modules if m.startswith('verimap_worker')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded, worker_process = out.stdout.splitlines()
    assert json.loads(loaded.replace("'", '"')) == [
        "constants",
        "examples",
        "snippets",
        "wire",
    ]
    assert worker_process == "[]"


def test_importing_the_constants_does_nothing_but_define_them():
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import verimap.sandbox.worker.constants as c\n"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('verimap')))\n"
        "print(sorted(k for k in vars(c) if k.isupper()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    new, names = (json.loads(line.replace("'", '"')) for line in out.stdout.splitlines())
    # verimap's own __init__ modules come along (the host's business); of the worker, nothing
    worker = [m for m in new if m.startswith("verimap.sandbox.worker")]
    assert worker == ["verimap.sandbox.worker", "verimap.sandbox.worker.constants"]
    assert names == [
        "ALLOWED_IMPORTS",
        "CHILD_ENV",
        "MAGIC",
        "PROTOCOL",
        "VF_COMPILE_FLAGS",
        "VF_HELPERS",
    ]


def test_the_helpers_the_host_names_are_the_ones_every_vf_gets():
    assert set(helpers.FUNCTIONS) == constants.VF_HELPERS
    for ns in (restricted.restricted_globals(), restricted.vf_namespace(False)):
        assert set(ns) >= constants.VF_HELPERS
    assert restricted.restricted_globals()["load_function"] is candidate.load_function


GUARDED_IMPORT = restricted.restricted_globals()["__builtins__"]["__import__"]


@pytest.mark.parametrize("module", sorted(constants.ALLOWED_IMPORTS - {"sympy", "numpy"}))
def test_both_sides_allow_the_same_imports(module):
    compile_vf(f"import {module}")  # the host lets it through, and so does the worker
    assert GUARDED_IMPORT(module).__name__ == module


@pytest.mark.parametrize("module", ["socket", "os", "ctypes", "subprocess"])
def test_both_sides_refuse_the_same_imports(module):
    with pytest.raises(PolicyViolation):
        compile_vf(f"import {module}")
    with pytest.raises(restricted.PolicyError):
        GUARDED_IMPORT(module)


def test_a_worker_speaking_another_protocol_is_refused(tmp_path):
    argv = [sys.executable, "-c", FAKE_WORKER, wire.__file__]
    with pytest.raises(SandboxUnavailable, match="unexpected protocol"):
        WorkerHandle([*argv, str(constants.PROTOCOL + 1)], label="old worker")


@pytest.mark.parametrize("where", ["package", "readable copy"])
def test_a_real_worker_says_its_protocol_and_bytecode_magic(tmp_path, where):
    from verimap.sandbox.launch import WORKER_DIR, worker_argv
    from verimap.sandbox.process import _readable_copy

    package = WORKER_DIR
    if where == "readable copy":  # what the process backend started as root runs
        package = _readable_copy(WORKER_DIR, tmp_path / "worker")
        assert {p.stat().st_mode & 0o777 for p in package.iterdir()} == {0o644}
    scratch = str(tmp_path / "scratch")
    argv = [*worker_argv(sys.executable, package), "serve", "--scratch", scratch]
    handle = WorkerHandle(argv, env=dict(constants.CHILD_ENV), label="worker")
    try:
        assert handle.magic == constants.MAGIC  # the same interpreter: it reads our bytecode
    finally:
        handle.kill()
