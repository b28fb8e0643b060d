"""A draw's compact results file: one JSON line per task, run and method, a few hundred bytes
each, kept where run directories (traces and all) are not.

A line holds `benchmark`, `task`, `method`, `status`, `correct` (the benchmark's scorer),
`verified` (a check accepted the answer; never so for a method without checks), `calls`,
`planner_calls`, `tokens`, `seconds`, `plans`, `nodes_first_plan`, `predicted` and `gold` (cut
to `CUT` characters); `run` when it is not 0, and where the run recorded them, `type` (the
question type), `official` (MultiHop-RAG's own scorer), `confidence` (a vote share),
`completion_tokens`, `model_seconds` (inside model calls, from the trace: with completion
tokens, the speed the task was timed at), `fallbacks` (from the trace when it is there) and
`batch`. `write_lines` makes them from run directories; `read_records` gives
them back as result records `verimap.evals.stats` and `verimap.evals.report` take, so a report
or a comparison of a compact file gives the numbers of the directories it was made from.

A path `FILE#METHOD` stands for the lines of one method in FILE (`select`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from verimap.base.events import MODEL_CALL, PLAN_FALLBACK
from verimap.evals.question_types import official_correct, question_type
from verimap.evals.run_dir import CONFIG, RESULTS, RunDirError, read_config, run_dirs
from verimap.evals.stats import is_verified, total_calls
from verimap.observe.trace_files import (
    BOOL,
    COUNT,
    EVENT,
    NUM,
    OPT_STR,
    STR,
    Shape,
    Want,
    read_jsonl,
    read_results,
    trace_path,
)

Record = dict[str, Any]

CUT = 80
SUFFIX = ".jsonl"
SELECT = "#"


class CompactError(RunDirError):
    """A compact results file cannot be read or written as asked."""


LINE: Shape = {
    "task": STR.needed(),
    "method": STR.needed(),
    "correct": BOOL.needed(),
    "verified": BOOL.needed(),
    "benchmark": STR,
    "run": COUNT,
    "type": OPT_STR,
    "status": STR,
    "official": Want((bool, type(None)), "true, false or null"),
    "calls": COUNT,
    "planner_calls": COUNT,
    "tokens": COUNT,
    "seconds": NUM,
    "plans": COUNT,
    "nodes_first_plan": COUNT,
    "fallbacks": COUNT,
    "confidence": NUM,
    "completion_tokens": COUNT,
    "model_seconds": NUM,
    "batch": COUNT,
    "predicted": OPT_STR,
    "gold": OPT_STR,
}


def _cut(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= CUT else text[: CUT - 1] + "…"


def model_seconds(events: Iterable[Record]) -> float | None:
    """Seconds a trace's model calls took (None when it times none)."""
    took = [
        float(e["data"]["duration_s"])
        for e in events
        if e.get("type") == MODEL_CALL and (e.get("data") or {}).get("duration_s") is not None
    ]
    return sum(took) if took else None


def _from_trace(run_dir: Path, record: Record) -> tuple[int | None, float | None]:
    """The fallbacks and model seconds a record's trace holds; Nones without a readable one."""
    path = trace_path(run_dir, record.get("trace"))
    if path is None or not path.is_file():
        return None, None
    events = read_jsonl(path, EVENT).records
    return sum(e.get("type") == PLAN_FALLBACK for e in events), model_seconds(events)


def compact_line(
    record: Record,
    method: str | None = None,
    *,
    fallbacks: int | None = None,
    model_s: float | None = None,
) -> Record:
    """A results.jsonl record as a compact line; `method` names the method instead of the
    record's own name (a variant of it run beside the plain one, say); `fallbacks` and
    `model_s`, when given, are the trace's."""
    plans = record.get("plans")
    plans = plans if isinstance(plans, list) else []
    first = plans[0] if plans and isinstance(plans[0], dict) else {}
    line: Record = {
        "benchmark": record["benchmark"],
        "task": record["task_id"],
        "method": method or record["method"],
        "run": int(record.get("run", 0)),
        "type": question_type(record),
        "status": record.get("status", ""),
        "correct": bool(record.get("correct")),
        "official": official_correct(record),
        "verified": is_verified(record),
        "calls": total_calls(record),
        "planner_calls": int(((record.get("usage") or {}).get("planner") or {}).get("calls", 0)),
        "tokens": int(record.get("tokens", 0)),
        "seconds": round(float(record.get("wall_time_s", 0.0)), 3),
        "plans": len(plans),
        "nodes_first_plan": len(first.get("nodes") or []),
        "fallbacks": record.get("fallbacks") if fallbacks is None else fallbacks,
        "confidence": (record.get("meta") or {}).get("confidence"),
        "completion_tokens": sum(
            int(u.get("completion_tokens", 0)) for u in (record.get("usage") or {}).values()
        ),
        "model_seconds": None if model_s is None else round(model_s, 3),
        "predicted": _cut(record.get("predicted")),
        "gold": _cut(record.get("gold")),
    }
    optional = ("run", "type", "official", "fallbacks", "confidence", "model_seconds")
    return {k: v for k, v in line.items() if not (k in optional and v in (None, 0))}


def write_lines(lines: Iterable[Record], out: str | os.PathLike[str], *, append: bool) -> int:
    """Write `lines` to `out` (after what it holds, with `append`); how many were written.
    A task a method already has in the file is refused (a `CompactError`), as pooled run
    directories refuse one."""
    path = Path(out)
    lines = list(lines)
    have = {_ident(r) for r in read_lines(path)} if append and path.exists() else set()
    seen: set[tuple[str, str, int]] = set()
    for line in lines:
        ident = _ident(line)
        if ident in have or ident in seen:
            raise CompactError(
                f"{path}: task {ident[1]} (run {ident[2]}) of method {ident[0]!r} would be in it "
                "twice; name one of them otherwise (--variant)"
            )
        seen.add(ident)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    return len(lines)


def _ident(line: Record) -> tuple[str, str, int]:
    return str(line["method"]), str(line["task"]), int(line.get("run", 0))


def is_compact(path: str | os.PathLike[str]) -> bool:
    """Whether `path` names a compact file (or `FILE#METHOD`) rather than a run directory."""
    file, _ = select(path)
    return file.is_file()


def select(path: str | os.PathLike[str]) -> tuple[Path, str | None]:
    """The file and the method a path names: `FILE#METHOD` is one method's lines of FILE; a
    path that exists as written is the whole of it."""
    text = os.fspath(path)
    if Path(text).exists() or SELECT not in text:
        return Path(text), None
    file, method = text.rsplit(SELECT, 1)
    return Path(file), method


def read_lines(path: str | os.PathLike[str], problems: list[str] | None = None) -> list[Record]:
    """The compact lines of a file; a line that is none is left out and noted in `problems`."""
    got = read_jsonl(path, LINE)
    if problems is not None:
        problems.extend(str(p) for p in got.problems)
    return list(got.records)


def to_record(line: Record) -> Record:
    """A compact line as a result record: key, task_id, run, benchmark, method, correct,
    verified, status, tokens and wall_time_s as in results.jsonl; `calls` summed over roles;
    the question type and confidence in `meta`; `official` as it was scored."""
    run = int(line.get("run", 0))
    task = str(line["task"])
    meta = {
        k: line[m]
        for k, m in (("question_type", "type"), ("confidence", "confidence"))
        if line.get(m) is not None
    }
    return {
        "key": f"r{run}/{task}",
        "run": run,
        "task_id": task,
        "benchmark": line.get("benchmark") or task.split("/")[0],
        "method": line["method"],
        "status": line.get("status", ""),
        "correct": line["correct"],
        "verified": line["verified"],
        "official": line.get("official"),
        "calls": int(line.get("calls", 0)),
        "planner_calls": int(line.get("planner_calls", 0)),
        "tokens": int(line.get("tokens", 0)),
        "wall_time_s": float(line.get("seconds", 0.0)),
        "fallbacks": int(line.get("fallbacks", 0)),
        "completion_tokens": line.get("completion_tokens"),
        "model_seconds": line.get("model_seconds"),
        "predicted": line.get("predicted") or "",
        "gold": line.get("gold") or "",
        "meta": meta,
        "compact": True,
    }


def read_records(path: str | os.PathLike[str], problems: list[str] | None = None) -> list[Record]:
    """The result records of a compact file, or of one method of it (`FILE#METHOD`); the
    first line of a method's task and run wins, as in results.jsonl."""
    file, method = select(path)
    if not file.is_file():
        raise CompactError(f"{file}: no such compact results file")
    skipped: list[str] = []
    lines = read_lines(file, skipped)
    if skipped and not lines:
        raise CompactError(f"{file}: not a compact results file ({skipped[0]})")
    if problems is not None:
        problems.extend(skipped)
    if method is not None:
        lines = [r for r in lines if r["method"] == method]
        if not lines:
            known = ", ".join(sorted({str(r["method"]) for r in read_lines(file)}))
            raise CompactError(f"{file}: no lines of method {method!r} (it holds: {known})")
    out: dict[tuple[str, str], Record] = {}
    for line in lines:
        rec = to_record(line)
        out.setdefault((str(rec["method"]), rec["key"]), rec)
    return list(out.values())


def recorded_variant(run_dir: Path) -> str | None:
    """The variant a run directory's config.json records (`variant`: the name a benchmark
    gives a method run with other settings, e.g. `verimap-planned` or `sc-planned`), or None
    when it records none (or cannot be read)."""
    if not (run_dir / CONFIG).is_file():
        return None
    cfg, _ = read_config(run_dir / CONFIG)
    variant = (cfg or {}).get("variant")
    if not isinstance(variant, str) or not variant.strip():
        return None
    return variant.strip()


def lines_from_dirs(
    dirs: Sequence[str | os.PathLike[str]],
    variant: str | None = None,
    problems: list[str] | None = None,
) -> list[Record]:
    """The compact lines of every finished task in `dirs` (run directories, or directories
    holding them). Each method is named `METHOD VARIANT` when a variant is given, else the
    variant its directory records (`recorded_variant`), else as its records name it."""
    lines = []
    for d in run_dirs(dirs):
        got = read_results(d / RESULTS)
        if problems is not None:
            problems.extend(str(p) for p in got.problems)
        recorded = None if variant else recorded_variant(d)
        seen: set[str] = set()
        for rec in got.records:
            if rec["key"] in seen:
                continue
            seen.add(rec["key"])
            name = f"{rec['method']} {variant}" if variant else recorded
            fallbacks, model_s = _from_trace(d, rec)
            lines.append(compact_line(rec, name, fallbacks=fallbacks, model_s=model_s))
    return lines
