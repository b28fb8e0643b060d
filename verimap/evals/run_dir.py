"""An eval's run directory: what marks it as verimap's, its results and errors logs, the lock
that keeps two runs apart, and the checks that come before anything in it is written.

A directory is written only once it is known to be this run's: new or empty, or a verimap eval
directory (`config.json` with the `verimap_eval` marker, or the fields every older verimap
wrote) of the same benchmark, method and sample. Anything else is refused before a byte of it
changes. A returned trace is written only inside the directory, confined as the viewer reads.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from verimap.base.check_names import MIXED
from verimap.base.errors import VerimapError
from verimap.base.redaction import for_console, redact
from verimap.config import PARTS, nest, part_of
from verimap.evals.attempt import Attempt
from verimap.observe.trace_files import read_errors, read_json_object, read_results, trace_path

RESULTS = "results.jsonl"
ERRORS = "errors.jsonl"
CONFIG = "config.json"
LOCK = ".lock"
# The config.json key that marks a verimap eval directory; its value is the layout version.
MARK = "verimap_eval"
LAYOUT = 1
# What config.json had before the marker: older directories stay usable.
_OLD_FIELDS = ("benchmark", "method", "run_config")
# The settings a resume must share with the run it continues (a custom benchmark's file and
# field map are its `benchmark_source`; a range or ids chosen, its `selection`).
_SAME = ("benchmark", "benchmark_source", "method", "sample", "seed", "selection")
# Run settings a resume may change: how many nodes run at once changes no answer.
_FREE_SETTINGS = frozenset({"loop.max_parallel"})
# Settings added since older directories were written, at the value those runs had.
_SETTINGS_BEFORE: dict[str, Any] = {"verify": {"ballot": MIXED}}
# Settings that steer only a run that verifies: a method that never does (react, bare) may
# have written any value.
_VERIFYING_SETTINGS = frozenset({"verify.ballot"})


class RunDirError(VerimapError, RuntimeError):
    """The output directory cannot be used as asked (busy, or holds another run)."""


def _short(e: ValueError) -> str:
    """A decode error's reason without the bytes it quotes (they may be anything)."""
    if isinstance(e, UnicodeDecodeError):
        return f"invalid UTF-8 at byte {e.start}"
    return getattr(e, "msg", None) or str(e)


def unscored_errors(
    out: str | os.PathLike[str], problems: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The last error line of every task in `out` that errored and is not in the results yet:
    what a resume would retry. Both files are read leniently (reports and exports read
    directories from others): a line that is no error line is left out, and noted in
    `problems` as file:line when given; a bad results line is the results reader's to note."""
    path = Path(out) / ERRORS
    if not path.exists():
        return {}
    done = {r["key"] for r in read_results(Path(out) / RESULTS).records}
    errors = read_errors(path)
    if problems is not None:
        problems.extend(str(p) for p in errors.problems)
    return {e["key"]: e for e in errors.records if e["key"] not in done}


class ResultsLog:
    """Append-only JSONL with one fsync per record.

    Every line is a record: a JSON object with a string `key`. Only the last line may be
    torn (a kill mid-write leaves it unterminated and unparsable); a last line that parses
    is complete whether or not its newline made it to disk."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        # Set by `load`: the line number of a torn last line it dropped, if any.
        self.torn_line: int | None = None

    def load(self, *, repair: bool = False) -> dict[str, dict[str, Any]]:
        """Finished records by key (the first of a key wins). A line that is no record is an
        error naming file:line, except a torn last line, which is dropped (see `torn_line`).
        With `repair` the file is made appendable: the torn line cut off, or the newline a
        complete last record lacks added. Without it the file is only read."""
        if not self.path.exists():
            return {}
        raw = self.path.read_bytes()
        records, torn_at = self._parse(raw)
        if repair:
            if torn_at is not None:
                self._rewrite_tail(torn_at, b"")
            elif raw and not raw.endswith(b"\n"):
                self._rewrite_tail(len(raw), b"\n")
        return records

    def _parse(self, raw: bytes) -> tuple[dict[str, dict[str, Any]], int | None]:
        """Records by key, and the offset of a torn last line (None: none)."""
        out: dict[str, dict[str, Any]] = {}
        lines = raw.split(b"\n")
        offset = 0
        self.torn_line = None
        for n, line in enumerate(lines, 1):
            start, offset = offset, offset + len(line) + 1
            if not line.strip():
                continue
            unterminated = n == len(lines)
            try:
                rec = json.loads(line.decode("utf-8"))
            except ValueError as e:  # JSONDecodeError, or UnicodeDecodeError for bad UTF-8
                if unterminated:
                    self.torn_line = n
                    return out, start
                raise RunDirError(
                    f"{self.path}:{n}: not valid JSON ({_short(e)}); fix or remove the line"
                ) from None
            except RecursionError:
                raise RunDirError(f"{self.path}:{n}: JSON nested too deeply to read") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("key"), str):
                raise RunDirError(
                    f"{self.path}:{n}: not a verimap result record (a JSON object with a "
                    "string 'key'); is this another tool's file?"
                )
            out.setdefault(rec["key"], rec)
        return out, None

    def _rewrite_tail(self, at: int, tail: bytes) -> None:
        with self.path.open("r+b") as f:
            f.truncate(at)
            f.seek(at)
            f.write(tail)
            f.flush()
            os.fsync(f.fileno())

    def append(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def dir_lock(out: Path) -> Iterator[None]:
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(f"{out} is in use by another eval run") from None
        yield
    finally:
        os.close(fd)


def _put_trace(out: Path, line: dict[str, Any], text: str, fallback: Path) -> None:
    """Write a trace that came back with an attempt where its line says, confined to `out`
    as the viewer confines what it reads. A path that leads elsewhere (absolute, `..`, a
    symlink out) is not followed: the trace goes to `fallback`, where a local run writes
    the task's trace, and the line is corrected to say so."""
    rel = line.get("trace")
    path = trace_path(out, rel)
    if path is None:
        if rel != str(fallback):
            print(
                f"warning: the trace of task {line.get('key')!r} names {rel!r}, outside {out}; "
                f"written to {fallback} instead",
                file=sys.stderr,
                flush=True,
            )
            line["trace"] = str(fallback)
        path = out / fallback
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # a previous, unfinished attempt's
    if text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)


def store(out: Path, log: ResultsLog, att: Attempt, fallback: Path) -> dict[str, Any] | None:
    """Write what an attempt left: the trace it carries, then its error line or its record
    (the record last, since a record is what marks the task done). `fallback` is where the
    task's trace belongs in this run (see `_put_trace`)."""
    line = att.record if att.record is not None else att.error
    if line is None:
        raise ValueError(f"attempt {att.key} holds neither a record nor an error")
    if att.trace is not None:
        _put_trace(out, line, redact(att.trace), fallback)
    if att.record is None:
        ResultsLog(out / ERRORS).append(redact(line))
        print(
            for_console(f"task {att.key} errored, not scored: {line['error']}"),
            file=sys.stderr,
            flush=True,
        )
        return None
    record = redact(att.record)
    log.append(record)
    return record


def is_eval_config(cfg: Any) -> bool:
    """Whether a parsed config.json is one `verimap eval` wrote: it carries the marker, or
    (written before the marker) the fields every verimap eval config has."""
    if not isinstance(cfg, dict):
        return False
    if MARK in cfg:
        return True
    return all(isinstance(cfg.get(k), str) for k in _OLD_FIELDS[:2]) and isinstance(
        cfg.get(_OLD_FIELDS[2]), dict
    )


def _own_config(out: Path) -> dict[str, Any] | None:
    """The config of the verimap eval held in `out`; None when `out` holds nothing yet.
    A directory with anything else in it is refused: it is somebody else's."""
    if not out.exists():
        return None
    if not out.is_dir():
        raise RunDirError(f"{out} is not a directory; choose another --out")
    path = out / CONFIG
    if not path.exists():
        others = sorted(p.name for p in out.iterdir() if p.name != LOCK)
        if not others:
            return None
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise RunDirError(
            f"{out} is not empty ({shown}) and is not a verimap eval directory (it has no "
            f"{CONFIG} written by `verimap eval`); choose a new or empty --out"
        )
    try:
        cfg = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as e:
        reason = _short(e) if isinstance(e, ValueError) else type(e).__name__
        raise RunDirError(
            f"{path} cannot be read ({reason}): not a verimap eval directory, or a damaged one; "
            "choose another --out"
        ) from None
    if not is_eval_config(cfg):
        raise RunDirError(
            f"{path} was not written by `verimap eval` (no {MARK!r}, or benchmark, method and "
            "run_config): not a verimap eval directory; choose another --out"
        )
    if isinstance(cfg.get(MARK), int) and cfg[MARK] > LAYOUT:
        raise RunDirError(
            f"{out} was written by a newer verimap (layout {cfg[MARK]}; this one knows "
            f"{LAYOUT}); upgrade verimap or choose another --out"
        )
    return migrated(cast(dict[str, Any], cfg))


def check_run_dir(out: Path, cfg: dict[str, Any], resume: bool) -> dict[str, dict[str, Any]]:
    """The records finished in `out`, once it is known that a run with `cfg` may write there;
    a `RunDirError` otherwise. Only reads, so a refused directory is left as it was."""
    old = _own_config(out)
    if old is None:
        return {}
    done = ResultsLog(out / RESULTS).load()
    if done and not resume:
        raise RunDirError(
            f"{out} already holds results; pass --resume to continue it, or choose another --out"
        )
    for k in _SAME:
        if old.get(k) != cfg.get(k):
            raise RunDirError(
                f"{out} holds a run of {k} {old.get(k)!r}, not {cfg.get(k)!r}; choose another --out"
            )
    if old.get("sample_digest") != cfg.get("sample_digest"):
        raise RunDirError(
            f"{out} holds a sample of other task ids (another data directory?); "
            "choose another --out"
        )
    if isinstance(new := cfg.get("run_config"), dict) and done:
        changed = changed_settings(old.get("run_config") or {}, new)
        if changed:
            raise RunDirError(
                f"{out} holds results run with other settings ({'; '.join(changed)}): a resume "
                "would mix them in one report. Continue it with the settings it was started "
                "with, or choose another --out"
            )
    return done


def migrated(cfg: dict[str, Any]) -> dict[str, Any]:
    """A directory's config.json as this verimap writes it. Older ones wrote `run_config` with
    every knob at the top (`"max_retries": 3`); it comes back with each knob in its part
    (`"loop": {"max_retries": 3}`). Anything else comes back as it is."""
    run_config = cfg.get("run_config")
    if not isinstance(run_config, dict) or any(k in PARTS for k in run_config):
        return cfg
    if not any(part_of(str(k)) for k in run_config):
        return cfg
    return {**cfg, "run_config": nest(run_config)}


def read_config(path: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, str | None]:
    """A directory's config.json (`migrated`), or why it cannot be read (`read_json_object`)."""
    cfg, why = read_json_object(path)
    return (None if cfg is None else migrated(cfg)), why


def recorded_settings(run_config: dict[str, Any]) -> dict[str, Any]:
    """A directory's run settings (`migrated`), with those added since it was written at the
    value its runs had. Its settings were recorded under the policies it names, so one naming
    none (null) ran under none."""
    settings = dict(run_config)
    for part, knobs in _SETTINGS_BEFORE.items():
        if isinstance(have := settings.get(part, {}), dict):
            settings[part] = {**knobs, **have}
    if "policies" in settings and settings["policies"] is None:
        settings["policies"] = []
    return settings


def _by_name(run_config: dict[str, Any]) -> dict[str, Any]:
    """Run settings by their full names (`loop.max_retries`; `budget` and `policies` whole)."""
    out: dict[str, Any] = {}
    for key, value in run_config.items():
        if key in PARTS and isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def changed_settings(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Each run setting whose value differs between a directory's runs and a resume of them
    (both `migrated`), as "part.name: was -> now". A setting the old directory never wrote is
    compared at the value it had before it was a setting, where that is known, and otherwise
    not at all."""
    old, new = _by_name(recorded_settings(old)), _by_name(new)
    free = set(_FREE_SETTINGS)
    if old.get("verify.verification") == new.get("verify.verification") == "none":
        free |= _VERIFYING_SETTINGS
    return [
        f"{k}: {old[k]!r} -> {new[k]!r}"
        for k in sorted(new.keys() & old.keys() - free)
        if old[k] != new[k]
    ]


def write_config(out: Path, cfg: dict[str, Any]) -> None:
    from verimap.base.version import __version__

    path = out / CONFIG
    tmp = path.with_suffix(".tmp")
    marked = {MARK: LAYOUT, "verimap_version": __version__, **cfg}
    tmp.write_text(json.dumps(redact(marked), indent=2, default=str) + "\n")
    os.replace(tmp, path)


def is_run_dir(p: Path) -> bool:
    """Whether `p` is an eval run directory (it holds results.jsonl or config.json)."""
    return p.is_dir() and ((p / RESULTS).is_file() or (p / CONFIG).is_file())


def run_dirs(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Eval run directories among `paths`; a directory holding run directories stands for all
    of them (`runs/bench-1`, a benchmark script's runs directory), as it does for `verimap
    view`. A path that is neither is a `RunDirError`."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if is_run_dir(p):
            found.append(p)
        elif p.is_dir() and (inner := sorted(d for d in p.iterdir() if is_run_dir(d))):
            found.extend(inner)
        else:
            raise RunDirError(
                f"{p}: not an eval run directory (no {RESULTS} or {CONFIG}), nor a directory of them"
            )
    return list(dict.fromkeys(found))
