"""Eval directories made by the real runner on scripted models, and a hostile one.

The hostile run writes markup, CDATA ends, comment openers and a huge output
into every place a model's text reaches a trace: node names and instructions,
outputs, VF messages and tracebacks, judge critiques. The page must show all of
it as text.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import warnings
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import verimap
from verimap.config import Loop, RunConfig, Verify
from verimap.evals.runner import RESULTS, run_eval
from verimap.evals.tasksets import get_benchmark
from verimap.testing import InProcessSandboxDouble, ScriptedWorld, need, oracle_models

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "datasets"

PWN = "<script>window.pwned=1</script>"
HOSTILE = f'{PWN}"];\n]]></textarea><!-- <img src=x onerror="window.pwned=2"> &amp; \\N'
HUGE = 60_000


def need_dot() -> None:
    need(
        shutil.which("dot") is not None, "Graphviz dot is not installed (apt-get install graphviz)"
    )


def _hostile_plans() -> list[dict[str, Any]]:
    extract = {
        "id": "extract",
        "name": HOSTILE,
        "instruction": f"Extract the count. {HOSTILE}",
        "inputs": ["USER_TASK"],
        "outputs": {"n": "number"},
        "verification": [
            {"name": "positive", "type": "python", "code": f"assert outputs['n'] > 0, {HOSTILE!r}"},
            {"name": "judged", "type": "llm", "content": f"The count is right. {HOSTILE}"},
        ],
    }

    def answer(instruction: str) -> dict[str, Any]:
        return {
            "id": "answer",
            "name": "Answer",
            "instruction": instruction,
            "inputs": ["extract.n"],
            "outputs": {"answer": "string"},
            "verification": [
                {
                    "name": "short",
                    "type": "python",
                    "code": "assert len(outputs['answer']) < 50, 'too long ]]>'",
                }
            ],
        }

    return [
        {"nodes": [extract, answer("Give the answer.")]},
        {"nodes": [extract, answer("Give the answer, briefly.")]},
    ]


def _hostile_outputs(node_id: str, k: int, inputs: dict, prompt: str) -> dict[str, Any]:
    if node_id == "extract":
        return {"n": -1 if k == 0 else 3}
    if "briefly" in prompt:
        return {"answer": "42"}
    return {"answer": HOSTILE + "A" * HUGE}


async def _hostile_solve(task: Any, run: int, trace_path: Path) -> Any:
    world = ScriptedWorld(
        _hostile_plans(), _hostile_outputs, lambda nid, crit, outs: (True, f"fine. {HOSTILE}")
    )
    config = RunConfig(
        loop=Loop(max_retries=2, max_iterations=3), verify=Verify(vacuity_check=False)
    )
    coordinator = verimap.build(world.models(), InProcessSandboxDouble(), config=config)
    return await coordinator.run(task.prompt, trace_path=trace_path)


@pytest.fixture(scope="session")
def oracle_dirs(tmp_path_factory) -> list[Path]:
    """verimap and react on 6 GSM8K samples, every third answer wrong."""
    from verimap.sandbox.process import ProcessSandbox

    root = tmp_path_factory.mktemp("evals")
    bench = get_benchmark("gsm8k", SAMPLES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sandbox = ProcessSandbox()
    dirs = []
    for method in ("verimap", "react"):
        out = root / method
        models = oracle_models(bench.tasks(), wrong_every=3)
        asyncio.run(run_eval(bench, method, models, sandbox, out, limit=6, progress=False))
        dirs.append(out)
    return dirs


@pytest.fixture(scope="session")
def hostile_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "verimap"
    bench = get_benchmark("gsm8k", SAMPLES)
    asyncio.run(
        run_eval(
            bench,
            "verimap",
            None,
            InProcessSandboxDouble(),
            out,
            limit=2,
            progress=False,
            solver=_hostile_solve,
        )
    )
    return out


@pytest.fixture(scope="session")
def report_file(tmp_path_factory, oracle_dirs, hostile_dir) -> Path:
    from verimap.view import write_report

    need_dot()
    return write_report(
        [*oracle_dirs, hostile_dir], tmp_path_factory.mktemp("report") / "report.html"
    )


def records(d: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (d / RESULTS).read_text().splitlines() if x.strip()]


def events(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in trace.read_text().splitlines() if x.strip()]


class Page(HTMLParser):
    """Start tags with their attributes and the text, as a browser's parser sees them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._script = False
        self.scripts: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._script = tag == "script"
        if self._script:
            self.scripts.append("")

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = False

    def handle_data(self, data):
        if self._script:
            self.scripts[-1] += data
        else:
            self.text.append(data)

    def all(self, tag: str, **attrs: str) -> list[dict[str, str | None]]:
        return [
            a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())
        ]

    @property
    def body_text(self) -> str:
        return "".join(self.text)
