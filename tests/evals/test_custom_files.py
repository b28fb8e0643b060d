"""A custom benchmark's file that cannot be read, or a `datasets` directory that would make the
loader read something else than its own rows, is a DataError naming the file, never a traceback."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from verimap.evals.custom_files import load_rows
from verimap.evals.data import DataError
from verimap.testing import need

ROWS = [{"question": "Capital of France?", "answer": "Paris"}]


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("t.csv", b"question,answer\nq,1\ncaf\xe9,2\n", r"t\.csv: line 3: not UTF-8 text"),
        (
            "t.tsv",
            b"question\tanswer\nq\t1\nq\t" + b"x" * 200_000 + b"\n",
            r"t\.tsv: line 3: cannot read: field larger than field limit",
        ),
        (
            "t.json",
            b'[{"question": "q",\n "answer": ' + b"7" * 5000 + b"}]",
            r"t\.json: line 2: an integer of over \d+ digits",
        ),
        ("t.json", b"[" * 100_000 + b"]" * 100_000, r"t\.json: line 1: nested 100000 levels deep"),
        (
            "t.json",
            b'[{"question": "q",\n "answer": "1"',
            r"t\.json: line 2 column 15: not valid JSON",
        ),
        ("t.jsonl", b'{"question": "q", "answer": "1"}\n\xff\n', r"t\.jsonl: line 2: not UTF-8"),
    ],
    ids=["csv-utf8", "csv-field", "json-digits", "json-deep", "json-cut", "jsonl-utf8"],
)
def test_a_malformed_file_is_a_data_error_naming_file_and_line(tmp_path, name, content, match):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(DataError, match=match):
        load_rows(tmp_path / name)


def _datasets() -> Any:
    """The `datasets` package (the dev extra): without it the test fails under CI, else skips."""
    try:
        return importlib.import_module("datasets")
    except ImportError:
        need(False, "the `datasets` package is not installed (pip install -e '.[dev]')")


def _saved_with_image_paths(path: Path, image: str) -> Path:
    """A saved dataset whose `image` column names `image` and holds no bytes, as a hand-written
    directory can (save_to_disk itself embeds the file's bytes): decoding it reads `image`."""
    datasets = _datasets()
    struct = {"bytes": datasets.Value("binary"), "path": datasets.Value("string")}
    features = datasets.Features(
        {"question": datasets.Value("string"), "answer": datasets.Value("string"), "image": struct}
    )
    rows = [{**ROWS[0], "image": {"bytes": None, "path": image}}]
    datasets.Dataset.from_list(rows, features=features).save_to_disk(str(path))
    info = json.loads((path / "dataset_info.json").read_text())
    info["features"]["image"] = {"_type": "Image"}
    (path / "dataset_info.json").write_text(json.dumps(info))
    return path


@pytest.mark.parametrize("image", ["secret.png", "http://127.0.0.1:9/secret.png"])
def test_a_datasets_image_column_is_refused_before_any_image_is_read(tmp_path, monkeypatch, image):
    datasets = _datasets()
    opened: list[object] = []
    monkeypatch.setattr("PIL.Image.open", lambda *a, **k: opened.append(a) or 1 / 0)
    (tmp_path / "secret.png").write_text("not for the benchmark")
    image = str(tmp_path / image) if "://" not in image else image
    path = _saved_with_image_paths(tmp_path / "ds", image)
    assert datasets.load_from_disk(str(path)).features["image"] == datasets.Image()
    with pytest.raises(DataError, match=r"ds: the column\(s\) image hold images"):
        load_rows(path)
    assert opened == []


def test_a_datasets_directory_with_embedded_images_is_refused(tmp_path):
    datasets = _datasets()
    (tmp_path / "a.png").write_bytes(b"\x89PNG not really")
    ds = datasets.Dataset.from_list([{**ROWS[0], "pics": [str(tmp_path / "a.png")]}])
    ds = ds.cast_column("pics", datasets.Sequence(datasets.Image()))
    ds.save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(DataError, match=r"the column\(s\) pics hold images"):
        load_rows(tmp_path / "ds")
    undecoded = ds.cast_column("pics", datasets.Sequence(datasets.Image(decode=False)))
    undecoded.save_to_disk(str(tmp_path / "raw"))
    assert load_rows(tmp_path / "raw").rows[0]["question"] == ROWS[0]["question"]


def test_a_datasets_directory_naming_data_files_elsewhere_is_refused(tmp_path):
    datasets = _datasets()
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "elsewhere"))
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "ds"))
    state = json.loads((tmp_path / "ds" / "state.json").read_text())
    name = state["_data_files"][0]["filename"]
    state["_data_files"][0]["filename"] = f"../elsewhere/{name}"
    (tmp_path / "ds" / "state.json").write_text(json.dumps(state))
    with pytest.raises(DataError, match=r"state\.json: '_data_files' must name files in"):
        load_rows(tmp_path / "ds")
    state["_data_files"][0]["filename"] = name
    (tmp_path / "ds" / "state.json").write_text(json.dumps(state))
    (tmp_path / "ds" / name).unlink()
    (tmp_path / "ds" / name).symlink_to(tmp_path / "elsewhere" / name)
    with pytest.raises(DataError, match=r"state\.json: '_data_files' must name files in"):
        load_rows(tmp_path / "ds")
    datasets.DatasetDict({"test": datasets.Dataset.from_list(ROWS)}).save_to_disk(
        str(tmp_path / "dd")
    )
    (tmp_path / "dd" / "dataset_dict.json").write_text(json.dumps({"splits": ["../elsewhere"]}))
    with pytest.raises(DataError, match="'splits' must list the names of subdirectories"):
        load_rows(tmp_path / "dd")


def test_a_datasets_row_that_cannot_be_read_is_a_data_error(tmp_path, monkeypatch):
    datasets = _datasets()
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "ds"))

    def broken(self):
        yield ROWS[0]
        raise OSError("disk went away")

    monkeypatch.setattr(datasets.Dataset, "__iter__", broken)
    with pytest.raises(DataError, match="cannot read its rows: OSError: disk went away"):
        load_rows(tmp_path / "ds")
