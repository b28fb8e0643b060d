"""`verimap trust`: the `pyproject.toml` files whose `[tool.verimap]` the user trusts.

A record holds a file's resolved path and the sha256 of its content, so trust is given to one
file as it was read (like direnv's `allow`): an edited file is untrusted again. The records are
`trusted.json` in verimap's state directory (`$VERIMAP_STATE_DIR`, else
`$XDG_STATE_HOME/verimap` or `~/.local/state/verimap`), closed to other users. What trust
changes is `verimap.cli.defaults`' to decide (docs/security.md)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import click

from verimap.base.errors import VerimapError
from verimap.local.catalog import StateDirError, private_dir, state_dir

STORE = "trusted.json"
Trust = Literal["trusted", "changed", "untrusted"]


class TrustStoreError(VerimapError, OSError):
    """The records cannot be read or written; nothing is trusted meanwhile."""


@dataclass(frozen=True)
class Record:
    """One trusted file: its resolved path, the sha256 of its bytes, when (UTC, ISO 8601)."""

    path: str
    sha256: str
    trusted_at: str


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _store(create: bool) -> Path:
    d = state_dir()
    if create or d.exists():
        try:
            d = private_dir(d)
        except StateDirError as e:
            raise TrustStoreError(str(e)) from None
    return d / STORE


def records() -> dict[str, Record]:
    """The trusted files by path ({} before the first `verimap trust`). A store that another
    user could have written is an error, never a source of trust."""
    path = _store(create=False)
    try:
        st = path.lstat()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise TrustStoreError(f"cannot read {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise TrustStoreError(f"{path} is not a private file of this user; remove it")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {r["path"]: Record(**r) for r in data["files"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TrustStoreError(f"cannot read {path}: {e}; remove it and trust again") from None


def _save(recs: dict[str, Record]) -> None:
    path = _store(create=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    data = {"files": [asdict(r) for r in sorted(recs.values(), key=lambda r: r.path)]}
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


def key(path: Path) -> str:
    """How a record names a file: its absolute path with every symlink resolved."""
    return str(path.resolve())


def trust_of(path: Path, data: bytes) -> Trust:
    """Whether the file at `path`, read as `data`, is trusted; "changed" when it was trusted
    with another content. Raises TrustStoreError when the records cannot be read."""
    rec = records().get(key(path))
    if rec is None:
        return "untrusted"
    return "trusted" if rec.sha256 == digest(data) else "changed"


def trust_file(path: Path, data: bytes) -> Record:
    """Trust `path` as it reads now (`data`), replacing an older record of it."""
    recs = records()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rec = Record(key(path), digest(data), stamp)
    recs[rec.path] = rec
    _save(recs)
    return rec


def revoke(path: Path) -> bool:
    """Trust `path` no more; False when it was not trusted."""
    recs = records()
    if recs.pop(key(path), None) is None:
        return False
    _save(recs)
    return True


def _settings(table: Any, where: str = "tool.verimap") -> list[str]:
    """`[tool.verimap]`'s settings as `[TABLE] key = value` lines, subtables after."""
    if not isinstance(table, dict):
        return []
    lines = [
        f"[{where}] {k} = {json.dumps(v, default=str)}"
        for k, v in table.items()
        if not isinstance(v, dict)
    ]
    for k, v in table.items():
        if isinstance(v, dict):
            lines += _settings(v, f"{where}.{k}")
    return lines


def _target(path: Path | None) -> Path:
    p = path or Path("pyproject.toml")
    return p / "pyproject.toml" if p.is_dir() else p


@click.command("trust")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--revoke", "undo", is_flag=True, help="Trust PATH no more.")
@click.option("--list", "show", is_flag=True, help="List the trusted files and their state.")
def trust(path: Path | None, undo: bool, show: bool) -> None:
    """Trust the [tool.verimap] of PATH (a pyproject.toml or its directory; default
    ./pyproject.toml) as it reads now: it may then set every option but those taken from the
    command line only. Until then it sets only harmless ones (docs/security.md); an edited
    file is untrusted again."""
    from verimap.base.redaction import for_console

    if undo and show:
        raise click.UsageError("--revoke and --list exclude each other")
    try:
        if show:
            _list(path)
            return
        target = _target(path)
        if undo:
            done = revoke(target)
            click.echo(f"{'no longer trusted' if done else 'was not trusted'}: {key(target)}")
            return
        try:
            data = target.read_bytes()
            table = tomllib.loads(data.decode("utf-8")).get("tool", {}).get("verimap")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise click.BadParameter(f"cannot trust {target}: {e}", param_hint="PATH") from None
        rec = trust_file(target, data)
    except TrustStoreError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"trusted: {rec.path} (sha256 {rec.sha256[:12]}); until it changes, these apply:")
    for line in _settings(table) or ["(no [tool.verimap] settings)"]:
        click.echo(for_console(f"  {line}"))


def _list(path: Path | None) -> None:
    if path is not None:
        raise click.UsageError("--list takes no PATH")
    recs = records()
    if not recs:
        click.echo("no file is trusted")
    for rec in recs.values():
        try:
            state = "trusted" if digest(Path(rec.path).read_bytes()) == rec.sha256 else "changed"
        except OSError:
            state = "missing"
        click.echo(f"{state:8} {rec.path}  (since {rec.trusted_at})")
