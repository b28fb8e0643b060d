"""verimap inside other frameworks, each an optional extra.

- `verimap.integrations.inspect_ai` (extra `inspect`): a solver that runs any verimap method on
  an Inspect AI sample, a model adapter through which Inspect's providers, connection limits and
  cache serve verimap's roles, and a scorer of verified answers (docs/inspect.md).

Nothing else in verimap imports this package: a framework is a dependency of its integration
only, and importing an integration whose framework is missing names the extra that installs it.
"""

from __future__ import annotations


def missing_extra(error: ModuleNotFoundError, package: str, extra: str) -> Exception:
    """The error to raise when importing an integration failed: one that names the extra when
    `package` itself is what is missing, else the import error as it was."""
    if error.name is None or error.name.split(".")[0] != package:
        return error
    return ModuleNotFoundError(
        f"this verimap integration needs {package}, which is not installed; install it with "
        f"`pip install 'verimap[{extra}]'`",
        name=error.name,
    )
