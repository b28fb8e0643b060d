"""Where benchmark data lives, and loaders for the official file formats.

The data directory is resolved in this order: an explicit `--data-dir`, the
`VERIMAP_DATA` environment variable, `../shared/datasets` beside the checkout (or
the current directory) when it exists, the full copies committed in `datasets/full`
(GSM8K, HumanEval), and last the small samples committed in `datasets/` (the only
MultiHopRAG a fresh clone has). Every reader of benchmark data resolves through here.
An explicit directory is taken at its word: a missing file there is an error
naming the file and where to put it, never a silent fall back to samples.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from verimap.env import getenv
from verimap.errors import VerimapError

ENV_VAR = "VERIMAP_DATA"
BENCHMARKS = ("gsm8k", "humaneval", "multihoprag")

# What each loader reads, relative to the data directory (also in datasets/MANIFEST.md).
MANIFEST: dict[str, tuple[str, ...]] = {
    "gsm8k": ("gsm8k/test.jsonl",),
    "humaneval": ("humaneval/HumanEval.jsonl.gz",),
    "multihoprag": ("multihoprag/MultiHopRAG.json", "multihoprag/corpus.json"),
}


class DataError(VerimapError, RuntimeError):
    """Data is missing or malformed; the message says which file and what to do."""


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def samples_dir() -> Path | None:
    """The committed samples (`datasets/` in the checkout, or in the current directory)."""
    for base in (_repo_root(), Path.cwd()):
        d = base / "datasets"
        if (d / "MANIFEST.md").is_file():
            return d
    return None


def full_dir() -> Path | None:
    """The committed byte-identical copies of whole data sets (`datasets/full`)."""
    s = samples_dir()
    return s / "full" if s is not None and (s / "full").is_dir() else None


def _shared_dirs() -> list[Path]:
    seen: list[Path] = []
    for base in (_repo_root(), Path.cwd()):
        d = (base / ".." / "shared" / "datasets").resolve()
        if d.is_dir() and d not in seen:
            seen.append(d)
    return seen


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


def _bad(path: Path, where: str, err: Exception) -> DataError:
    return DataError(f"{path}: {where}: {err}")


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each non-blank line of a JSONL file, gzipped or not; a bad
    line or an unreadable file is a DataError naming the file and the line."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield lineno, json.loads(line)
                    except json.JSONDecodeError as e:
                        raise _bad(path, f"line {lineno}", e) from None
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: cannot read: {e}") from None


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
    return [_validate(HumanEvalItem, o, path, f"line {n}") for n, o in read_jsonl(path)]


def _load_json_list(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e}") from None
    if text.startswith("version https://git-lfs"):
        raise DataError(f"{path} is a Git LFS pointer, not the data; fetch the real file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _bad(path, "not valid JSON", e) from None
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


def humaneval_id(task_id: str) -> str:
    """A file-name-safe form of an id (`HumanEval/3` -> `HumanEval_3`)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", task_id)
