"""MBPP as a built-in benchmark: its splits, prompt, function under test and trusted tests, and
loaders that refuse a malformed official file by name and line."""

from __future__ import annotations

import json
import shutil

import pytest

from verimap.evals import data as d
from verimap.evals.any_benchmark import open_benchmark
from verimap.evals.mbpp import DEFAULT_SPLIT, PARTS, parse_split
from verimap.evals.tasksets import get_benchmark

from .conftest import SAMPLES, SHARED

FULL = SAMPLES / "full"


@pytest.mark.parametrize(
    ("split", "n", "first", "last"),
    [
        (None, 257, 11, 479),
        ("sanitized:test", 257, 11, 479),
        ("sanitized:prompt", 7, 2, 9),
        ("sanitized:validation", 43, 554, 600),
        ("sanitized:train", 120, 602, 809),
        ("sanitized:all", 427, 2, 809),
        ("full", 500, 11, 510),
        ("FULL:Validation", 90, 511, 600),
        ("full:train", 374, 601, 974),
        ("full:prompt", 10, 1, 10),
        ("full:all", 974, 1, 974),
    ],
)
def test_every_split_has_its_official_size(split, n, first, last):
    tasks = get_benchmark("mbpp", FULL, split=split).tasks()
    assert len(tasks) == n and len({t.id for t in tasks}) == n
    assert (tasks[0].id, tasks[-1].id) == (f"mbpp/{first}", f"mbpp/{last}")


@pytest.mark.parametrize("bad", ["", "sanitised", "full:dev", "sanitized:test:x", "test", ":test"])
def test_an_unknown_split_lists_the_valid_values(bad):
    with pytest.raises(d.DataError) as e:
        parse_split(bad)
    msg = str(e.value)
    assert repr(bad) in msg and "sanitized, full" in msg and ", ".join(PARTS) in msg
    assert str(parse_split(None)) == DEFAULT_SPLIT == "sanitized:test"


def test_the_prompt_is_the_description_and_the_first_test_only():
    task = get_benchmark("mbpp", FULL).tasks()[0]
    assert task.id == "mbpp/11" and task.gold == task.meta["entry_point"] == "remove_Occ"
    assert task.prompt.startswith(
        "Write a python function to remove first and last occurrence of a given character "
        'from the string.\nYour code should pass this test:\n\nassert remove_Occ("hello","l") '
        '== "heo"\n\n'
    )
    assert "`remove_Occ`" in task.prompt and "abcda" not in task.prompt  # the 2nd test is hidden
    assert task.meta["test"] == (
        "def check(candidate):\n"
        '    assert remove_Occ("hello","l") == "heo"\n'
        '    assert remove_Occ("abcda","a") == "bcd"\n'
        '    assert remove_Occ("PHP","P") == "H"\n'
    )


def test_the_tests_carry_their_imports_and_setup_and_the_entry_may_shadow_a_builtin():
    by_id = {t.id: t for t in get_benchmark("mbpp", FULL, split="sanitized:all").tasks()}
    with_import = next(t for t in by_id.values() if t.meta["test"].startswith("import math\n"))
    assert "math.isclose" in with_import.meta["test"]
    assert by_id["mbpp/126"].meta["entry_point"] == "sum"  # `assert sum(10,15) == 6`
    full = {t.id: t for t in get_benchmark("mbpp", FULL, split="full:all").tasks()}
    assert full["mbpp/367"].meta["test"].startswith("root = Node(1)\nroot.left = Node(2)\n")
    assert "\r" not in full["mbpp/11"].meta["solution"]
    assert (
        "challenge" not in full["mbpp/11"].meta["test"]
        and "hellolloll" not in (full["mbpp/11"].meta["test"])
    )  # test_list only, as the standard evaluation


def test_the_split_is_part_of_the_benchmark_identity_and_only_mbpp_has_one():
    assert get_benchmark("mbpp", FULL).identity() == {"split": "sanitized:test"}
    assert open_benchmark("mbpp", str(FULL), split="full:train").identity() == {
        "split": "full:train"
    }
    with pytest.raises(d.DataError, match="--split chooses MBPP's tasks; gsm8k has no splits"):
        open_benchmark("gsm8k", str(SAMPLES), split="full")


def test_the_real_files_match_the_committed_ones():
    for rel in d.MANIFEST["mbpp"]:
        if (SHARED / rel).is_file():
            assert (SHARED / rel).read_bytes() == (FULL / rel).read_bytes()


# ---- malformed official files -------------------------------------------------------------------


def _copy(tmp_path):
    (tmp_path / "mbpp").mkdir()
    for rel in d.MANIFEST["mbpp"]:
        shutil.copy(FULL / rel, tmp_path / rel)
    return tmp_path / "mbpp"


def _load(tmp_path, task_set):
    return d.load_mbpp(d.resolve("mbpp", tmp_path), task_set)


def test_a_truncated_jsonl_file_names_its_broken_line(tmp_path):
    folder = _copy(tmp_path)
    text = (folder / "mbpp.jsonl").read_text()
    (folder / "mbpp.jsonl").write_text(text[: len(text) // 2])
    cut_line = text[: len(text) // 2].count("\n") + 1
    with pytest.raises(
        d.DataError, match=rf"mbpp\.jsonl: line {cut_line} column \d+: not valid JSON"
    ):
        _load(tmp_path, "full")
    assert len(_load(tmp_path, "sanitized")) == 427  # the other set is still whole


def test_a_truncated_json_file_names_the_place_it_breaks(tmp_path):
    folder = _copy(tmp_path)
    text = (folder / "sanitized-mbpp.json").read_text()
    (folder / "sanitized-mbpp.json").write_text(text[:100_000])
    with pytest.raises(
        d.DataError, match=r"sanitized-mbpp\.json: line 1 column \d+: not valid JSON"
    ):
        _load(tmp_path, "sanitized")


def _rewrite_jsonl(path, lineno, change):
    lines = path.read_text().splitlines(keepends=True)
    row = json.loads(lines[lineno - 1])
    change(row)
    lines[lineno - 1] = json.dumps(row) + "\n"
    path.write_text("".join(lines))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda r: r.pop("text"), r"line 3: field 'text': Field required"),
        (lambda r: r.update(test_list="assert f(1) == 1"), r"line 3: field 'test_list'"),
        (lambda r: r.update(test_list=[]), r"line 3: field 'test_list'"),
        (lambda r: r.update(task_id="3"), r"line 3: field 'task_id'"),
        (lambda r: r.update(task_id=1), r"line 3: task_id 1 again \(first at line 1\)"),
    ],
)
def test_a_full_set_record_off_the_schema_is_named(tmp_path, change, match):
    folder = _copy(tmp_path)
    _rewrite_jsonl(folder / "mbpp.jsonl", 3, change)
    with pytest.raises(d.DataError, match=r"mbpp\.jsonl: " + match):
        _load(tmp_path, "full")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda r: r.pop("test_imports"), r"item 5: field 'test_imports': Field required"),
        (lambda r: r.update(prompt=None), r"item 5: field 'prompt'"),
        (lambda r: r.update(test_list=[1, 2]), r"item 5: field 'test_list.0'"),
    ],
)
def test_a_sanitized_record_off_the_schema_is_named(tmp_path, change, match):
    folder = _copy(tmp_path)
    rows = json.loads((folder / "sanitized-mbpp.json").read_text())
    change(rows[5])
    (folder / "sanitized-mbpp.json").write_text(json.dumps(rows))
    with pytest.raises(d.DataError, match=r"sanitized-mbpp\.json: " + match):
        _load(tmp_path, "sanitized")


def test_one_set_in_the_other_s_place_is_refused(tmp_path):
    folder = _copy(tmp_path)
    shutil.copy(FULL / "mbpp" / "mbpp.jsonl", folder / "sanitized-mbpp.json")
    with pytest.raises(
        d.DataError, match=r"sanitized-mbpp\.json: line 2 column 1: not valid JSON: Extra data"
    ):
        _load(tmp_path, "sanitized")
    shutil.copy(FULL / "mbpp" / "sanitized-mbpp.json", folder / "mbpp.jsonl")
    with pytest.raises(d.DataError, match=r"mbpp\.jsonl: line 1: "):
        _load(tmp_path, "full")


def test_a_missing_file_is_named_with_where_to_put_it(tmp_path):
    folder = _copy(tmp_path)
    (folder / "mbpp.jsonl").unlink()
    with pytest.raises(d.DataError) as e:
        d.resolve("mbpp", tmp_path)
    assert str(folder / "mbpp.jsonl") in str(e.value) and "DATA_DIR/mbpp/mbpp.jsonl" in str(e.value)


# ---- verimap eval -b mbpp -----------------------------------------------------------------------

FACTORY = ["--models-factory", "verimap.testing:oracle_factory", "--sandbox", "process", "-q"]


def _eval(*args):
    from click.testing import CliRunner

    from verimap.cli import main

    return CliRunner().invoke(main, ["eval", *args], catch_exceptions=False)


@pytest.mark.parametrize("method", ["bare", "sc", "react", "verimap"])
def test_eval_runs_mbpp_with_the_split_recorded_and_held_on_resume(tmp_path, method):
    out = tmp_path / "run"
    args = ["-b", "mbpp", "-m", method, "-n", "2", "-o", str(out), "--data-dir", str(FULL)]
    r = _eval(*args, *FACTORY)
    assert r.exit_code == 0, r.output
    assert f"| {method} | 100.0 ± 0.0 (n=2, runs=1) |" in r.output
    config = json.loads((out / "config.json").read_text())
    assert config["benchmark"] == "mbpp" and config["benchmark_source"] == {
        "split": "sanitized:test"
    }
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == ["mbpp/11", "mbpp/12"]
    again = _eval(*args, "--split", "full", "--resume", *FACTORY)
    assert again.exit_code == 1 and "benchmark_source" in again.output


def test_eval_split_flag_is_validated_and_only_for_mbpp(tmp_path):
    r = _eval("-b", "mbpp", "--split", "full:dev", *FACTORY)
    assert r.exit_code == 2 and "unknown MBPP split 'full:dev'" in r.output
    assert "sanitized, full" in r.output and "test, validation, train, prompt, all" in r.output
    r = _eval("-b", "gsm8k", "--split", "full", "--data-dir", str(SAMPLES), *FACTORY)
    assert r.exit_code == 1 and "--split chooses MBPP's tasks; gsm8k has no splits" in r.output
    config = tmp_path / "c.yaml"
    config.write_text("benchmark: mbpp\nsplit: full:validation\nmethod: bare\nlimit: 1\n")
    out = tmp_path / "run"
    r = _eval("--config", str(config), "-o", str(out), "--data-dir", str(FULL), *FACTORY)
    assert r.exit_code == 0, r.output
    assert json.loads((out / "config.json").read_text())["benchmark_source"] == {
        "split": "full:validation"
    }
    assert json.loads((out / "results.jsonl").read_text())["task_id"] == "mbpp/511"
