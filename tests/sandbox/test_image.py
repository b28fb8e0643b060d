"""Image identity and the offline build's inputs (no Docker needed)."""

import json
import shutil

import pytest

from verimap.sandbox import image
from verimap.sandbox.worker_module import sandbox_dir


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
    copy = tmp_path / "sb"
    shutil.copytree(sandbox_dir(), copy)
    assert image.hash_inputs(copy) == image.version()
    (copy / "README.unrelated").write_text("not a build input")
    assert image.hash_inputs(copy) == image.version()
    with open(copy / "worker.py", "a") as f:
        f.write("\n# changed\n")
    assert image.hash_inputs(copy) != image.version()


def test_tag_and_cache_location(monkeypatch, tmp_path):
    assert image.image_tag() == f"verimap-sandbox:{image.version()}"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert image.cache_dir() == tmp_path / "verimap" / "sandbox"
    assert image._base_key("bookworm") != image._base_key("trixie")


def test_dockerfiles_ship_the_worker_and_the_unprivileged_user():
    for name in ("Dockerfile", "Dockerfile.offline"):
        text = (sandbox_dir() / name).read_text()
        assert "COPY worker.py wire.py /opt/verimap/" in text
        assert f"USER {image.SANDBOX_UID}:{image.SANDBOX_UID}" in text
        runs = [ln for ln in text.splitlines() if ln.startswith("RUN")]
        # the worker's bytecode is compiled into the image, where the launcher loads it from
        assert any("compileall" in ln and "/opt/verimap" in ln for ln in runs)
        if name == "Dockerfile.offline":  # the only step run: it needs no network
            assert len(runs) == 1


def test_the_launcher_imports_the_worker_instead_of_running_it_as_a_script():
    # a script would be compiled at every start; a module loads from the image's bytecode
    argv = image.WORKER_COMMAND
    assert argv[:3] == ("python3", "-I", "-c")
    assert image.WORKER_IN_IMAGE not in argv[:3] and "exec_module" in argv[3]
    assert "sys.path" not in argv[3]  # job processes see no extra import path
    for name in ("Dockerfile", "Dockerfile.offline"):  # their CMD starts the worker alike
        cmd = [ln for ln in (sandbox_dir() / name).read_text().splitlines() if ln.startswith("CMD")]
        assert json.loads(cmd[0][len("CMD") :])[:4] == list(argv), name
