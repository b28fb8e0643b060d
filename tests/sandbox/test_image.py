"""Image identity and the offline build's inputs (no Docker needed)."""

import json
import shutil

import pytest

from verimap.sandbox import image
from verimap.sandbox.launch import WORKER_COMMAND, WORKER_DIR, WORKER_IN_IMAGE


def test_deb822_sources_pick_the_main_suite_not_security(tmp_path):
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n"
    )
    assert image.apt_source(str(d), str(tmp_path / "none.list")) == (
        "http://mirror.example/debian",
        "bookworm",
    )


def test_one_line_sources_are_understood(tmp_path):
    lst = tmp_path / "sources.list"
    lst.write_text(
        "# deb http://commented/debian trixie main\n"
        "deb http://security.example/debian-security bookworm-security main\n"
        "deb [arch=amd64] http://mirror.example/debian bookworm main\n"
    )
    assert image.apt_source(str(tmp_path / "empty"), str(lst)) == (
        "http://mirror.example/debian",
        "bookworm",
    )


def test_no_sources_is_a_clear_error(tmp_path):
    with pytest.raises(image.BuildError, match="no Debian mirror found"):
        image.apt_source(str(tmp_path), str(tmp_path / "missing"))


def test_version_changes_exactly_when_an_input_changes(tmp_path):
    worker, dockerfiles = tmp_path / "worker", tmp_path / "dockerfiles"
    shutil.copytree(WORKER_DIR, worker, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(image.DOCKERFILES, dockerfiles)

    def version() -> str:
        return image.hash_inputs(image.build_inputs(worker, dockerfiles))

    assert version() == image.version()
    (worker / "README.unrelated").write_text("not a build input")
    (worker / "__pycache__").mkdir()
    (worker / "__pycache__" / "jobs.cpython-311.pyc").write_bytes(b"bytecode")
    assert version() == image.version()
    for changed in (worker / "jobs.py", worker / "new_module.py", dockerfiles / "Dockerfile"):
        before = changed.read_bytes() if changed.exists() else None
        with open(changed, "a") as f:
            f.write("\n# changed\n")
        assert version() != image.version(), changed
        if before is None:
            changed.unlink()
        else:
            changed.write_bytes(before)
        assert version() == image.version()


def test_the_build_context_holds_exactly_the_hashed_files_readable_by_the_sandbox_user():
    with image.build_context() as context:
        files = {str(p.relative_to(context)) for p in context.rglob("*") if p.is_file()}
        assert files == set(image.build_inputs())
        assert {p.name for p in (context / "worker").iterdir()} >= {"serve.py", "wire.py"}
        for path in [context, *context.rglob("*")]:
            assert path.stat().st_mode & 0o005 == (0o005 if path.is_dir() else 0o004), path


def test_tag_and_cache_location(monkeypatch, tmp_path):
    assert image.image_tag() == f"verimap-sandbox:{image.version()}"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert image.cache_dir() == tmp_path / "verimap" / "sandbox"
    assert image._base_key("bookworm") != image._base_key("trixie")


def test_dockerfiles_ship_the_worker_and_the_unprivileged_user():
    for name in ("Dockerfile", "Dockerfile.offline"):
        text = (image.DOCKERFILES / name).read_text()
        assert f"COPY worker {WORKER_IN_IMAGE}" in text
        assert f"USER {image.SANDBOX_UID}:{image.SANDBOX_UID}" in text
        runs = [ln for ln in text.splitlines() if ln.startswith("RUN")]
        # the worker's bytecode is compiled into the image, where the launcher loads it from
        assert any("compileall" in ln and "/opt/verimap" in ln for ln in runs)
        if name == "Dockerfile.offline":  # the only step run: it needs no network
            assert len(runs) == 1


def test_the_launcher_imports_the_worker_instead_of_running_it_as_a_script():
    # a script would be compiled at every start; a module loads from the image's bytecode
    argv = WORKER_COMMAND
    assert argv[:3] == ("python3", "-I", "-c") and argv[4:] == (WORKER_IN_IMAGE,)
    assert "exec_module" in argv[3] and "submodule_search_locations" in argv[3]
    assert "sys.path" not in argv[3]  # job processes see no extra import path
    for name in ("Dockerfile", "Dockerfile.offline"):  # their CMD starts the worker alike
        text = (image.DOCKERFILES / name).read_text()
        cmd = [ln for ln in text.splitlines() if ln.startswith("CMD")]
        assert json.loads(cmd[0][len("CMD") :])[: len(argv)] == list(argv), name
