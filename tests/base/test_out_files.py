"""An output file replaces an existing one only when the user named its path or verimap wrote
it; a path nobody named is never followed through a symlink."""

import json
import os

import pytest

from verimap.base.out_files import (
    TRACE,
    OutFileError,
    check_replace,
    file_name,
    jsonl_of,
    marked,
    open_appending,
    replace_with,
    write_file,
)

REPORT = marked("report", "<!-- mine -->")
ROWS = jsonl_of("rows file", frozenset({"a", "b"}))
BASHRC = "alias ls='ls --color'\n"


@pytest.fixture
def bashrc(tmp_path):
    """A file of the user's that no verimap command wrote."""
    p = tmp_path / ".bashrc"
    p.write_text(BASHRC)
    return p


def test_a_new_file_is_written(tmp_path):
    p = write_file(tmp_path / "r.md", "<!-- mine -->\nhi\n", REPORT, named=False)
    assert p == tmp_path / "r.md" and p.read_text() == "<!-- mine -->\nhi\n"


def test_a_file_verimap_did_not_write_is_refused_unless_named(bashrc):
    with pytest.raises(OutFileError, match=r"refusing to replace .*not a report verimap wrote"):
        write_file(bashrc, "<!-- mine -->\n$(touch MARKER)\n", REPORT, named=False)
    assert bashrc.read_text() == BASHRC
    assert sorted(os.listdir(bashrc.parent)) == [".bashrc"]  # no temporary file left behind
    write_file(bashrc, "named\n", REPORT, named=True)
    assert bashrc.read_text() == "named\n"


def test_a_file_verimap_wrote_is_replaced(tmp_path):
    p = tmp_path / "r.md"
    write_file(p, "<!-- mine -->\nfirst\n", REPORT, named=False)
    write_file(p, "<!-- mine -->\nsecond\n", REPORT, named=False)
    assert p.read_text() == "<!-- mine -->\nsecond\n"


@pytest.mark.parametrize(
    ("content", "ours"),
    [
        ('{"a": 1, "b": 2, "c": 3}\n{}\n', True),
        ('{"a": 1}\n', False),
        ("[1]\n", False),
        ("not json\n", False),
        ("", False),
    ],
)
def test_a_jsonl_kind_knows_its_files_by_the_first_records_fields(tmp_path, content, ours):
    p = tmp_path / "rows.jsonl"
    p.write_text(content)
    if ours:
        check_replace(p, ROWS, named=False)
    else:
        with pytest.raises(OutFileError):
            check_replace(p, ROWS, named=False)


def test_a_symlink_not_named_is_refused_and_its_target_kept(tmp_path, bashrc):
    link = tmp_path / "report.md"
    link.symlink_to(bashrc)
    with pytest.raises(OutFileError, match="a symbolic link"):
        write_file(link, "<!-- mine -->\n", REPORT, named=False)
    dangling = tmp_path / "new.md"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutFileError, match="a symbolic link"):
        write_file(dangling, "<!-- mine -->\n", REPORT, named=False)
    assert bashrc.read_text() == BASHRC and not (tmp_path / "nowhere").exists()


def test_a_named_symlink_is_written_through(tmp_path):
    target = tmp_path / "real.md"
    target.write_text("old\n")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    write_file(link, "new\n", REPORT, named=True)
    assert link.is_symlink() and target.read_text() == "new\n"


def test_a_directory_is_not_replaced(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(OutFileError, match="not a regular file"):
        write_file(tmp_path / "d", "x", REPORT, named=False)


def test_replace_with_checks_again_after_the_writer(tmp_path):
    p = tmp_path / "r.md"

    def slow_writer(tmp):
        tmp.write_text("<!-- mine -->\n")
        p.write_text(BASHRC)  # somebody else's file appears meanwhile

    with pytest.raises(OutFileError):
        replace_with(p, REPORT, named=False, write=slow_writer)
    assert p.read_text() == BASHRC and sorted(os.listdir(tmp_path)) == ["r.md"]


def test_appending_creates_or_extends_only_its_own_kind(tmp_path, bashrc):
    p = tmp_path / "t.jsonl"
    line = json.dumps({"type": "run_start", "run_id": "r", "ts": 1.0}) + "\n"
    for _ in range(2):
        with open_appending(p, TRACE) as f:
            f.write(line)
    assert p.read_text() == line * 2
    with pytest.raises(OutFileError):
        open_appending(bashrc, TRACE)
    link = tmp_path / "l.jsonl"
    link.symlink_to(p)
    with pytest.raises(OutFileError, match="a symbolic link"):
        open_appending(link, TRACE)
    assert bashrc.read_text() == BASHRC and p.read_text() == line * 2


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("HumanEval/3", "HumanEval_3"),
        ("../x", ".._x"),
        ("..", "__"),
        (".", "_"),
        ("", "_"),
        ("a\x1b]0;t\x07b", "a__0_t_b"),
        ("é", "_"),
        ("ok-1.2_x", "ok-1.2_x"),
    ],
)
def test_safe_name_is_one_harmless_path_component(raw, name):
    assert file_name(raw) == name
    assert "/" not in name and name not in (".", "..") and name.isprintable()
