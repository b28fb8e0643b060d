"""`verimap view` on a 500-task eval directory: wall time and size of the report.

The directory is made by the real eval runner and coordinator (plans, retries,
replans, Python VFs judged by the in-process sandbox double, judge verdicts,
fsynced records, JSONL traces) on scripted models, so the traces are in the real
format and shaped like a real run's: a fifth of the tasks pass at once, a fifth
retry, a fifth replan, a fifth are verified but wrong, a fifth fail. Then
`verimap view DIR` runs as a user runs it (a fresh process) and is timed.

    python benchmarks/view.py [--tasks 500] [--keep DIR]

Goal: at most 5 s and 20 MB for 500 tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import verimap
from verimap.config import Loop, RunConfig, Verify
from verimap.evals.data import samples_dir
from verimap.evals.runner import run_eval
from verimap.evals.tasksets import EvalTask, get_benchmark
from verimap.testing import InProcessSandboxDouble, ScriptedWorld

GOAL_S, GOAL_MB = 5.0, 20.0


def _node(nid: str, instruction: str, inputs: list[str], outputs: dict, vfs: list) -> dict:
    return {
        "id": nid,
        "name": nid.title(),
        "instruction": instruction,
        "inputs": inputs,
        "outputs": outputs,
        "verification": vfs,
    }


def _plans() -> list[dict[str, Any]]:
    def plan(compute: str) -> dict[str, Any]:
        return {
            "nodes": [
                _node(
                    "extract",
                    "Extract the two quantities from the task.",
                    ["USER_TASK"],
                    {"a": "number", "b": "number"},
                    [
                        {
                            "name": "positive",
                            "type": "python",
                            "code": "assert outputs['a'] > 0 and outputs['b'] > 0, 'quantities must be positive'",
                        },
                        {
                            "name": "from_task",
                            "type": "llm",
                            "content": "Both numbers appear in the task.",
                        },
                    ],
                ),
                _node(
                    "compute",
                    compute,
                    ["extract.a", "extract.b"],
                    {"total": "number"},
                    [
                        {
                            "name": "product",
                            "type": "python",
                            "code": "assert approx(outputs['total'], inputs['extract.a'] * inputs['extract.b']), "
                            "f\"expected {inputs['extract.a'] * inputs['extract.b']}\"",
                        }
                    ],
                ),
                _node(
                    "answer",
                    "State the final answer as a sentence.",
                    ["compute.total", "USER_TASK"],
                    {"answer": "string"},
                    [
                        {
                            "name": "nonempty",
                            "type": "python",
                            "code": "assert outputs['answer'].strip(), 'empty'",
                        },
                        {
                            "name": "answers_task",
                            "type": "llm",
                            "content": "The answer addresses the task.",
                        },
                    ],
                ),
            ]
        }

    return [plan("Multiply the two quantities."), plan("Multiply the two quantities, carefully.")]


def world_for(task: EvalTask, index: int) -> ScriptedWorld:
    """Scripted models for one task; `index % 5` picks its story (see the module docstring)."""
    story = index % 5

    def outputs(node_id: str, k: int, inputs: dict[str, Any], prompt: str) -> dict[str, Any]:
        if node_id == "extract":
            return {"a": 3, "b": 4}
        if node_id == "compute":
            careful = "carefully" in prompt
            wrong = story == 4 or (story == 2 and not careful) or (story == 1 and k == 0)
            return {"total": 13 if wrong else 12}
        gold = "-1" if story == 3 else task.gold
        return {
            "answer": f"Working through the task step by step gives {gold}. The answer is {gold}."
        }

    def judge(node_id: str, criterion: str, outs: dict[str, Any]) -> tuple[bool, str]:
        return True, f"The outputs {outs} satisfy: {criterion}"

    return ScriptedWorld(_plans(), outputs, judge)


async def make_eval(out: Path, tasks: int) -> float:
    """A `tasks`-record eval directory at `out` (the 20 GSM8K samples, repeated over runs)."""
    bench = get_benchmark("gsm8k", samples_dir())
    per_run = min(tasks, len(bench.tasks()))
    runs = math.ceil(tasks / per_run)
    config = RunConfig(
        loop=Loop(max_retries=2, max_iterations=2), verify=Verify(vacuity_check=False)
    )
    sandbox = InProcessSandboxDouble()

    async def solve(task: EvalTask, run: int, trace_path: Path) -> Any:
        index = run * per_run + int(task.id.rsplit("/", 1)[-1])
        world = world_for(task, index)
        return await verimap.build(world.models(), sandbox, config=config).run(
            task.prompt, trace_path=trace_path
        )

    start = time.perf_counter()
    await run_eval(
        bench,
        "verimap",
        None,
        sandbox,
        out,
        runs=runs,
        limit=per_run,
        max_concurrency=8,
        progress=False,
        solver=solve,
    )
    return time.perf_counter() - start


def time_view(eval_dir: Path, report: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "verimap", "view", str(eval_dir), "--out-file", str(report)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--keep", type=Path, help="make the eval directory here and keep it")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        eval_dir = a.keep or Path(tmp) / "eval"
        made = asyncio.run(make_eval(eval_dir, a.tasks))
        records = sum(1 for _ in (eval_dir / "results.jsonl").open())
        traces = sum(p.stat().st_size for p in (eval_dir / "traces").rglob("*.jsonl"))
        report = eval_dir / "report.html"
        seconds = time_view(eval_dir, report)
        mb = report.stat().st_size / 1e6
    print(f"eval directory: {records} tasks, traces {traces / 1e6:.1f} MB (made in {made:.1f} s)")
    print(
        f"verimap view: {seconds:.2f} s (goal <= {GOAL_S:.0f} s), report {mb:.1f} MB "
        f"(goal <= {GOAL_MB:.0f} MB)"
    )
    ok = seconds <= GOAL_S and mb <= GOAL_MB
    print("within goals" if ok else "OUTSIDE GOALS")
    return {"tasks": records, "seconds": seconds, "mb": mb}


if __name__ == "__main__":
    main()
