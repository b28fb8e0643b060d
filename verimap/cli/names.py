"""Old spellings of renamed options: still accepted for one release, hidden from `--help`, and
each use says on stderr what the option is called now. One mechanism for every command, so a
rename is a declaration (`old=`) and never new parsing code; docs/cli.md#names has the table.

The old spellings are parsed as spellings of the new option (the parser learns them under a
destination of their own), so an old spelling can also set a fixed value, the way
`--no-progress` now means `--quiet`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click

_TAKES_VALUE: Any = object()  # an old spelling that takes the option's value, as it always did


@dataclass(frozen=True)
class Old:
    """A deprecated spelling of an option: `-r`, `--max-retries`; `value` when the spelling is
    a flag that sets the new option to a fixed value (`--no-progress`: quiet = True);
    `instead` when the warning should advise more than the new spelling."""

    spelling: str
    value: Any = _TAKES_VALUE
    instead: str | None = None

    @property
    def is_flag(self) -> bool:
        return self.value is not _TAKES_VALUE

    @property
    def key(self) -> str | None:
        """The config-file key the old spelling stood for (`max_retries`); None for a short
        option, which no file ever used."""
        if not self.spelling.startswith("--"):
            return None
        return self.spelling[2:].replace("-", "_")

    def from_key(self, value: Any) -> Any:
        """The new option's value for `value` given under the old key: a flag's key holds a
        boolean (`progress: false`), a value option's key the value itself."""
        if not self.is_flag:
            return value
        return self.value if value else not self.value


def warn_renamed(old: str, new: str, where: str = "") -> None:
    """The one line every use of an old spelling prints on stderr."""
    at = f" ({where})" if where else ""
    click.echo(f"warning: {old}{at} is deprecated; use {new}", err=True)


class RenamedOption(click.Option):
    """A click option that also answers to its `old` spellings (hidden, warned)."""

    def __init__(self, param_decls: Sequence[str], *, old: Sequence[Old] = (), **kw: Any):
        super().__init__(param_decls, **kw)
        self.old: tuple[Old, ...] = tuple(old)

    def _dest(self, old: Old) -> str:
        return f"{self.name}\0{old.spelling}"

    @property
    def new_spelling(self) -> str:
        """The spelling a warning points to: the long one when there is one."""
        longs = [o for o in self.opts if o.startswith("--")]
        return (longs or list(self.opts))[0]

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        for old in self.old:
            if old.is_flag:
                action, extra = "store_const", {"const": old.value}
            elif self.is_flag:
                action, extra = "store_const", {"const": True}
            else:
                action = "append" if self.multiple else "store"
                extra = {"nargs": self.nargs}
            parser.add_option(obj=self, opts=[old.spelling], dest=self._dest(old), action=action,
                              **extra)  # fmt: skip

    def consume_value(self, ctx: click.Context, opts: Mapping[str, Any]) -> Any:
        given = dict(opts)
        for old in self.old:
            if self._dest(old) not in given:
                continue
            value = given.pop(self._dest(old))
            warn_renamed(old.spelling, old.instead or self.new_spelling)
            if given.get(self.name) is None:
                given[self.name] = value
        return super().consume_value(ctx, given)


def option(*decls: str, old: Sequence[str | Old] = (), **kw: Any) -> Callable[..., Any]:
    """`click.option` with deprecated spellings: `option("--max-attempts", old=["--max-retries"])`."""
    olds = [o if isinstance(o, Old) else Old(o) for o in old]
    return click.option(*decls, cls=RenamedOption, old=olds, **kw)


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


def old_keys(cmd: click.Command) -> dict[str, tuple[click.Parameter, Old]]:
    """The config-file keys `cmd`'s options had before their renames (`runs`, `max_retries`),
    each with its option and old spelling, so a file written for the old names still loads."""
    keys: dict[str, tuple[click.Parameter, Old]] = {}
    for p in cmd.params:
        for old in getattr(p, "old", ()):
            if old.key is not None:
                keys[old.key] = (p, old)
    return keys
