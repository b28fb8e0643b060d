"""Rows of a custom benchmark's file: JSONL (gzipped or not), CSV/TSV, a JSON list, or a
Hugging Face `datasets` directory written by `save_to_disk`.

Every reader returns the same thing (the rows as dicts, the field names in the order first
seen, and what kind of source it was), so the field map is checked in one place whatever the
format. A file that cannot be read is a `DataError` naming the file and, where there is one,
the line.
"""

from __future__ import annotations

import csv
import importlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verimap.evals.data import DataError, decode_text, read_json, read_jsonl

JSONL = (".jsonl", ".jsonl.gz", ".ndjson")
CSV = {".csv": ",", ".tsv": "\t"}
KINDS = "a .jsonl, .csv, .tsv or .json file, or a directory written by Dataset.save_to_disk"


@dataclass
class Rows:
    rows: list[dict[str, Any]]
    fields: list[str]
    kind: str  # jsonl | csv | json | datasets


def suffix_of(path: Path) -> str:
    """The file's type: `.jsonl.gz` whole, else the last suffix."""
    name = path.name.lower()
    return next((s for s in JSONL if name.endswith(s)), path.suffix.lower())


def load_rows(path: str | os.PathLike[str]) -> Rows:
    """The rows of `path`; an empty one, or one that is no table of records, is an error."""
    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: no such file or directory")
    if p.is_dir():
        got = _datasets_rows(p)
    elif (suffix := suffix_of(p)) in JSONL:
        got = _records(p, [obj for _, obj in read_jsonl(p)], "jsonl", "line")
    elif suffix in CSV:
        got = _csv_rows(p, CSV[suffix])
    elif suffix == ".json":
        got = _records(p, _json_list(p), "json", "item")
    else:
        raise DataError(
            f"{p}: cannot read a {suffix or 'suffix-less'} file as a benchmark; give {KINDS}"
        )
    if not got.rows:
        raise DataError(f"{p}: the benchmark is empty (no rows)")
    return got


def _fields(rows: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for r in rows:
        seen.update(dict.fromkeys(r))
    return list(seen)


def _records(p: Path, objs: list[Any], kind: str, unit: str) -> Rows:
    for i, obj in enumerate(objs):
        if not isinstance(obj, dict):
            raise DataError(
                f"{p}: {unit} {i + 1} is a JSON {type(obj).__name__}, not an object of fields"
            )
    return Rows(objs, _fields(objs), kind)


def _json_list(p: Path) -> list[Any]:
    data = read_json(p)
    if not isinstance(data, list):
        raise DataError(f"{p}: expected a JSON list of objects, got a {type(data).__name__}")
    return data


def _csv_rows(p: Path, delimiter: str) -> Rows:
    try:
        text = decode_text(p.read_bytes(), p)
    except OSError as e:
        raise DataError(f"{p}: cannot read: {e}") from None
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        rows = [dict(r) for r in reader]
        fields = list(reader.fieldnames or [])
    except csv.Error as e:
        raise DataError(f"{p}: line {reader.reader.line_num}: cannot read: {e}") from None
    for i, r in enumerate(rows):
        if None in r:  # DictReader's key for cells past the header
            raise DataError(f"{p}: row {i} has more cells than the header has fields")
    return Rows(rows, fields, "csv")


def _in_dir(p: Path, name: Any) -> bool:
    """Whether `name` names a file right inside `p`, symbolic links followed."""
    return isinstance(name, str) and (p / name).resolve().parent == p.resolve()


def _check_saved_files(p: Path) -> None:
    """The data files and splits a saved dataset's own JSON names are right inside `p`:
    `datasets` joins them to the directory, so `..`, an absolute path or a symbolic link would
    read a dataset elsewhere on the machine into the tasks."""
    if (p / "dataset_dict.json").is_file():
        splits = read_json(p / "dataset_dict.json")
        names = splits.get("splits") if isinstance(splits, dict) else None
        if not isinstance(names, list) or not all(_in_dir(p, n) for n in names):
            raise DataError(
                f"{p / 'dataset_dict.json'}: 'splits' must list the names of subdirectories"
            )
        for n in names:
            _check_saved_files(p / n)
    if (p / "state.json").is_file():
        state = read_json(p / "state.json")
        files = state.get("_data_files") if isinstance(state, dict) else None
        if not isinstance(files, list) or not all(
            isinstance(f, dict) and _in_dir(p, f.get("filename")) for f in files
        ):
            raise DataError(f"{p / 'state.json'}: '_data_files' must name files in {p}")


def _media_columns(features: Any) -> list[str]:
    """The columns whose values `datasets` decodes on reading (an Image, Audio or Video, alone or
    nested): decoding opens the local path or fetches the URL a row names."""
    from datasets.features.features import require_decoding

    return [name for name, feature in features.items() if require_decoding(feature)]


def _datasets_rows(p: Path) -> Rows:
    """A saved `Dataset`, or one split of a saved `DatasetDict`: "test" when it has one, or
    its only split (`DIR/SPLIT` names any split: save_to_disk writes each to a subdirectory).
    A column that would be decoded (images, audio) is refused: a benchmark's tasks are text, and
    decoding would open the paths or fetch the URLs the data names."""
    if not ((p / "state.json").is_file() or (p / "dataset_dict.json").is_file()):
        raise DataError(
            f"{p}: a directory, but not one written by `datasets`' save_to_disk (no state.json "
            f"or dataset_dict.json); give {KINDS}"
        )
    try:
        datasets: Any = importlib.import_module("datasets")  # typed loosely: an optional extra
    except ImportError:
        raise DataError(
            f"{p} is a Hugging Face datasets directory; reading it needs the `datasets` "
            "package: pip install datasets"
        ) from None
    _check_saved_files(p)
    try:
        ds = datasets.load_from_disk(str(p))
    except Exception as e:
        raise DataError(f"{p}: `datasets` cannot load it: {type(e).__name__}: {e}") from None
    if isinstance(ds, datasets.DatasetDict):
        splits = list(ds)
        if "test" in ds:
            ds = ds["test"]
        elif len(splits) == 1:
            ds = ds[splits[0]]
        else:
            raise DataError(
                f"{p} holds the splits {', '.join(splits)} and none is 'test'; name one as "
                f"{p / splits[0]}"
            )
    media = _media_columns(ds.features)
    if media:
        raise DataError(
            f"{p}: the column(s) {', '.join(media)} hold images, audio or video, which a benchmark "
            "of text tasks does not read; drop them (Dataset.remove_columns) and save it again"
        )
    try:
        rows = [dict(r) for r in ds]
    except Exception as e:
        raise DataError(f"{p}: `datasets` cannot read its rows: {type(e).__name__}: {e}") from None
    return Rows(rows, list(ds.column_names), "datasets")
