"""Model text cannot drive the terminal: the final report of `verimap run`, the eval's console
lines and the live view print it without its escape sequences. Nor can a task id or a model name
read from somebody else's files: the eval's progress line, its live board and `eval report`.

The payload is what a hostile reply would write: an OSC 52 clipboard write, an OSC 0 window
title, `ESC c` (a full terminal reset), a CSI screen clear and an 8-bit CSI. It goes in the
answer, in an error and in a verdict message."""

import dataclasses
import io
import json
import warnings
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from verimap.base import events as ev
from verimap.base.model import ModelError
from verimap.base.verdicts import VFVerdict
from verimap.cli import main
from verimap.cli import run as run_mod
from verimap.cli.run import print_result
from verimap.core.result import AttemptReport, NodeReport, RunResult
from verimap.evals.runner import run_eval
from verimap.evals.tasksets import GSM8K
from verimap.observe.live import LiveState
from verimap.observe.live_view import BoardView, render_run
from verimap.testing import InProcessSandboxDouble, ScriptedModel, ScriptedWorld, oracle_models

PAYLOAD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\x1b]0;pwned\x07\x1bc\x1b[2J\x9b2J"
# The same, as a Python string literal inside VF code.
PAYLOAD_LITERAL = PAYLOAD.encode("unicode_escape").decode()
SAMPLES = Path(__file__).resolve().parents[1] / "datasets"


def obeyed(raw: str) -> list[str]:
    """The pieces of the payload that reached the output as control sequences."""
    pieces = {
        "OSC": "\x1b]",
        "ESC c": "\x1bc",
        "BEL": "\x07",
        "CSI clear": "\x1b[2J",
        "8-bit CSI": "\x9b",
        "clipboard data": "Y3VybCBldmlsIHwgc2g=",
        "title": "pwned",
    }
    return [name for name, seq in pieces.items() if seq in raw]


def hostile_result() -> RunResult:
    verdict = VFVerdict(
        name=f"vf{PAYLOAD}", type="python", outcome="FAIL", message=f"bad {PAYLOAD}"
    )
    attempt = AttemptReport(iteration=1, attempt=1, error=f"boom {PAYLOAD}", verdicts=[verdict])
    return RunResult(
        run_id="r",
        task="t",
        status="partial",
        final_node="a",
        final_output={"answer": f"42 {PAYLOAD}"},
        nodes={"a": NodeReport(node_id="a", status="fail-accepted", attempts=[attempt])},
        error=f"node a: {PAYLOAD}",
        dropped_vfs=[f"v{PAYLOAD}"],
    )


def test_print_result_on_a_terminal_strips_the_payload_everywhere():
    console = Console(file=io.StringIO(), force_terminal=True, color_system="standard", width=200)
    print_result(hostile_result(), console=console)
    raw = console.file.getvalue()
    assert obeyed(raw) == []
    assert "42" in raw and "node a: " in raw and "boom" in raw
    assert "\x1b[1m" in raw  # verimap's own styling still reaches the terminal


def test_print_result_shows_markup_in_model_text_as_text():
    result = hostile_result()
    result.nodes["a"].attempts[0].verdicts[0].name = "[link=http://127.0.0.1/]x[/link]"
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    print_result(result, console=console)
    raw = console.file.getvalue()
    assert "[link=http://127.0.0.1/]x[/link]" in raw and "\x1b]8" not in raw


def cli(*args: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def models(monkeypatch):
    """Install the models `verimap run` and `verimap eval` get."""

    def install(found: dict) -> None:
        @asynccontextmanager
        async def connect(**endpoint):
            yield found

        monkeypatch.setattr(run_mod, "_connect", connect)
        monkeypatch.setattr("verimap.local.endpoint.connect", connect)

    return install


def test_verimap_run_prints_no_payload_from_the_answer_or_a_verdict(models, tmp_path):
    plan = {
        "nodes": [
            {
                "id": "a",
                "instruction": "answer",
                "inputs": ["USER_TASK"],
                "outputs": ["answer"],
                "verification": [
                    {
                        "name": "never",
                        "type": "python",
                        "code": f"assert outputs['answer'] == 'never', 'bad {PAYLOAD_LITERAL}'",
                    }
                ],
            }
        ]
    }
    world = ScriptedWorld([plan], lambda nid, k, inp, p: {"answer": f"42 {PAYLOAD}"})
    models(world.models())
    r = cli(
        "run",
        "t",
        "--max-nodes",
        "2",
        "--sandbox",
        "process",
        "--fail-accepted",
        "--max-attempts",
        "1",
        "--trace-dir",
        str(tmp_path),
    )
    assert r.exit_code == 0, r.output
    assert "42" in r.stdout and "vf never FAIL - bad" in r.stderr
    assert obeyed(r.stdout) == [] and obeyed(r.stderr) == []


def failing_model(message: str) -> dict:
    def fail(req):
        raise ModelError(message)

    m = ScriptedModel(fail, name="m")
    return {"planner": m, "executor": m, "judge": m}


def test_verimap_run_prints_no_payload_from_an_error(models, tmp_path):
    models(failing_model(f"the endpoint said {PAYLOAD}"))
    r = cli("run", "t", "--max-nodes", "2", "--sandbox", "process", "--trace-dir", str(tmp_path))
    assert r.exit_code == run_mod.EXIT_INFRA, r.output
    assert "the endpoint said" in r.stdout and obeyed(r.output) == []


def test_verimap_eval_prints_no_payload_from_an_error(models, tmp_path):
    models(failing_model(f"the endpoint said {PAYLOAD}"))
    r = cli(
        "eval",
        "-b",
        "gsm8k",
        "-n",
        "1",
        "--data-dir",
        str(SAMPLES),
        "-o",
        str(tmp_path / "o"),
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--sandbox",
        "process",
        "--quiet",
    )
    assert r.exit_code == 1, r.output
    assert "errored, not scored: model error: the endpoint said" in r.stderr
    assert obeyed(r.stdout) == [] and obeyed(r.stderr) == []


def test_the_live_view_strips_the_payload_with_the_same_filter():
    state = LiveState()
    for e in (
        ev.RunStart(run_id="r", task=f"t {PAYLOAD}"),
        ev.Plan(run_id="r", iteration=1, plan={"nodes": [{"id": "a"}]}),
        ev.VfVerdict(
            run_id="r",
            iteration=1,
            node_id="a",
            attempt=1,
            name="v",
            vf_type="python",
            outcome="FAIL",
            message=f"bad {PAYLOAD}",
        ),
        ev.Finish(run_id="r", status="failed", error=f"e {PAYLOAD}"),
    ):
        state.apply(e)
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    console.print(render_run(state))
    raw = console.file.getvalue()
    assert "bad" in raw and obeyed(raw) == []


def test_the_live_board_strips_the_payload_from_a_task_id():
    board = BoardView()
    key = f"r0/gsm8k/0{PAYLOAD}"
    board.start(key)
    board.apply(key, ev.Plan(run_id="r", iteration=1, plan={"nodes": [{"id": "a"}]}))
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    console.print(board)
    raw = console.file.getvalue()
    assert "r0/gsm8k/0" in raw and obeyed(raw) == []


class HostileIds(GSM8K):
    """The committed GSM8K sample, its first task under an id that carries the payload (as a
    benchmark made in Python may have it: the loaders refuse such ids in files)."""

    def tasks(self):
        first = super().tasks()[0]
        return [dataclasses.replace(first, id=f"gsm8k/0{PAYLOAD}")]


async def test_the_plain_progress_line_strips_the_payload_from_a_task_id(tmp_path, capsys):
    bench = HostileIds(SAMPLES)
    models = oracle_models(bench.tasks())
    await run_eval(bench, "verimap", models, InProcessSandboxDouble(), tmp_path / "o")
    err = capsys.readouterr().err
    assert "[1/1] r0/gsm8k/0" in err and obeyed(err) == []


def test_eval_report_prints_no_payload_from_a_foreign_config(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    models = {"planner": f"qwen\ntouch MARKER\n#{PAYLOAD}", "executor": f"m|{PAYLOAD}"}
    (d / "config.json").write_text(json.dumps({"benchmark": "gsm8k", "models": models}))
    rec = {
        "key": "r0/gsm8k/0",
        "run": 0,
        "task_id": "gsm8k/0",
        "benchmark": "gsm8k",
        "method": f"verimap{PAYLOAD}",
        "correct": True,
        "verified": True,
    }
    (d / "results.jsonl").write_text(json.dumps(rec) + "\n")
    r = cli("eval", "report", str(d), "--out-file", str(tmp_path / "report.md"))
    assert r.exit_code == 0, r.output
    written = (tmp_path / "report.md").read_text()
    for text in (r.stdout, written):
        # Spelled out, so the payload's text stays but none of its controls do.
        assert r"planner=qwen\ntouch MARKER\n#\x1b]52;c;" in text
        assert (
            not any(c in text for c in "\x1b\x07\x9b") and "touch MARKER" not in text.splitlines()
        )
