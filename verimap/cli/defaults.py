"""Defaults for flags from outside the command line, and what each place may set: the one
place the trust rule for configuration is enforced (docs/security.md#configuration).

Precedence is click's own: the command line (with a `--config FILE` given there), then
`VERIMAP_*` environment variables, then the `[tool.verimap]` table of ./pyproject.toml, then
the built-in default (docs/cli.md#defaults). The first two are the user's. The table is the
current directory's, a cloned repository's: until the user trusts that file as it reads now
(`verimap trust`), it may set only the options in HARMLESS (a few within a cap). Any other it
sets fails the command that would use it, naming each and how to give it, so nothing runs
otherwise than the user asked; `verimap model stop`, `model status` and `trust` ignore it with
a warning instead, and `--help` never reads it. Settings that name code to run
(`cli_only.RUNS_CODE`) come from the command line only, whoever wrote the file.

Names follow the flags: `--max-tasks` of `verimap eval` is `VERIMAP_EVAL_MAX_TASKS` and
`max-tasks` (or `max_tasks`) under `[tool.verimap.eval]`, or under `[tool.verimap]` itself for
every command that has the flag. An unknown key is a warning."""

from __future__ import annotations

import difflib
import functools
import json
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from verimap.cli.cli_only import NOT_IN_CONFIG_FILES, RUNS_CODE

__all__ = ["HARMLESS", "NOT_IN_PYPROJECT", "RUNS_CODE", "Pyproject", "prepare", "read_pyproject"]

NOT_IN_PYPROJECT = NOT_IN_CONFIG_FILES
PREFIX = "VERIMAP"
META = "verimap.pyproject"  # where the main command leaves what it read, for the commands
# Commands that must work in any directory: what they would be refused is ignored, with a warning.
ANYWHERE = {("model", "stop"), ("model", "status"), ("trust",)}

# A value check: why an untrusted file may not set this value, or None.
Check = Callable[[Any], str | None]


def _at_most(cap: int) -> Check:
    def check(value: Any) -> str | None:
        try:
            n = int(str(value))
        except ValueError:
            return None  # not a number: the option's own type says so
        return f"more than {cap}" if n > cap else None

    return check


def _only(allowed: str) -> Check:
    return lambda value: None if value == allowed else f"only {allowed!r} is harmless"


def _built_in(value: Any) -> str | None:
    from verimap.evals.tasksets import BENCHMARKS

    return None if value in BENCHMARKS else "a file's name (only a built-in benchmark is harmless)"


# What an untrusted pyproject.toml may set, by flag name: any value (None), or one that passes
# the check. Every option not listed is refused, so a new option is refused until added here.
HARMLESS: dict[str, Check | None] = {
    # How much work, and how much at once.
    "max-tasks": _at_most(64),
    "max-connections": _at_most(64),
    "max-parallel-nodes": _at_most(16),
    "max-attempts": _at_most(10),
    "max-iterations": _at_most(10),
    "epochs": _at_most(10),
    "samples": _at_most(16),
    "max-nodes": None,
    "limit": None,
    "sample": None,
    "sample-id": None,
    "seed": None,
    "call-limit": None,
    "token-limit": None,
    "cost-limit": None,
    "time-limit": None,
    "timeout": None,
    "resamples": _at_most(100_000),
    "chunk-words": None,
    # What a run does, and with which benchmark and fields.
    "method": None,
    "temperature": None,
    "top-p": None,
    "cross-check": None,
    "ballot": None,
    "sequential": None,
    "no-reuse": None,
    "fail-accepted": None,
    "benchmark": _built_in,
    "input": None,
    "target": None,
    "id": None,
    "test-field": None,
    "entry-point-field": None,
    "scorer": None,
    "domain": None,
    "node": None,
    "sandbox": _only("docker"),
    # What is shown.
    "quiet": None,
    "json": None,
    "mermaid": None,
    "verbose": None,
    "max-chars": None,
    "k": None,
    "format": None,
    "include-fallbacks": None,
    "metadata": None,
}

_ROUTES = "it chooses where requests, prompts and your API key go"
_FILES = "it names a file or directory to read or write"
# Why the options an untrusted file may not set are refused; any other: not HARMLESS.
WHY: dict[str, str] = {
    **dict.fromkeys(
        (
            "base-url",
            "model",
            "planner-model",
            "executor-model",
            "judge-model",
            "ray-endpoint-per-node",
            "ray-env",
            "otel",
            "judge",
        ),
        _ROUTES,
    ),
    **dict.fromkeys(("verification", "policy"), "it weakens checking"),
    "model-file": "it loads a model file of its choosing",
    **dict.fromkeys(
        (
            "out",
            "out-file",
            "trace-dir",
            "cache-dir",
            "data-dir",
            "plan-file",
            "problems",
            "inputs",
            "outputs",
            "also",
            "resume",
        ),
        _FILES,
    ),
    "cache": "it answers model calls from replies kept on disk",
    "keep-server": "it keeps a process running after the command",
}
NOT_HARMLESS = "it is not among the settings an untrusted file may make"


class SettingsError(click.ClickException):
    """A `[tool.verimap]` setting the command cannot take: bad input, as a bad flag is."""

    exit_code = 2


def walk(
    cmd: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under `cmd` (itself first) with its path of names (`("eval", "report")`);
    a group's commands are loaded, so this imports what they need."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None:
                yield from walk(sub, (*path, name))


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


def prepare(cmd: click.Command, path: tuple[str, ...]) -> None:
    """Make `cmd` and every command under it follow this module: each option gets its variable
    (an option that names one keeps it), and each command checks, when it runs (after
    `--help` had its chance), what `[tool.verimap]` gave it (`Pyproject.apply`)."""
    for sub_path, sub in walk(cmd, path):
        for p in sub.params:
            if isinstance(p, click.Option) and p.envvar is None:
                p.envvar = envvar_name(sub_path, p)
        if sub.callback is not None and not getattr(sub.callback, "_verimap_checked", False):
            sub.callback = _checked(sub.callback, sub_path)


def _checked(callback: Callable[..., Any], path: tuple[str, ...]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        read: Pyproject | None = ctx.meta.get(META)
        to_come = isinstance(ctx.command, click.Group) and ctx.invoked_subcommand
        if read is not None and not to_come:  # a group's subcommand checks its own
            read.apply(ctx, path)
        return callback(*args, **kwargs)

    run._verimap_checked = True  # type: ignore[attr-defined]
    return run


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


def _shown(value: Any) -> str:
    return json.dumps(value, default=str)


def _warn(text: str) -> None:
    from verimap.base.redaction import for_console

    click.echo(for_console(f"warning: {text}"), err=True)


@dataclass
class Pyproject:
    """What ./pyproject.toml's `[tool.verimap]` gives the commands: click's default map, and
    by command path the settings refused (parameter name -> why), the file's trust deciding."""

    path: Path
    trust: str  # "trusted", "changed" (since it was trusted) or "untrusted"
    defaults: dict[str, Any] = field(default_factory=dict)
    refused: dict[tuple[str, ...], dict[str, str]] = field(default_factory=dict)
    never: set[str] = field(default_factory=set)  # refused whoever wrote the file

    def apply(self, ctx: click.Context, path: tuple[str, ...]) -> None:
        """At the start of command `path`: fail (exit 2) on a refused setting it would use,
        naming each and how to give it (a warning for the ANYWHERE commands, which ignore it);
        then say on one line which values it takes from the file."""
        given = _given(ctx)
        refused = {n: why for n, why in self.refused.get(path, {}).items() if n not in given}
        if refused and path in ANYWHERE:
            for name, why in refused.items():
                state = "" if name in self.never else f" is {self._state()}"
                _warn(f"{self.path}{state}: {why}; ignored")
        elif refused:
            raise SettingsError(self._refusal(ctx, refused))
        from_file = click.core.ParameterSource.DEFAULT_MAP
        taken = [
            f"{flag_name(p)} = {_shown(ctx.lookup_default(p.name, call=False))}"
            for p in ctx.command.params
            if p.name and p.name not in given and ctx.get_parameter_source(p.name) is from_file
        ]
        if taken:
            from verimap.base.redaction import for_console

            how = "trusted" if self.trust == "trusted" else "not trusted: harmless settings only"
            note = f"note: from {self.path} [tool.verimap] ({how}): {', '.join(taken)}"
            click.echo(for_console(note), err=True)

    def _state(self) -> str:
        return "changed since you trusted it" if self.trust == "changed" else "not trusted"

    def _refusal(self, ctx: click.Context, refused: dict[str, str]) -> str:
        params = {p.name: p for p in ctx.command.params}
        mine = [why for name, why in refused.items() if name not in self.never]
        lines = [f"{self.path}: {why}" for name, why in refused.items() if name in self.never]
        if mine:
            flags = ", ".join(f"--{flag_name(params[n])}" for n in refused if n not in self.never)
            lines += [
                f"{self.path} is {self._state()}, so this command takes none of these from it:",
                *(f"  {why}" for why in mine),
                f"Give them on the command line ({flags}) or as VERIMAP_* variables, or trust "
                f"the file: verimap trust {self.path} (docs/security.md)",
            ]
        return "\n".join(lines)


def _given(ctx: click.Context) -> set[str]:
    """The parameters the user set: on the command line, in the environment, or in the
    `--config` file named there (which the command reads later, and which wins)."""
    user = {click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT}
    given = {name for name in ctx.params if ctx.get_parameter_source(name) in user}
    if ctx.params.get("config_file"):
        from verimap.cli.eval_config import load_config_file

        try:
            keys = set(load_config_file(ctx.params["config_file"]))
        except click.ClickException:
            return given  # the command reports it
        given |= keys
    return given


class _Reading:
    """Reading one `[tool.verimap]`: the settings taken, and those refused, per command."""

    def __init__(self, trusted: bool) -> None:
        self.trusted = trusted
        self.unknown: list[str] = []
        self.never: set[str] = set()

    def settings(
        self,
        cmd: click.Command,
        table: dict[str, Any],
        where: str,
        node: dict[str, Any],
        refused: dict[str, str],
    ) -> None:
        """Put `table`'s settings for `cmd` into `node`, click's default map (by parameter
        name), and those it may not take into `refused`; options by their flag's name. A later
        table replaces an earlier one's setting, refused or not."""
        options, subcommands = _options(cmd), _names(cmd)
        for key, value in table.items():
            k = str(key).replace("-", "_")
            if isinstance(value, dict) and k in subcommands:
                continue  # its own table, read on its own
            if k not in options:
                self.unknown.append(_unknown(where, str(key), [*options, *subcommands]))
                continue
            param = options[k]
            name = str(param.name)
            why = self._refused(param, value)
            if why is None:
                node[name] = value
                refused.pop(name, None)
            else:
                refused[name] = f"{where} {key!r}{why}"
                node.pop(name, None)

    def _refused(self, param: click.Parameter, value: Any) -> str | None:
        """Why the file may not set `param` to `value` (as the message's tail), or None."""
        if param.name in NOT_IN_PYPROJECT:
            self.never.add(str(param.name))
            return f" is not allowed: {NOT_IN_PYPROJECT[str(param.name)]}"
        if self.trusted:
            return None
        flag = str(flag_name(param))
        if flag not in HARMLESS:
            return f": {WHY.get(flag, NOT_HARMLESS)}"
        check = HARMLESS[flag]
        bad = check(value) if check is not None else None
        return f" = {_shown(value)}: {bad}" if bad else None


def _read(pyproject: Path) -> tuple[bytes, dict[str, Any]] | None:
    """The file's bytes and its `[tool.verimap]` table; None (with a warning) when it has
    none or cannot be read."""
    try:
        data = pyproject.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        _warn(f"{pyproject}: {e.strerror}; its [tool.verimap] is ignored")
        return None
    try:
        table = tomllib.loads(data.decode("utf-8")).get("tool", {}).get("verimap")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError) as e:
        _warn(f"{pyproject}: {e}; its [tool.verimap] is ignored")
        return None
    if table is not None and not isinstance(table, dict):
        _warn(f"{pyproject}: [tool.verimap] must be a table; ignored")
        return None
    return (data, table) if table else None


def _trust(pyproject: Path, data: bytes) -> str:
    from verimap.cli.trust import TrustStoreError, trust_of

    try:
        return trust_of(pyproject, data)
    except TrustStoreError as e:
        _warn(f"{e}; {pyproject} is not trusted meanwhile")
        return "untrusted"


def read_pyproject(root: click.Group, pyproject: Path) -> Pyproject | None:
    """What the `[tool.verimap]` table of `pyproject` gives each command under `root` (None
    without one). Keys right under `[tool.verimap]` apply to every command with that option
    (and should name an option of some command); `[tool.verimap.COMMAND]` tables to that
    command and win. An unknown key or an unreadable file is a warning naming it."""
    found = _read(pyproject)
    if found is None:
        return None
    data, table = found
    trust = _trust(pyproject, data)
    read = Pyproject(pyproject, trust)
    reading = _Reading(trusted=trust == "trusted")
    commands = [(path, cmd) for path, cmd in walk(root) if path]
    top = _names(root)
    shared = {k: v for k, v in table.items() if not (isinstance(v, dict) and k in top)}
    used: set[str] = set()
    for path, cmd in commands:
        own: Any = table
        for name in path:
            own = own.get(name) if isinstance(own, dict) else None
        known = set(_options(cmd))
        common = {k: v for k, v in shared.items() if str(k).replace("-", "_") in known}
        used |= set(common)
        node = read.defaults
        for name in path:
            node = node.setdefault(name, {})
        refused = read.refused.setdefault(path, {})
        reading.settings(cmd, common, "[tool.verimap]", node, refused)
        where = f"[tool.verimap.{'.'.join(path)}]"
        reading.settings(cmd, own if isinstance(own, dict) else {}, where, node, refused)
    read.never = reading.never
    every = {*top, *(o for _, cmd in commands for o in _options(cmd))}
    unused = [_unknown("[tool.verimap]", str(k), every) for k in shared if k not in used]
    for text in dict.fromkeys([*reading.unknown, *unused]):
        _warn(f"{pyproject}: unknown setting {text}; ignored")
    return read
