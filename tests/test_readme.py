"""The README is the front door: short, and its commands are the ones the project runs."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_the_readme_is_at_most_150_lines():
    assert len(README.splitlines()) <= 150


def test_the_readme_test_command_is_what_ci_runs():
    makefile = (REPO / "Makefile").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in README and re.search(r"^\s*make test\s*$", ci, re.M)
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "python3 -m pytest" in recipe and "python3 -m pytest" in README


def test_the_readme_custom_benchmark_is_the_tested_example():
    """tests/evals/test_custom_benchmarks.py runs EXAMPLE as written; the README shows it."""
    source = (REPO / "tests" / "evals" / "test_custom_benchmarks.py").read_text()
    parts = re.search(r"EXAMPLE = \(\n((?:\s+\"[^\"]*\"\n)+)\)", source)
    assert parts, "the example's definition moved"
    example = "".join(re.findall(r'"([^"]*)"', parts.group(1)))
    assert example.startswith("verimap eval -b ") and example in README


def test_every_relative_link_in_the_readme_exists():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert local, "the README links to its docs"
    assert [t for t in local if not (REPO / t).exists()] == []


def test_the_readme_gsm8k_column_is_what_the_pooled_draws_say():
    """The results table is computed, not typed: each method's GSM8K count, verimap's verified
    precision and the paired wins and losses come from the five draws' compact results files
    in eval/draws, pooled as eval/results.md pools them."""
    from verimap.evals.report import load_records
    from verimap.evals.stats import compare_records

    draws = REPO / "eval" / "draws"
    seeds = ["318662", "555653", "872998", "843887", "6441"]

    def pooled(method: str) -> list[dict]:
        recs = load_records([f"{draws / f'vq-{s}.jsonl'}#{method}" for s in seeds])
        return [r for r in recs if r["benchmark"] == "gsm8k"]

    vm = pooled("verimap")
    rows = {m: re.search(rf"^\| `{m}`[^\n]*", README, re.M) for m in ("bare", "sc", "program")}
    rows["react"] = re.search(r"^\| `react` \|[^\n]*", README, re.M)
    rows["verimap"] = re.search(r"^\| `verimap` \(default\)[^\n]*", README, re.M)
    for method, row in rows.items():
        assert row, f"no README row for {method}"
        recs = vm if method == "verimap" else pooled(method)
        right = sum(bool(r["correct"]) for r in recs)
        assert f"{right}/{len(recs)} = " in row.group(0), (method, right, len(recs))
        if method != "verimap":
            (c,) = compare_records(vm, recs)
            wins, losses = c.comparison.wins, c.comparison.losses
            said = rf"`{method}` (?:within the noise )?\({wins}–{losses}, p = "
            assert re.search(said, " ".join(README.split())), (method, wins, losses)
    verified = [r for r in vm if r["verified"]]
    right = sum(bool(r["correct"]) for r in verified)
    assert f"{right}/{len(verified)} = " in rows["verimap"].group(0)


def test_the_readme_humaneval_and_mixed_ballot_cells_are_what_the_draws_say():
    """HumanEval (one draw) and the mixed ballot (the two draws it ran on) from eval/draws."""
    from verimap.evals.report import load_records

    draws = REPO / "eval" / "draws"
    he = {
        m: [
            r
            for r in load_records([f"{draws / 'vq-704573.jsonl'}#{m}"])
            if r["benchmark"] == "humaneval"
        ]
        for m in ("bare", "sc", "react", "verimap")
    }
    mixed = load_records(
        [f"{draws / f'vq-{s}.jsonl'}#verimap --ballot mixed" for s in ("555653", "872998")]
    )
    mixed = [r for r in mixed if r["benchmark"] == "gsm8k"]
    rows = {m: re.search(rf"^\| `{m}`[ |(][^\n]*", README, re.M) for m in he}
    rows["verimap"] = re.search(r"^\| `verimap` \(default\)[^\n]*", README, re.M)
    for method, recs in he.items():
        row = rows[method]
        assert row, f"no README row for {method}"
        right = sum(bool(r["correct"]) for r in recs)
        assert row.group(0).split("|")[5].strip().startswith(f"{right}/{len(recs)} = "), method
    ver = [r for r in he["verimap"] if r["verified"]]
    assert f"{sum(r['correct'] for r in ver)}/{len(ver)} = " in rows["verimap"].group(0)
    row = re.search(r"^\| `verimap --ballot mixed`[^\n]*", README, re.M)
    assert row, "no README row for the mixed ballot"
    ver = [r for r in mixed if r["verified"]]
    assert f"{sum(r['correct'] for r in mixed)}/{len(mixed)} = " in row.group(0)
    assert f"{sum(r['correct'] for r in ver)}/{len(ver)} = " in row.group(0)


def test_the_readme_mbpp_and_multihoprag_columns_are_what_their_draw_says():
    """MBPP and MultiHopRAG (the third and fourth columns) from the draw of seed 854403."""
    from verimap.evals.report import load_records

    draw = REPO / "eval" / "draws" / "vq-854403.jsonl"
    for column, bench, methods in (
        (3, "mbpp", ("bare", "sc", "react", "verimap")),
        (4, "multihoprag", ("bare", "sc", "rag", "react", "verimap")),
    ):
        for method in methods:
            recs = [r for r in load_records([f"{draw}#{method}"]) if r["benchmark"] == bench]
            assert len(recs) == 30, (bench, method)
            label = "`verimap` (default)" if method == "verimap" else f"`{method}`"
            row = re.search(rf"^\| {re.escape(label)}[ |(][^\n]*", README, re.M)
            assert row, f"no README row for {method}"
            cell = row.group(0).split("|")[column].strip().strip("*")
            right = sum(bool(r["correct"]) for r in recs)
            assert cell.startswith(f"{right}/30 = "), (bench, method, cell)
            if method == "verimap":
                ver = [r for r in recs if r["verified"]]
                said = f"verified {sum(r['correct'] for r in ver)}/{len(ver)} = "
                assert said in cell if ver else cell.endswith("verified none"), (bench, cell)
