import gzip
import json
import re

import pytest

from verimap.evals import data as d


def test_samples_load_in_official_schema(samples):
    g = d.load_gsm8k(d.resolve("gsm8k", samples))
    h = d.load_humaneval(d.resolve("humaneval", samples))
    q, c = d.load_multihoprag(d.resolve("multihoprag", samples))
    assert len(g) == 20 and g[0].gold == "18"
    assert [x.task_id for x in h] == [f"HumanEval/{i}" for i in range(10)]
    assert len(q) == 6 and len(c) == 8
    assert {x.question_type for x in q} == {
        "inference_query",
        "comparison_query",
        "temporal_query",
        "null_query",
    }


def test_fixture_facts_are_verbatim_sentences_of_their_articles(samples):
    queries, corpus = d.load_multihoprag(d.resolve("multihoprag", samples))
    by_title = {a.title: a for a in corpus}
    for q in queries:
        for ev in q.evidence_list:
            art = by_title[ev.title]
            assert ev.fact in art.body
            assert (ev.source, ev.url, ev.published_at) == (art.source, art.url, art.published_at)


def test_real_files_load(shared):
    g = d.load_gsm8k(d.resolve("gsm8k", shared))
    h = d.load_humaneval(d.resolve("humaneval", shared))
    assert len(g) == 1319 and len(h) == 164
    assert all(x.gold.lstrip("-").replace(".", "").isdigit() for x in g)
    assert h[163].task_id == "HumanEval/163"


def test_samples_are_unchanged_prefixes_of_the_real_files(samples, shared):
    real = (shared / "gsm8k" / "test.jsonl").read_text().splitlines()
    assert (samples / "gsm8k" / "test.jsonl").read_text().splitlines() == real[:20]
    with gzip.open(shared / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        real_he = f.read().splitlines()
    with gzip.open(samples / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        assert f.read().splitlines() == real_he[:10]


def test_explicit_dir_wins_and_missing_file_is_named(tmp_path):
    with pytest.raises(d.DataError) as e:
        d.resolve("gsm8k", tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "gsm8k" / "test.jsonl") in msg and "--data-dir" in msg


def test_env_var_is_used(tmp_path, monkeypatch, samples):
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text(
        json.dumps({"question": "q", "answer": "x\n#### 1,000"}) + "\n"
    )
    monkeypatch.setenv(d.ENV_VAR, str(tmp_path))
    src = d.resolve("gsm8k")
    assert src.origin == "env" and src.root == tmp_path
    assert d.load_gsm8k(src)[0].gold == "1000"
    monkeypatch.setenv(d.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(d.DataError, match=r"\$VERIMAP_DATA"):
        d.resolve("humaneval")


def test_lfs_pointer_is_explained(tmp_path):
    (tmp_path / "multihoprag").mkdir()
    (tmp_path / "multihoprag" / "MultiHopRAG.json.LFS_POINTER.txt").write_text(
        "version https://git-lfs..."
    )
    with pytest.raises(d.DataError, match="Git LFS pointer"):
        d.resolve("multihoprag", tmp_path)


@pytest.mark.parametrize("name", ["multihoprag", "mbpp"])
def test_without_a_data_dir_the_committed_full_copy_wins_over_the_fixture(
    name, monkeypatch, samples
):
    monkeypatch.setattr(d, "_shared_dirs", lambda: [])
    src = d.resolve(name)
    assert (src.origin, src.root) == ("full", samples / "full") and not src.is_sample
    if name == "multihoprag":
        queries, corpus = d.load_multihoprag(src)
        assert (len(queries), len(corpus)) == (2556, 609)
        fixture = d.resolve(name, samples)  # the logic tests name it
        assert fixture.is_sample and len(d.load_multihoprag(fixture)[0]) == 6


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('{"question": "q", "answer": "a"\n', "line 1"),
        ('{"question": "q", "answer": "no marker"}\n', "####"),
        ('{"answer": "#### 1"}\n', "question"),
    ],
)
def test_malformed_gsm8k_is_a_clear_error(tmp_path, content, match):
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text(content)
    with pytest.raises(d.DataError, match=match):
        d.load_gsm8k(d.resolve("gsm8k", tmp_path))


def test_multihoprag_wrong_shape(tmp_path):
    (tmp_path / "multihoprag").mkdir()
    (tmp_path / "multihoprag" / "MultiHopRAG.json").write_text('{"not": "a list"}')
    (tmp_path / "multihoprag" / "corpus.json").write_text("[]")
    with pytest.raises(d.DataError, match="expected a JSON list"):
        d.load_multihoprag(d.resolve("multihoprag", tmp_path))


def test_committed_full_files_are_byte_identical_to_upstream(samples):
    import hashlib

    upstream = {  # sha256 recorded in each SOURCE.txt beside the file
        "full/gsm8k/test.jsonl": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
        "full/humaneval/HumanEval.jsonl.gz": "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
        "full/multihoprag/MultiHopRAG.json": "03cfb4926461f868684903aadc8024447bdda5bb3f6804741424cce338515bff",
        "full/multihoprag/corpus.json": "20b61b5ab84de84a927420c5d265b7ec8d859ae49980699958a787ade9e4d28f",
        "full/mbpp/mbpp.jsonl": "ccf64ceae9c5403bf50a044cb6d505bfd2a2963ee58338ba268fd65beab92a9f",
        "full/mbpp/sanitized-mbpp.json": "ca95deaa9a01ef0a6f439f88bcf0dd3db3563d22f22aad6cae04ebb9a8d8c8e9",
    }
    licenses = {"gsm8k": "MIT", "humaneval": "MIT", "multihoprag": "ODC-BY", "mbpp": "CC BY 4.0"}
    for rel, sha in upstream.items():
        path = samples / rel
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha, rel
        assert sha in (path.parent / "SOURCE.txt").read_text()
        assert licenses[path.parent.name] in (path.parent / "LICENSE").read_text()


@pytest.mark.parametrize("bad", ["\x1b]0;title\x07", "\n", "\u202e", "\x9b"])
def test_a_humaneval_id_with_an_unprintable_character_is_refused_by_file_and_line(tmp_path, bad):
    (tmp_path / "humaneval").mkdir()
    row = {
        "task_id": f"HumanEval/1{bad}",
        "prompt": "p",
        "canonical_solution": "s",
        "test": "t",
        "entry_point": "f",
    }
    path = tmp_path / "humaneval" / "HumanEval.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({**row, "task_id": "HumanEval/0"}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(d.DataError, match=f"{re.escape(str(path))}: line 2: the id .* unprintable"):
        d.load_humaneval(d.resolve("humaneval", tmp_path))


# Each raised out of the loader as a traceback (UnicodeDecodeError, ValueError, RecursionError).
GOOD_LINE = b'{"question": "q", "answer": "#### 1"}\n'
MALFORMED = [
    (
        GOOD_LINE + b'{"question": "caf\xe9", "answer": "#### 2"}\n',
        "line 2: not UTF-8 text (byte 0xe9)",
    ),
    (
        GOOD_LINE + b'{"question": "q", "answer": "#### 1", "n": ' + b"7" * 5000 + b"}\n",
        "line 2: an integer of over 4300 digits",
    ),
    (GOOD_LINE + b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 2: nested 100000 levels deep"),
    (GOOD_LINE + b'{"question": "q", "ans', "line 2 column 19: not valid JSON"),
]


@pytest.mark.parametrize(("content", "match"), MALFORMED, ids=["utf8", "digits", "deep", "cut"])
def test_a_malformed_jsonl_line_is_a_data_error_naming_file_and_line(tmp_path, content, match):
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_bytes(content)
    with pytest.raises(d.DataError, match=r"gsm8k/test\.jsonl: " + re.escape(match)):
        d.load_gsm8k(d.resolve("gsm8k", tmp_path))


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b'[\n{"a": 1},\n{"b": "\xff"}]', "line 3: not UTF-8 text"),
        (b'[\n{"a": 1},\n{"c": -' + b"7" * 5000 + b"}]", "line 3: an integer of over 4300 digits"),
        (
            b'[\n{"a": 1},\n' + b"[" * 100_000 + b"]" * 100_000 + b"\n]",
            "line 3: nested 100001 levels",
        ),
        (b'[\n{"a": 1},\n{"b": ', "line 3 column 7: not valid JSON: Expecting value"),
    ],
    ids=["utf8", "digits", "deep", "cut"],
)
def test_a_malformed_json_file_is_a_data_error_naming_file_and_line(tmp_path, content, match):
    path = tmp_path / "corpus.json"
    path.write_bytes(content)
    with pytest.raises(d.DataError, match=r"corpus\.json: " + re.escape(match)):
        d.read_json(path)


def test_long_digits_in_a_string_or_a_float_are_read(tmp_path):
    path = tmp_path / "corpus.json"
    path.write_bytes(b'[{"a": "' + b"9" * 5000 + b'"}, {"a": 1.' + b"9" * 5000 + b"}]")
    assert d.read_json(path)[0]["a"] == "9" * 5000


def test_a_truncated_gzip_is_a_data_error(tmp_path):
    path = tmp_path / "HumanEval.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"task_id": "x"}\n' * 500)[:-20])
    with pytest.raises(d.DataError, match=r"HumanEval\.jsonl\.gz: cannot read"):
        list(d.read_jsonl(path))
    path.write_bytes(b"\x1f\x8b" + b"not gzip" * 10)
    with pytest.raises(d.DataError, match="cannot read"):
        list(d.read_jsonl(path))


def test_a_repository_in_the_current_directory_does_not_choose_the_data(tmp_path, monkeypatch):
    repo = tmp_path / "cloned"
    (repo / "datasets" / "humaneval").mkdir(parents=True)
    (repo / "datasets" / "MANIFEST.md").write_text("shipped by a cloned repository\n")
    row = {
        "task_id": "HumanEval/0",
        "prompt": "p",
        "canonical_solution": "s",
        "test": "t",
        "entry_point": "f",
    }
    with gzip.open(repo / "datasets" / "humaneval" / "HumanEval.jsonl.gz", "wt") as f:
        f.write(json.dumps(row) + "\n")
    install = tmp_path / "site-packages" / "verimap" / "evals"  # installed without datasets/
    install.mkdir(parents=True)
    monkeypatch.setattr(d, "_repo_root", lambda: install.parent.parent)
    monkeypatch.chdir(repo)
    monkeypatch.delenv(d.ENV_VAR, raising=False)
    assert d.samples_dir() is None
    with pytest.raises(d.DataError, match="data not found"):
        d.resolve("humaneval")


# ---- malformed copies of the MultiHopRAG files ------------------------------------------------
# Made from the files the loader resolves by default: the official ones wherever the machine or
# the checkout has them (`datasets/full`), else the committed fixture.


@pytest.fixture
def mhrag_copy(tmp_path):
    """A writable copy of the resolved MultiHopRAG files, and their parsed records."""
    src = d.resolve("multihoprag")
    out = tmp_path / "multihoprag"
    out.mkdir()
    raw = {}
    for rel, path in src.files.items():
        name = rel.split("/")[-1]
        (out / name).write_bytes(path.read_bytes())
        raw[name] = json.loads(path.read_text(encoding="utf-8"))
    return tmp_path, raw


def _rewrite(root, name, records):
    (root / "multihoprag" / name).write_text(json.dumps(records, indent=4), encoding="utf-8")


def test_the_copy_loads_like_the_original(mhrag_copy):
    root, raw = mhrag_copy
    q, c = d.load_multihoprag(d.resolve("multihoprag", root))
    assert len(q) == len(raw["MultiHopRAG.json"]) and len(c) == len(raw["corpus.json"])


@pytest.mark.parametrize("name", ["MultiHopRAG.json", "corpus.json"])
def test_a_truncated_file_is_refused_naming_file_and_line(mhrag_copy, name):
    root, _ = mhrag_copy
    path = root / "multihoprag" / name
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    line = text[: len(text) // 2].count("\n") + 1
    with pytest.raises(d.DataError) as e:
        d.load_multihoprag(d.resolve("multihoprag", root))
    msg = str(e.value)
    assert str(path) in msg and "not valid JSON" in msg and f"line {line}" in msg


@pytest.mark.parametrize(
    ("name", "index", "change", "field"),
    [
        ("MultiHopRAG.json", 3, lambda r: r.pop("answer"), "answer"),
        ("MultiHopRAG.json", 5, lambda r: r.update(question_type=7), "question_type"),
        (
            "MultiHopRAG.json",
            0,
            lambda r: r["evidence_list"][0].pop("fact"),
            "evidence_list.0.fact",
        ),
        ("MultiHopRAG.json", 2, lambda r: r.update(evidence_list="none"), "evidence_list"),
        ("corpus.json", 4, lambda r: r.update(content=r.pop("body")), "body"),
        ("corpus.json", 1, lambda r: r.update(title=None), "title"),
    ],
)
def test_a_record_of_the_wrong_schema_is_refused_naming_file_and_record(
    mhrag_copy, name, index, change, field
):
    root, raw = mhrag_copy
    records = raw[name]
    change(records[index])
    _rewrite(root, name, records)
    with pytest.raises(d.DataError) as e:
        d.load_multihoprag(d.resolve("multihoprag", root))
    assert str(root / "multihoprag" / name) in str(e.value)
    assert f"item {index}: field '{field}'" in str(e.value)


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("MultiHopRAG.json", [], "holds no records"),
        ("corpus.json", [], "holds no records"),
        ("MultiHopRAG.json", {"data": []}, "expected a JSON list, got dict"),
        ("corpus.json", ["an article"], "item 0: .*valid dictionary"),
    ],
)
def test_a_file_of_the_wrong_shape_is_refused(mhrag_copy, name, content, match):
    root, _ = mhrag_copy
    _rewrite(root, name, content)
    with pytest.raises(d.DataError, match=match) as e:
        d.load_multihoprag(d.resolve("multihoprag", root))
    assert str(root / "multihoprag" / name) in str(e.value)


def test_the_files_swapped_are_refused(mhrag_copy):
    root, raw = mhrag_copy
    _rewrite(root, "MultiHopRAG.json", raw["corpus.json"])
    with pytest.raises(d.DataError, match=r"MultiHopRAG\.json: item 0: field 'query'"):
        d.load_multihoprag(d.resolve("multihoprag", root))
