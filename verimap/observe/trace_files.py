"""Run files read leniently: JSONL records (traces, results, errors) and JSON objects
(config.json), with every bad line reported as `file:line: reason` and skipped.

Traces and eval directories come from killed runs, old versions, other tools and other
people, so nothing here raises on what a file holds. `read_jsonl` is the one reader of JSONL
run files: it yields the good records and one `LineProblem` per bad line (not UTF-8, not
JSON, nested too deeply, too long, or not of the record's shape). A shape is checked only as
far as the readers above rely on it: mappings where they index, numbers where they add,
strings where they key. Reasons never quote the line: it may hold anything, terminal escapes
included. Strings and containers are clipped for display, and paths confined to their run
directory. It sits below `view` and `evals`, which both need it.

A trace line of the event shape becomes a typed event (`as_event`) when its payload validates
(`event_types.parse_event`); one that does not (an older verimap's, a hand-edited one) is read
as a generic `Event` holding its `data` as it is, with the reason. This is the one place that
reads an event's payload as an untyped dict: every reader above works on the types.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from verimap.base.event_types import ENVELOPE, EVENT_TYPES, AnyEvent, Event, parse_event

DEFAULT_MAX_CHARS = 10_000
# A longer line is skipped unread: reading it would hold it all in memory at once.
MAX_LINE_BYTES = 64 * 2**20
# Deeper JSON is refused: every walk above (clipping, printing, templates) recurses.
MAX_DEPTH = 64
# What `clip_deep` keeps of one value: items per list or mapping, and nodes in all.
MAX_ITEMS = 200
MAX_NODES = 20_000


# -- shapes --------------------------------------------------------------------------------------

Check = Callable[[Any], bool]
_BIG = 2**63
_LATEST = 1e11  # a timestamp past this (the year 5138) is no time a run was made
_NONE = type(None)


@dataclass(frozen=True)
class Want:
    """What one field of a record must be: one of `types` (a bool is no number), passing
    `test` when given; `what` says it in the words a problem report uses. Checked on every
    line of every trace, so the common case is one `isinstance`."""

    types: tuple[type, ...]
    what: str
    test: Check | None = None
    required: bool = False

    def check(self, x: Any) -> bool:
        if not isinstance(x, self.types) or (isinstance(x, bool) and bool not in self.types):
            return False
        return self.test is None or x is None or self.test(x)

    def needed(self) -> Want:
        return replace(self, required=True)


def _in_range(x: Any) -> bool:
    return -_BIG < x < _BIG and (type(x) is int or math.isfinite(x))


def _values(want: Want) -> Check:
    return lambda x: all(want.check(v) for v in x.values())


def _fits(shape: Shape) -> Check:
    return lambda x: shape_problem(x, shape) is None


Shape = Mapping[str, Want]
STR = Want((str,), "a string")
INT = Want((int,), "an integer", _in_range)
COUNT = Want((int,), "an integer >= 0", lambda x: 0 <= x < _BIG)
NUM = Want((int, float), "a number", _in_range)
BOOL = Want((bool,), "true or false")
TIME = Want((int, float), "a Unix time", lambda x: 0 <= x < _LATEST)
MAPPING = Want((dict,), "an object")
LIST = Want((list,), "a list")
OPT_STR = Want((str, _NONE), "a string or null")
OPT_INT = Want((int, _NONE), "an integer or null", _in_range)
OPT_TIME = Want((int, float, _NONE), "a Unix time or null", TIME.test)

USAGE: Shape = {
    k: NUM
    for k in (
        "calls",
        "failed_calls",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "cost",
    )
}

# A results.jsonl line, as the report, the viewer and the exports read it (`TaskRecord`).
RESULT: Shape = {
    "key": STR.needed(),
    "task_id": STR.needed(),
    "method": STR.needed(),
    "benchmark": STR.needed(),
    "run": COUNT.needed(),
    "correct": BOOL.needed(),
    "verified": BOOL,
    "status": STR,
    "predicted": STR,
    "gold": STR,
    "score_detail": STR,
    "iterations": INT,
    "retries": INT,
    "tokens": INT,
    "fallbacks": INT,
    "dropped_vfs": INT,
    "cost": NUM,
    "wall_time_s": Want((int, float), "a number of seconds", TIME.test),
    "finished_at": TIME,
    "usage": Want(
        (dict,),
        "an object of roles to usage objects of numbers",
        _values(Want((dict,), "", _fits(USAGE))),
    ),
    "vf_stats": Want((dict,), "an object of numbers", _values(NUM)),
    "vf_calls": Want((dict,), "an object of numbers", _values(NUM)),
    "plans": LIST,
    "meta": Want((dict,), "an object (question_type a string)", _fits({"question_type": STR})),
    "models": MAPPING,
    "trace": OPT_STR,
    "error": OPT_STR,
}

# An errors.jsonl line: a task that errored and was not scored.
ERROR: Shape = {
    "key": STR.needed(),
    "task_id": STR.needed(),
    "run": COUNT,
    "kind": STR,
    "trace": OPT_STR,
    "at": TIME,
}

# A trace line: an `Event` as the viewer reads it.
EVENT: Shape = {
    "type": STR.needed(),
    "run_id": OPT_STR,
    "ts": OPT_TIME,
    "node_id": OPT_STR,
    "iteration": OPT_INT,
    "attempt": OPT_INT,
    "data": MAPPING,
}


def _kind(x: Any) -> str:
    """A JSON value's kind, in JSON's words (never the value: it may be anything)."""
    if isinstance(x, bool):
        return "true/false"
    if x is None:
        return "null"
    names = {dict: "an object", list: "a list", str: "a string", int: "a number"}
    return names.get(type(x), "a number")


def shape_problem(obj: Any, shape: Shape) -> str | None:
    """Why `obj` is not a record of `shape`, or None when it is."""
    if not isinstance(obj, dict):
        return f"not a JSON object ({_kind(obj)})"
    for name, want in shape.items():
        if name not in obj:
            if want.required:
                return f"has no `{name}`"
            continue
        if not want.check(obj[name]):
            return f"`{name}` is not {want.what} ({_kind(obj[name])})"
    return None


# -- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LineProblem:
    """A line that was skipped, and why; line 0 is the file as a whole."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason}"


@dataclass
class JsonlRead:
    """What a lenient read of one JSONL file found. `lines[i]` is the line number of
    `records[i]`, and `costs[i]` a cheap measure of its size (its number of commas, plus
    one): enough to bound how much of a file a page shows without walking every record."""

    path: str
    records: list[dict[str, Any]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)
    problems: list[LineProblem] = field(default_factory=list)
    # The file's last line has no newline (a run killed mid-write, or still writing).
    unterminated: bool = False
    # Where an unterminated last line that is no good record starts: what a repair cuts off.
    torn_at: int | None = None

    def skip(self, line: int, reason: str) -> None:
        self.problems.append(LineProblem(self.path, line, f"{reason}; skipped"))


def _open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for reading, if it is a regular file: a FIFO or a device named
    results.jsonl in someone's directory must not hang or flood the reader."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _skip_rest(f: BinaryIO, chunk: int) -> tuple[int, bool]:
    """Read past the rest of an over-long line: the bytes passed, and whether it ended in a
    newline."""
    n = 0
    while part := f.readline(chunk):
        n += len(part)
        if part.endswith(b"\n"):
            return n, True
    return n, False


def _too_deep(obj: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests deeper than `limit`, found without recursion."""
    stack = [(obj, 1)] if isinstance(obj, dict | list) else []
    while stack:
        x, d = stack.pop()
        if d > limit:
            return True
        children = x.values() if isinstance(x, dict) else x
        stack.extend((v, d + 1) for v in children if isinstance(v, dict | list))
    return False


def parse_line(raw: bytes, max_depth: int = MAX_DEPTH) -> tuple[Any, str | None]:
    """One line's JSON value, or why it has none. Decoded strictly: a JSON line is UTF-8,
    and a guessed decoding could change what a record says."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        at = f"line {e.lineno} column {e.colno}" if e.lineno > 1 else f"column {e.colno}"
        return None, f"not JSON ({e.msg}, {at})"
    except ValueError:  # an integer longer than Python will convert
        return None, "not JSON that can be read (a number too long)"
    except RecursionError:
        return None, f"nested deeper than {max_depth} levels"
    if raw.count(b"[") + raw.count(b"{") > max_depth and _too_deep(obj, max_depth):
        return None, f"nested deeper than {max_depth} levels"
    return obj, None


def read_jsonl(
    path: str | os.PathLike[str],
    shape: Shape,
    *,
    clip: int | None = None,
    max_line: int = MAX_LINE_BYTES,
    max_depth: int = MAX_DEPTH,
) -> JsonlRead:
    """The records of `shape` in a JSONL file, and a `LineProblem` per line that is not one.

    Blank lines are no records and no problems. With `clip`, a record is clipped as
    `clip_deep` clips, but only when its line could hold something to clip (longer than
    `clip`, or with more commas than a container keeps): walking every record is most of a
    big report's load time."""
    got = JsonlRead(path=str(path))
    try:
        f = _open_regular(path)
    except OSError as e:
        got.problems.append(LineProblem(got.path, 0, f"cannot be read ({e.strerror or e})"))
        return got
    with f:
        n = offset = 0
        while line := f.readline(max_line + 1):
            n, start = n + 1, offset
            offset += len(line)
            ended = line.endswith(b"\n")
            obj: Any = None
            why: str | None = None
            if len(line) > max_line and not ended:
                passed, ended = _skip_rest(f, max_line)
                offset += passed
                why = f"longer than {max_line:,} bytes"
            last = got.unterminated = not ended
            if why is None:
                if not line.strip():
                    continue
                obj, why = parse_line(line, max_depth)
                why = why or shape_problem(obj, shape)
            if why is not None:
                if last:
                    got.torn_at = start
                    why += " (the last line, with no newline: cut off by a kill?)"
                got.skip(n, why)
                continue
            commas = line.count(b",")
            if clip is not None and (len(line) > clip or commas >= MAX_ITEMS):
                obj = clip_deep(obj, clip)
            got.records.append(obj)
            got.lines.append(n)
            got.costs.append(min(commas, MAX_NODES) + 1)
    return got


def read_events(
    path: str | os.PathLike[str], *, clip: int | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Events of a JSONL trace as dicts, and a `file:line: reason` per line that is none."""
    got = read_jsonl(path, EVENT, clip=clip)
    return got.records, [str(p) for p in got.problems]


def as_event(record: dict[str, Any]) -> tuple[AnyEvent, str | None]:
    """A record of the `EVENT` shape as its typed event, or as a generic `Event` and why not.

    The reason is None for a type this version does not know (another tool's, a component's
    own): such an event is generic by design. For a known type whose payload does not validate
    it names the first field at fault by the type's own key (never a key from the line)."""
    typ = record["type"]
    why = None
    if typ in EVENT_TYPES:
        try:
            return parse_event(record), None
        except ValidationError as e:
            why = _why_not(typ, e)
    generic = Event(
        type=typ,
        run_id=record.get("run_id") or "",
        ts=record.get("ts"),
        node_id=record.get("node_id"),
        iteration=record.get("iteration"),
        attempt=record.get("attempt"),
        data=record.get("data") or {},
    )
    return generic, why


def _why_not(typ: str, e: ValidationError) -> str:
    err = e.errors(include_url=False, include_context=False, include_input=False)[0]
    names = {**{k: k for k in ENVELOPE}, **dict(EVENT_TYPES[typ].DATA_KEYS)}
    loc = [x for x in err["loc"] if x != typ]
    if err["type"] == "extra_forbidden":
        where = "a field it does not have"
    elif loc and isinstance(loc[0], str) and loc[0] in names:
        where = f"`{names[loc[0]]}`"
    else:
        where = "its data"
    msg = err["msg"].removeprefix("Value error, ")
    return f"a `{typ}` event that does not validate ({where}: {msg}); read as generic"


def read_typed_events(
    path: str | os.PathLike[str], *, clip: int | None = None
) -> tuple[list[AnyEvent], list[str]]:
    """The events of a JSONL trace, typed where their payload validates (`as_event`), and a
    `file:line: reason` per line that is no event at all (skipped, as `read_events` says)."""
    got = read_jsonl(path, EVENT, clip=clip)
    return [as_event(r)[0] for r in got.records], [str(p) for p in got.problems]


def read_results(path: str | os.PathLike[str], *, clip: int | None = None) -> JsonlRead:
    """The records of a results.jsonl, each bad line a problem (see `read_jsonl`)."""
    return read_jsonl(path, RESULT, clip=clip)


def read_errors(path: str | os.PathLike[str]) -> JsonlRead:
    """The lines of an errors.jsonl, each bad line a problem (see `read_jsonl`)."""
    return read_jsonl(path, ERROR)


def read_json_object(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_LINE_BYTES
) -> tuple[dict[str, Any] | None, str | None]:
    """A JSON file that must hold one object (config.json), or why it does not, as
    `file: reason`."""
    try:
        with _open_regular(path) as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        return None, f"{path}: cannot be read ({e.strerror or e})"
    if len(raw) > max_bytes:
        return None, f"{path}: longer than {max_bytes:,} bytes; not read"
    obj, why = parse_line(raw)
    if why is None and not isinstance(obj, dict):
        why = f"not a JSON object ({_kind(obj)})"
    return (obj, None) if why is None else (None, f"{path}: {why}; not read")


# -- clipping ------------------------------------------------------------------------------------


def clip_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a note saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [{len(text) - limit:,} more characters not shown]"


def clip_deep(
    obj: Any, limit: int, *, max_items: int = MAX_ITEMS, max_nodes: int = MAX_NODES
) -> Any:
    """A copy of a JSON value whose strings (keys too) are clipped, and whose lists and
    mappings keep at most `max_items` items and `max_nodes` nodes in all, each cut noted:
    no field can blow up the page however much a model wrote into it, in long strings or
    in many short ones."""
    left = [max_nodes]

    def keep(n: int) -> int:
        return max(0, min(n, max_items, left[0]))

    def walk(x: Any) -> Any:
        left[0] -= 1
        if isinstance(x, str):
            return clip_text(x, limit)
        if isinstance(x, dict):
            items = list(x.items())[: keep(len(x))]
            out = {clip_text(str(k), limit): walk(v) for k, v in items}
            if len(items) < len(x):
                out["…"] = f"[{len(x) - len(items):,} more entries not shown]"
            return out
        if isinstance(x, list | tuple):
            kept = [walk(v) for v in x[: keep(len(x))]]
            if len(kept) < len(x):
                kept.append(f"… [{len(x) - len(kept):,} more items not shown]")
            return kept
        return x

    return walk(obj)


def trace_path(root: Path, rel: Any) -> Path | None:
    """The trace a results record names, only when it lies inside the run directory: a
    results file must not make the viewer read (and publish) files from elsewhere."""
    if not isinstance(rel, str) or not rel:
        return None
    base = root.resolve()
    try:
        p = (base / rel).resolve()
    except (OSError, ValueError):  # a NUL byte, a symlink loop
        return None
    return p if p.is_relative_to(base) else None
