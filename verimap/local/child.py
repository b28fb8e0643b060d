"""How verimap starts a Python child of its own (`python -m MODULE`): never from the user's
current directory. `python -m` puts the working directory first on `sys.path`, so a
`socket.py`, `hmac.py` or `llama_cpp/` at the root of a cloned repository would be imported,
and run as the user, in place of the real one."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def python_module(
    module: str, args: Sequence[str], env: Mapping[str, str], cwd: Path
) -> tuple[list[str], dict[str, str], Path]:
    """The command line, environment and working directory that run `module` with this
    interpreter: `-P` and `PYTHONSAFEPATH=1` keep the working directory off `sys.path` (for
    the child and any Python it starts in turn), and `cwd` should be a directory only the
    user writes (a private state or temporary directory)."""
    return [sys.executable, "-P", "-m", module, *args], {**env, "PYTHONSAFEPATH": "1"}, cwd
