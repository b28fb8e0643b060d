"""benchmarks/results_page.py: eval/results.md is generated from eval/draws, not typed; every
draw is on it, and development data says so."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DRAWS = REPO / "eval" / "draws"


def _load() -> Any:
    if str(REPO / "benchmarks") not in sys.path:
        sys.path.insert(0, str(REPO / "benchmarks"))
    path = REPO / "benchmarks" / "results_page.py"
    spec = importlib.util.spec_from_file_location("results_page", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


page = _load()


def test_the_committed_page_is_what_the_draws_give():
    committed = (REPO / "eval" / "results.md").read_text(encoding="utf-8")
    assert committed == page.render(DRAWS), "run python3 benchmarks/results_page.py"


def test_every_draw_file_is_in_the_index_and_every_entry_has_its_file():
    index = json.loads((DRAWS / page.INDEX).read_text(encoding="utf-8"))
    named = {e["file"] for e in index["draws"]}
    assert named == {p.name for p in DRAWS.glob("*.jsonl")}


def line(task: int, method: str, correct: bool, verified: bool, seconds: float) -> str:
    return json.dumps(
        {
            "benchmark": "gsm8k",
            "task": f"gsm8k/{task}",
            "method": method,
            "correct": correct,
            "verified": verified,
            "calls": 2,
            "tokens": 50,
            "seconds": seconds,
        }
    )


def test_a_draw_gets_its_tables_and_a_development_draw_says_so(tmp_path):
    for seed in (1, 2):
        rows = [line(10 * seed + i, "verimap", i < 3, i < 2, 20.0) for i in range(4)]
        rows += [line(10 * seed + i, "react", i == 3, False, 10.0) for i in range(4)]
        (tmp_path / f"vq-{seed}.jsonl").write_text("\n".join(rows) + "\n")
    entries = [
        {"file": "vq-2.jsonl", "seed": 2, "code": "abc", "changed": "nothing", "development": []},
        {
            "file": "vq-1.jsonl",
            "seed": 1,
            "code": "def",
            "changed": "D1",
            "development": ["GSM8K: replayed for D2"],
        },
    ]
    pooled = {"gsm8k": [1, 2], "humaneval": [], "mixed": []}
    (tmp_path / page.INDEX).write_text(json.dumps({"pooled": pooled, "draws": entries}))
    text = page.render(tmp_path)
    assert "A fresh draw: nothing was chosen on its tasks." in text
    assert "**Development data**: GSM8K: replayed for D2." in text
    assert text.index("### Seed 2") < text.index("### Seed 1")
    assert "| verimap | 4 | 3/4 = 75% (30%–95%) | 2 | 2/2 = 100% (34%–100%) |" in text
    # pooled: 8 tasks; verimap wins 6, loses 2 against react
    assert "| verimap | 8 | 6/8 = 75% (41%–93%) |" in text
    assert "| react | 8 | 6/8 = 75% (41%–93%) | 2/8 = 25% (7%–59%) | 6 | 2 | 0.289 |" in text
    assert "| verimap | 8 | 6/8 = 75% (41%–93%) | 4 | 4/4 = 100% (51%–100%) " in text
    assert "| 2.00× |" in text
