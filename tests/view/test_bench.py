"""benchmarks/view.py on a small directory: the eval it builds tells the five stories apart
and the timed `verimap view` run writes its report."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections import Counter

from .conftest import REPO, need_dot


def _load():
    spec = importlib.util.spec_from_file_location("view_bench", REPO / "benchmarks" / "view.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


bench = _load()


def test_synthetic_eval_has_every_story(tmp_path):
    asyncio.run(bench.make_eval(tmp_path, 10))
    recs = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    stories = Counter((r["status"], r["correct"], r["iterations"], r["retries"]) for r in recs)
    assert stories == {
        ("success", True, 1, 0): 2,  # passes at once
        ("success", True, 1, 1): 2,  # one retry
        ("success", True, 2, 1): 2,  # replanned (retries count once per node run)
        ("success", False, 1, 0): 2,  # verified but wrong
        ("failed", False, 2, 2): 2,  # fails everywhere
    }


def test_main_times_the_cli_and_reports_size(capsys):
    need_dot()
    res = bench.main(["--tasks", "5"])
    assert res["tasks"] == 5 and res["seconds"] > 0 and 0 < res["mb"] < 1
    out = capsys.readouterr().out
    assert "verimap view:" in out and "report" in out
