"""Opening the files verimap writes for the user: reports, pages, exports, traces.

A path verimap writes can come from somewhere the user does not watch: a cloned project's
settings, an inherited environment, a default beside a file somebody else shipped, a symlink
planted in a shared directory. None of these may make verimap replace a file it did not write
(a `~/.bashrc` replaced by a report runs the report's lines at the next shell). So an existing
file is replaced, or appended to, only when

- the user named that path (`named`: typed on the command line, or passed by Python code), or
- verimap wrote it: each `Kind` of file says how to recognise one of its own (`Kind.ours`),
  from the first bytes of the file (a mark in its first line, the first record's fields).

Otherwise `OutFileError`, before anything is written. A path that was not named is never
followed through a symlink, and never replaces anything but a regular file. A whole file is
written beside its target under a fresh name and then moved into place (a reader never sees
half of it, and the move replaces a directory entry, never a symlink's target).
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
import zipfile
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from verimap.base.errors import VerimapError

# How much of a file is read to recognise it.
HEAD_BYTES = 4096


class OutFileError(VerimapError, OSError):
    """An output file that must not be written: it exists and verimap did not write it, or it
    cannot be written."""


@dataclass(frozen=True)
class Kind:
    """A kind of file verimap writes (`what`, for messages) and how to tell one verimap wrote:
    `ours` reads the start of an existing file (opened in binary, at offset 0)."""

    what: str
    ours: Callable[[BinaryIO], bool]


def marked(what: str, mark: str) -> Kind:
    """A text file whose writer puts `mark` in its first `HEAD_BYTES` bytes (a comment line, a
    `<meta>` tag)."""
    needle = mark.encode("utf-8")
    return Kind(what, lambda f: needle in f.read(HEAD_BYTES))


def jsonl_of(what: str, keys: frozenset[str]) -> Kind:
    """A JSON Lines file whose first line is an object holding every one of `keys`."""

    def ours(f: BinaryIO) -> bool:
        try:
            first = json.loads(f.readline(1 << 20))
        except ValueError:
            return False
        return isinstance(first, dict) and keys <= first.keys()

    return Kind(what, ours)


def _inspect_log(f: BinaryIO) -> bool:
    try:
        with zipfile.ZipFile(f) as z:
            return "header.json" in z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


TRACE = jsonl_of("verimap trace", frozenset({"type", "run_id", "ts"}))
INSPECT_LOG = Kind("Inspect log", _inspect_log)


def check_replace(path: str | os.PathLike[str], kind: Kind, *, named: bool) -> None:
    """Raise `OutFileError` unless `path` may be written: it does not exist, the user named it,
    or it is a regular file (not a symlink) that `kind.ours` recognises."""
    if named:
        return
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OutFileError(_refusal(p, kind, "a symbolic link")) from None
        raise OutFileError(f"cannot write {p}: {e.strerror or e}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OutFileError(_refusal(p, kind, "not a regular file"))
    with os.fdopen(fd, "rb") as f:
        if not kind.ours(f):
            raise OutFileError(_refusal(p, kind, f"not a {kind.what} verimap wrote"))


def _refusal(path: Path, kind: Kind, why: str) -> str:
    return (
        f"refusing to replace {path}: it exists and is {why}, and the path was not given on "
        "the command line; name it there to replace it, or choose another path"
    )


def write_file(path: str | os.PathLike[str], data: str | bytes, kind: Kind, *, named: bool) -> Path:
    """Write `data` (text as UTF-8) to `path` whole, after `check_replace`; the path written."""
    raw = data.encode("utf-8", errors="replace") if isinstance(data, str) else data

    def write(tmp: Path) -> None:
        with tmp.open("wb") as f:
            f.write(raw)

    return replace_with(path, kind, named=named, write=write)


def replace_with(
    path: str | os.PathLike[str], kind: Kind, *, named: bool, write: Callable[[Path], object]
) -> Path:
    """`write(tmp)` fills a fresh file beside `path` (the same name and suffix behind a dot
    and a random part), which then replaces `path` if `check_replace` allows it. A named path
    that is a symlink is written through (its target is replaced). The path written."""
    target = Path(path)
    if named and target.is_symlink():
        target = target.resolve()
    check_replace(target, kind, named=named)
    tmp = target.with_name(f".{secrets.token_hex(4)}.{target.name}")
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666))
        write(tmp)
        check_replace(target, kind, named=named)  # the writer may have taken a while
        os.replace(tmp, target)
    except OutFileError:
        tmp.unlink(missing_ok=True)
        raise
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutFileError(f"cannot write {target}: {e.strerror or e}") from None
    return target


def open_appending(path: str | os.PathLike[str], kind: Kind) -> TextIO:
    """`path` open for appending text: created if missing, else only if `kind.ours` recognises
    it, whoever named it (a file is only ever appended to by its own kind). Never followed
    through a symlink."""
    p = Path(path)
    for _ in range(2):  # created by someone else between the two tries: checked again
        with suppress(FileExistsError):
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            return os.fdopen(fd, "a", encoding="utf-8")
        check_replace(p, kind, named=False)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise OutFileError(f"cannot write {p}: {e.strerror or e}") from None
        return os.fdopen(fd, "a", encoding="utf-8")
    raise OutFileError(f"cannot write {p}: it keeps appearing and disappearing")


def file_name(text: str) -> str:
    """`text` as one file name component: only letters, digits, `_`, `.` and `-` (every other
    character becomes `_`), never `.` or `..` alone, never empty."""
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in text)
    return name if name.strip(".") else name.replace(".", "_") or "_"
