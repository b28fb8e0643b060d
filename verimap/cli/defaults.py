"""Defaults for flags from outside the command line: `VERIMAP_*` environment variables and the
`[tool.verimap]` table of ./pyproject.toml. Precedence, click's own: the command line, then the
environment, then `[tool.verimap]`, then the built-in default (docs/cli.md#defaults).

Names follow the flags, so there is nothing new to learn: `--max-tasks` of `verimap eval` is
`VERIMAP_EVAL_MAX_TASKS` and `max-tasks` (or `max_tasks`) under `[tool.verimap.eval]`, or under
`[tool.verimap]` itself for every command that has the flag. Settings that name code to run are
never taken from either place, as they are never taken from a `--config` file (issue 39): a
shared file or an inherited environment is not trusted to run code."""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from verimap.cli.names import old_keys, walk, warn_renamed

# Options that name Python code to run: the command line only, never a file or a variable.
RUNS_CODE = {
    "models_factory": "it names Python code to run; give --models-factory on the command line",
}
# Options a pyproject table may not set (the environment may).
NOT_IN_PYPROJECT = {**RUNS_CODE, "config_file": "a config file cannot name another"}
PREFIX = "VERIMAP"


class SettingsError(click.ClickException):
    """A bad `[tool.verimap]`: bad input, as a bad flag is."""

    exit_code = 2


def flag_name(param: click.Parameter) -> str | None:
    """An option's name without dashes (`max-tasks`): its first long spelling."""
    if not isinstance(param, click.Option):
        return None
    longs = [o for o in param.opts if o.startswith("--")]
    return longs[0][2:] if longs else None


def envvar_name(path: Iterable[str], param: click.Parameter) -> str | None:
    """`VERIMAP_<COMMAND>_<FLAG>`, upper case, dashes as underscores (None: no variable)."""
    name = flag_name(param)
    if name is None or param.name in RUNS_CODE or not param.expose_value:
        return None
    return "_".join([PREFIX, *path, name]).upper().replace("-", "_")


def name_envvars(cmd: click.Command, path: tuple[str, ...]) -> None:
    """Give every option under `cmd` its variable (an option that names one keeps it)."""
    for sub_path, sub in walk(cmd, path):
        for p in sub.params:
            if isinstance(p, click.Option) and p.envvar is None:
                p.envvar = envvar_name(sub_path, p)


def _options(cmd: click.Command) -> dict[str, click.Parameter]:
    """`cmd`'s options by their pyproject key (the flag's name, with underscores)."""
    return {
        name.replace("-", "_"): p
        for p in cmd.params
        if (name := flag_name(p)) is not None and p.expose_value
    }


def _unknown(where: str, key: str, vocabulary: Iterable[str]) -> str:
    close = difflib.get_close_matches(key.replace("-", "_"), sorted(vocabulary), n=1)
    hint = f" (did you mean {close[0].replace('_', '-')!r}?)" if close else ""
    return f"{where} {key!r}{hint}"


def _names(cmd: click.Command) -> set[str]:
    """The names of a group's commands (none for a command)."""
    if not isinstance(cmd, click.Group):
        return set()
    return set(cmd.list_commands(click.Context(cmd)))


class _Reading:
    """What reading one `[tool.verimap]` found wrong, and the old names it warned about."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.warned: set[str] = set()

    def settings(self, cmd: click.Command, table: dict[str, Any], where: str) -> dict[str, Any]:
        """`table`'s settings for `cmd` as click's default map (by parameter name): options
        by their flag's name, renamed ones by their old names too (with a warning)."""
        options, renamed, subcommands = _options(cmd), old_keys(cmd), _names(cmd)
        out: dict[str, Any] = {}
        for key, value in table.items():
            k = str(key).replace("-", "_")
            if isinstance(value, dict) and k in subcommands:
                continue  # its own table, read on its own
            if k in options and options[k].name in NOT_IN_PYPROJECT:
                why = NOT_IN_PYPROJECT[str(options[k].name)]
                self.problems.append(f"{where} {key!r} is not allowed: {why}")
            elif k in options:
                out[str(options[k].name)] = value
            elif k in renamed:
                param, old = renamed[k]
                if where + k not in self.warned:  # a shared key: said once, not per command
                    self.warned.add(where + k)
                    warn_renamed(repr(key), repr(flag_name(param)), f"pyproject.toml {where}")
                out[str(param.name)] = old.from_key(value)
            else:
                self.problems.append(_unknown(where, str(key), [*options, *subcommands]))
        return out


def _table(pyproject: Path) -> dict[str, Any] | None:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SettingsError(f"{pyproject}: {e}") from None
    table = data.get("tool", {}).get("verimap")
    if table is not None and not isinstance(table, dict):
        raise SettingsError(f"{pyproject}: [tool.verimap] must be a table")
    return table


def tool_defaults(root: click.Group, pyproject: Path) -> dict[str, Any]:
    """click's default map from the `[tool.verimap]` table of `pyproject` ({} without one).
    Keys right under `[tool.verimap]` apply to every command with that option (and must name
    an option of some command); `[tool.verimap.COMMAND]` tables to that command and win.
    Unknown keys are an error that names each one."""
    table = _table(pyproject)
    if not table:
        return {}
    commands = [(path, cmd) for path, cmd in walk(root) if path]
    top = _names(root)
    shared = {k: v for k, v in table.items() if not (isinstance(v, dict) and k in top)}
    reading = _Reading()
    used: set[str] = set()
    tree: dict[str, Any] = {}
    for path, cmd in commands:
        own: Any = table
        for name in path:
            own = own.get(name) if isinstance(own, dict) else None
        known = {*_options(cmd), *old_keys(cmd)}
        common = {k: v for k, v in shared.items() if str(k).replace("-", "_") in known}
        used |= set(common)
        node = tree
        for name in path:
            node = node.setdefault(name, {})
        node.update(reading.settings(cmd, common, "[tool.verimap]"))
        where = f"[tool.verimap.{'.'.join(path)}]"
        node.update(reading.settings(cmd, own if isinstance(own, dict) else {}, where))
    every = {*top, *(o for _, cmd in commands for o in _options(cmd))}
    unused = [_unknown("[tool.verimap]", str(k), every) for k in shared if k not in used]
    problems = list(dict.fromkeys([*reading.problems, *unused]))
    if problems:
        raise SettingsError(
            f"{pyproject}: unknown or refused setting{'s' if len(problems) > 1 else ''}: "
            + "; ".join(problems)
        )
    return tree
