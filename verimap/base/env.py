"""Reading settings from the environment, where a set-but-empty variable means unset.

Shells, CI systems and container runtimes often leave a variable defined but empty
(`OPENAI_API_KEY=` in a `.env` file, `FOO: ""` in a workflow, `docker run -e FOO`
with FOO unset on the host). Taken as a value, an empty `OPENAI_API_KEY` made verimap
build an OpenAI client with no credentials, and an empty `VERIMAP_N_CTX` failed to parse
as a number nobody meant to give. Every read of verimap's settings goes through here so a
blank variable behaves exactly like a missing one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, overload

from verimap.base.errors import VerimapError

T = TypeVar("T")


class EnvError(VerimapError, ValueError):
    """A variable is set to something verimap cannot use; the message names the variable."""


@overload
def getenv(name: str) -> str | None: ...
@overload
def getenv(name: str, default: str) -> str: ...
@overload
def getenv(name: str, default: str | None) -> str | None: ...


def getenv(name: str, default: str | None = None) -> str | None:
    """The variable's value, or `default` when it is unset, empty or only whitespace.

    Any other value is returned as given, untrimmed: which spaces matter is the setting's business.
    """
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    return value


def getenv_int(name: str, default: int) -> int:
    """An integer setting; blank means `default`, anything else that is not an integer is an
    `EnvError` naming the variable (a bare `int()` error does not say which one was wrong)."""
    return _parsed(name, default, int, "an integer")


def getenv_float(name: str, default: float) -> float:
    """A number setting; blank means `default`, anything else that is not a number is an
    `EnvError` naming the variable."""
    return _parsed(name, default, float, "a number")


def _parsed(name: str, default: T, parse: Callable[[str], T], what: str) -> T:
    raw = getenv(name)
    if raw is None:
        return default
    try:
        return parse(raw)
    except ValueError:
        raise EnvError(f"{name} must be {what}, got {raw!r}") from None


def state_dir() -> Path:
    """Where verimap keeps its user's private state (kept servers' pid/port files, the call
    cache's key, the files the user trusts): `$VERIMAP_STATE_DIR`, else `$XDG_STATE_HOME/verimap` (`~/.local/state/verimap`)."""
    env = getenv("VERIMAP_STATE_DIR")
    if env:
        return Path(env).expanduser()
    base = getenv("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "verimap"
