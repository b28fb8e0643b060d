"""Where benchmark data lives, and loaders for the official file formats.

The data directory is resolved in this order: an explicit `--data-dir`, the
`VERIMAP_DATA` environment variable, `../shared/datasets` beside the checkout when it
exists, the full copies committed in `datasets/full` (GSM8K, HumanEval, MultiHopRAG,
MBPP), and last the small samples committed in `datasets/` (the MultiHopRAG fixture among
them, which only a test naming `datasets/` reads). The current directory is never
searched: a cloned repository there does not choose the data whose tests the sandbox runs.
Every reader of benchmark data resolves through here.
An explicit directory is taken at its word: a missing file there is an error
naming the file and where to put it, never a silent fall back to samples.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verimap.base.env import getenv
from verimap.base.errors import VerimapError

ENV_VAR = "VERIMAP_DATA"
BENCHMARKS = ("gsm8k", "humaneval", "multihoprag", "mbpp")

# What each loader reads, relative to the data directory (also in datasets/MANIFEST.md).
MANIFEST: dict[str, tuple[str, ...]] = {
    "gsm8k": ("gsm8k/test.jsonl",),
    "humaneval": ("humaneval/HumanEval.jsonl.gz",),
    "multihoprag": ("multihoprag/MultiHopRAG.json", "multihoprag/corpus.json"),
    "mbpp": ("mbpp/sanitized-mbpp.json", "mbpp/mbpp.jsonl"),
}
# MBPP's two task sets: the file each is read from.
MBPP_FILES = {"sanitized": "mbpp/sanitized-mbpp.json", "full": "mbpp/mbpp.jsonl"}


class DataError(VerimapError, RuntimeError):
    """Data is missing or malformed; the message says which file and what to do."""


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def samples_dir() -> Path | None:
    """The committed samples (`datasets/` in the checkout verimap runs from)."""
    d = _repo_root() / "datasets"
    return d if (d / "MANIFEST.md").is_file() else None


def full_dir() -> Path | None:
    """The committed byte-identical copies of whole data sets (`datasets/full`)."""
    s = samples_dir()
    return s / "full" if s is not None and (s / "full").is_dir() else None


def _shared_dirs() -> list[Path]:
    d = (_repo_root() / ".." / "shared" / "datasets").resolve()
    return [d] if d.is_dir() else []


@dataclass
class DataSource:
    """The resolved directory for one benchmark, and how it was chosen."""

    benchmark: str
    root: Path
    origin: str  # flag | env | shared | full | samples
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def is_sample(self) -> bool:
        """True for the committed samples, however they were chosen."""
        s = samples_dir()
        return self.origin == "samples" or (s is not None and self.root == s.resolve())


def _lfs_pointer(path: Path) -> Path | None:
    p = path.with_name(path.name + ".LFS_POINTER.txt")
    return p if p.exists() else None


def _missing_message(benchmark: str, root: Path, origin: str, missing: list[str]) -> str:
    how = {"flag": "--data-dir", "env": f"${ENV_VAR}"}.get(origin, "the data directory")
    lines = [f"{benchmark}: data not found in {root} (chosen by {how}):"]
    for rel in missing:
        path = root / rel
        lfs = _lfs_pointer(path)
        note = f" (only a Git LFS pointer is there: {lfs.name}; fetch the real file)" if lfs else ""
        lines.append(f"  missing {path}{note}")
    lines.append(
        f"Put the official file(s) at DATA_DIR/{' and DATA_DIR/'.join(MANIFEST[benchmark])}, "
        f"then pass --data-dir DATA_DIR or set {ENV_VAR}=DATA_DIR."
    )
    return "\n".join(lines)


def resolve(benchmark: str, data_dir: str | os.PathLike[str] | None = None) -> DataSource:
    """Pick the directory holding `benchmark`'s files (see the module docstring for the order)."""
    if benchmark not in MANIFEST:
        raise DataError(f"unknown benchmark {benchmark!r}; choose one of {', '.join(BENCHMARKS)}")
    rels = MANIFEST[benchmark]
    explicit: tuple[Path, str] | None = None
    if data_dir is not None:
        explicit = (Path(data_dir).expanduser().resolve(), "flag")
    elif (env := getenv(ENV_VAR)) is not None:
        explicit = (Path(env).expanduser().resolve(), "env")
    if explicit is not None:
        root, origin = explicit
        missing = [r for r in rels if not (root / r).is_file()]
        if missing:
            raise DataError(_missing_message(benchmark, root, origin, missing))
        return DataSource(benchmark, root, origin, {r: root / r for r in rels})
    candidates = [(d, "shared") for d in _shared_dirs()]
    if (full := full_dir()) is not None:
        candidates.append((full, "full"))
    if (s := samples_dir()) is not None:
        candidates.append((s, "samples"))
    for root, origin in candidates:
        if all((root / r).is_file() for r in rels):
            return DataSource(benchmark, root, origin, {r: root / r for r in rels})
    root = candidates[0][0] if candidates else _repo_root() / "datasets"
    raise DataError(
        _missing_message(benchmark, root, "default", [r for r in rels if not (root / r).is_file()])
    )


# ---- records -------------------------------------------------------------------------------


class GSM8KItem(BaseModel):
    model_config = ConfigDict(extra="ignore")
    question: str
    answer: str

    @property
    def gold(self) -> str:
        """The number after `####`, with thousands separators removed."""
        return self.answer.rsplit("####", 1)[-1].strip().replace(",", "")


class HumanEvalItem(BaseModel):
    model_config = ConfigDict(extra="ignore")
    task_id: str
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str


class Evidence(BaseModel):
    model_config = ConfigDict(extra="ignore")
    title: str = ""
    author: str | None = ""
    url: str = ""
    source: str = ""
    category: str = ""
    published_at: str = ""
    fact: str


class MultiHopQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")
    query: str
    answer: str
    question_type: str
    evidence_list: list[Evidence]


class Article(BaseModel):
    model_config = ConfigDict(extra="ignore")
    title: str
    author: str | None = ""
    source: str = ""
    published_at: str = ""
    category: str = ""
    url: str = ""
    body: str


class MBPPItem(BaseModel):
    """One MBPP task as the sanitized set writes it (the full set's records become one, with its
    `text` as the prompt and no test imports)."""

    model_config = ConfigDict(extra="ignore")
    task_id: int = Field(strict=True)
    prompt: str
    code: str
    test_imports: list[str]
    test_list: list[str] = Field(min_length=1)
    test_setup_code: str = ""


class _FullMBPPRow(BaseModel):
    model_config = ConfigDict(extra="ignore")
    task_id: int = Field(strict=True)
    text: str
    code: str
    test_setup_code: str
    test_list: list[str] = Field(min_length=1)
    challenge_test_list: list[str]

    def item(self) -> MBPPItem:
        return MBPPItem(
            task_id=self.task_id,
            prompt=self.text,
            code=self.code,
            test_imports=[],
            test_list=self.test_list,
            test_setup_code=self.test_setup_code,
        )


def _bad(path: Path, where: str, err: Exception) -> DataError:
    return DataError(f"{path}: {where}: {err}")


def decode_text(raw: bytes, path: Path, line: int | None = None) -> str:
    """`raw` as UTF-8 text (a leading byte-order mark dropped): line `line` of `path`, or the
    whole file when `line` is None. Bytes that are not UTF-8 are a DataError naming the file and
    the line."""
    try:
        return raw.decode("utf-8-sig" if line in (None, 1) else "utf-8")
    except UnicodeDecodeError as e:
        at = line if line is not None else raw.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"{path}: line {at}: not UTF-8 text (byte {raw[e.start]:#04x}); save it as UTF-8"
        ) from None


# Outside strings: the brackets that nest, and the integers json turns into ints.
_JSON_PARTS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[{]|[\]}]|(?<![\d.eE+-])-?\d+(?![\d.eE])')


def _nesting(text: str) -> tuple[int, int]:
    """How deep `text`'s brackets nest at most, and where they first do."""
    depth = deepest = at = 0
    for m in _JSON_PARTS.finditer(text):
        c = m.group()[0]
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, m.start()
        elif c in "]}":
            depth -= 1
    return deepest, at


def _long_integer(text: str, digits: int) -> int:
    """Where the first integer of more than `digits` digits starts (0 when there is none)."""
    for m in _JSON_PARTS.finditer(text):
        if m.group()[0] in "-0123456789" and len(m.group().lstrip("-")) > digits:
            return m.start()
    return 0


def parse_json(text: str, path: Path, line: int | None = None) -> Any:
    """`text` as JSON: line `line` of `path`, or the whole file when `line` is None. Whatever
    json cannot read is a DataError naming the file and the line: bad syntax or a truncated
    file, nesting deeper than Python's recursion limit, an integer longer than Python converts
    (`sys.get_int_max_str_digits`)."""

    def line_of(pos: int) -> int:
        return line if line is not None else text.count("\n", 0, pos) + 1

    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        where = (
            f"line {line} column {e.colno}"
            if line is not None
            else f"line {e.lineno} column {e.colno}"
        )
        raise DataError(f"{path}: {where}: not valid JSON: {e.msg}") from None
    except RecursionError:
        deepest, at = _nesting(text)
        raise DataError(
            f"{path}: line {line_of(at)}: nested {deepest} levels deep, too deep to read"
        ) from None
    except ValueError:
        limit = sys.get_int_max_str_digits()
        at = _long_integer(text, limit)
        raise DataError(
            f"{path}: line {line_of(at)}: an integer of over {limit} digits, too long to read; "
            "write it as a string"
        ) from None


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each non-blank line of a JSONL file, gzipped or not; a bad
    line or an unreadable file is a DataError naming the file and the line (see `parse_json`)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if raw.strip():
                    yield lineno, parse_json(decode_text(raw, path, lineno), path, lineno)
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{path}: cannot read: {e}") from None


def read_json(path: Path) -> Any:
    """The JSON value a whole file holds; an unreadable file, a Git LFS pointer, or text that is
    not UTF-8 or not JSON is a DataError naming the file and the line (see `parse_json`)."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e}") from None
    if raw.startswith(b"version https://git-lfs"):
        raise DataError(f"{path} is a Git LFS pointer, not the data; fetch the real file")
    return parse_json(decode_text(raw, path), path)


def _validate(model: type[BaseModel], obj: Any, path: Path, where: str) -> Any:
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        field = f"field {loc!r}: " if loc else ""
        raise DataError(f"{path}: {where}: {field}{first['msg']}") from None


def load_gsm8k(src: DataSource) -> list[GSM8KItem]:
    path = src.files["gsm8k/test.jsonl"]
    items = [_validate(GSM8KItem, o, path, f"line {n}") for n, o in read_jsonl(path)]
    for i, it in enumerate(items, 1):
        if "####" not in it.answer:
            raise DataError(f"{path}: record {i}: answer has no '#### N' marker")
    return items


def load_humaneval(src: DataSource) -> list[HumanEvalItem]:
    path = src.files["humaneval/HumanEval.jsonl.gz"]
    items = []
    for n, o in read_jsonl(path):
        item = _validate(HumanEvalItem, o, path, f"line {n}")
        checked_id(item.task_id, path, f"line {n}")
        items.append(item)
    return items


def _load_json_list(path: Path) -> list[Any]:
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list, got {type(data).__name__}")
    if not data:
        raise DataError(f"{path}: the list holds no records")
    return data


def load_multihoprag(src: DataSource) -> tuple[list[MultiHopQuery], list[Article]]:
    qpath = src.files["multihoprag/MultiHopRAG.json"]
    cpath = src.files["multihoprag/corpus.json"]
    queries = [
        _validate(MultiHopQuery, o, qpath, f"item {i}")
        for i, o in enumerate(_load_json_list(qpath))
    ]
    corpus = [
        _validate(Article, o, cpath, f"item {i}") for i, o in enumerate(_load_json_list(cpath))
    ]
    return queries, corpus


def checked_id(value: str, path: str | os.PathLike[str], where: str) -> str:
    """`value` as a task id read from `path` at `where` (`line 3`): a DataError if it holds a
    character that is not printable (a control character such as ESC or a newline, a bidi
    override), which would reach terminals, reports and file names."""
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise DataError(
            f"{path}: {where}: the id {value!r} holds the unprintable character {bad!r}"
        )
    return value


def load_mbpp(src: DataSource, task_set: str = "sanitized") -> list[MBPPItem]:
    """The tasks of MBPP's `task_set` (sanitized: `sanitized-mbpp.json`; full: `mbpp.jsonl`),
    in file order; a record off the official schema, or a task id given twice, is a DataError
    naming the file and the record (the line, in the JSONL file)."""
    if task_set not in MBPP_FILES:
        raise DataError(
            f"unknown MBPP task set {task_set!r}; choose one of {', '.join(MBPP_FILES)}"
        )
    path = src.files[MBPP_FILES[task_set]]
    items: list[tuple[str, MBPPItem]] = []
    if task_set == "full":
        for n, obj in read_jsonl(path):
            items.append((f"line {n}", _validate(_FullMBPPRow, obj, path, f"line {n}").item()))
    else:
        for i, obj in enumerate(_load_json_list(path)):
            items.append((f"item {i}", _validate(MBPPItem, obj, path, f"item {i}")))
    seen: dict[int, str] = {}
    for where, it in items:
        if it.task_id in seen:
            raise DataError(
                f"{path}: {where}: task_id {it.task_id} again (first at {seen[it.task_id]})"
            )
        seen[it.task_id] = where
    return [it for _, it in items]


def humaneval_id(task_id: str) -> str:
    """A file-name-safe form of an id (`HumanEval/3` -> `HumanEval_3`)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", task_id)
