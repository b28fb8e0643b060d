"""The live view, fed with the events of real Coordinator runs on scripted models."""

import io

from rich.console import Console
from rich.style import Style

import verimap
from verimap.base.accounting import Budget
from verimap.base.events import CrossCheck, Event, Plan
from verimap.config import Loop, RunConfig
from verimap.observe.live import LiveState, PlainLog, TaskBoard, clean, plain_line
from verimap.observe.live_view import BoardView, narrate, render_board, render_run
from verimap.testing import InProcessSandboxDouble, ScriptedWorld

# A VF message a model could have written: an escape sequence and rich markup.
HOSTILE = "\\x1b[2J\\x1b[31mred [bold]loud[/bold]"


def node(id, inputs=("USER_TASK",), outputs=("x",), vfs=(), instruction=None):
    return {
        "id": id,
        "instruction": instruction or f"do {id}",
        "inputs": list(inputs),
        "outputs": list(outputs),
        "verification": list(vfs),
    }


def pos(var, extra=""):
    code = f"assert outputs['{var}'] > 0, '{var} must be positive{extra}'"
    return {"name": f"{var}_pos", "type": "python", "code": code}


CHAIN = {"nodes": [node("a", vfs=[pos("x")]), node("b", ["a.x"], ["y"], [pos("y", HOSTILE)])]}
FIXED = {
    "nodes": [
        CHAIN["nodes"][0],
        node("b", ["a.x"], ["y"], [pos("y", HOSTILE)], instruction="do b better"),
    ]
}


async def run(world, config=None):
    """The run's result and every event it emitted, in order."""
    seen: list[Event] = []
    bus = verimap.EventBus()
    bus.subscribe(seen.append)
    coordinator = verimap.build(
        world.models(), InProcessSandboxDouble(), config=config or RunConfig(), events=bus
    )
    result = await coordinator.run("task")
    assert not bus.errors
    return result, seen


def replayed(events, stop=lambda e, i: False):
    """A state fed `events` up to and including the first one `stop` accepts."""
    state = LiveState()
    for i, e in enumerate(events):
        state.apply(e)
        if stop(e, i):
            break
    return state


def nth(events, type_, k=0, node_id=None):
    """The index of the k-th event of `type_` (for `node_id`)."""
    hits = [i for i, e in enumerate(events) if e.type == type_ and node_id in (None, e.node_id)]
    return hits[k]


def replan_world():
    """b fails both attempts of iteration 1; the replan changes b only, so a is reused; b's
    new version fails once more and then passes."""

    def outputs(nid, k, inp, prompt):
        if nid == "a":
            return {"x": 5}
        return {"y": 7 if "better" in prompt and k >= 3 else -1}

    return ScriptedWorld([CHAIN, FIXED], outputs)


def terminal(width=100):
    return Console(
        file=io.StringIO(), force_terminal=True, color_system="standard", width=width, record=True
    )


async def test_statuses_through_retries_a_replan_and_a_reused_node():
    result, events = await run(replan_world(), RunConfig(loop=Loop(max_retries=2)))
    assert result.status == "success" and result.iterations == 2

    s = replayed(events[: nth(events, "retry", 0) + 1])
    assert (s.iteration, s.phase) == (1, "running")
    assert s.nodes["a"].status == "verified" and s.nodes["b"].label == "retry 1"
    assert s.nodes["b"].attempt == 2 and "y must be positive" in s.nodes["b"].verdict

    s = replayed(events[: nth(events, "replan") + 1])
    assert (s.phase, s.replans) == ("replanning", 1) and "'b' failed" in s.note
    assert {k: n.label for k, n in s.nodes.items()} == {"a": "verified", "b": "failed"}

    s = replayed(events[: nth(events, "plan", 1) + 1])
    assert s.iteration == 2 and {n.label for n in s.nodes.values()} == {"pending"}

    s = replayed(events[: nth(events, "node_reused") + 1])
    assert s.nodes["a"].label == "reused" and s.nodes["b"].label == "pending"

    s = replayed(events[: nth(events, "retry", 1) + 1])
    assert s.iteration == 2 and s.nodes["b"].label == "retry 1"

    s = replayed(events)
    assert s.finished and s.phase == "success" and s.iteration == result.iterations
    assert (
        {k: n.status for k, n in s.nodes.items()}
        == {k: r.status for k, r in result.nodes.items()}
        == {"a": "reused", "b": "verified"}
    )
    assert s.retries == result.retries == 2 and s.nodes["b"].attempt == 2
    assert s.nodes["b"].verdict == "#2 y_pos PASS"


async def test_a_failed_run_marks_the_nodes_it_never_reached_skipped():
    world = ScriptedWorld([CHAIN], lambda nid, k, inp, p: {"x": -1})
    result, events = await run(world, RunConfig(loop=Loop(max_retries=3, max_iterations=1)))
    s = replayed(events)
    assert result.status == s.phase == "failed" and "'a' failed verification" in s.note
    assert {k: n.label for k, n in s.nodes.items()} == {"a": "failed", "b": "skipped"}
    assert s.nodes["a"].attempt == 3 and s.retries == 2
    assert s.nodes["a"].verdict == "#3 x_pos FAIL: x must be positive"


async def test_a_kept_plan_starts_the_next_iteration_and_reuses_what_passed():
    typed = {"nodes": [CHAIN["nodes"][0], {**CHAIN["nodes"][1], "outputs": {"y": "number"}}]}

    def outputs(nid, k, inp, prompt):
        if nid == "a":
            return {"x": 5}
        # No number until the kept plan's retry: the executor failed, no VF did.
        return {"y": 4} if "This is a retry" in prompt else {"y": "a lot"}

    result, events = await run(ScriptedWorld([typed], outputs), RunConfig(loop=Loop(max_retries=1)))
    s = replayed(events[: nth(events, "plan_kept") + 1])
    assert s.nodes["b"].label == "failed" and s.nodes["b"].verdict.startswith("#1 error:")
    assert "plan kept" in s.note and not s.nodes["b"].verdict_passed
    s = replayed(events)
    assert result.status == s.phase == "success" and s.iteration == 2
    assert {k: n.label for k, n in s.nodes.items()} == {"a": "reused", "b": "verified"}


async def test_a_node_cut_short_by_the_budget_is_stopped():
    world = ScriptedWorld([CHAIN], lambda nid, k, inp, p: {"x": 1}, latency_s=0.2)
    result, events = await run(world, RunConfig(budget=Budget(timeout_s=0.3)))
    s = replayed(events)
    assert result.status == s.phase == "budget_exhausted" and "wall-clock" in s.note
    assert {k: n.label for k, n in s.nodes.items()} == {"a": "stopped", "b": "skipped"}


async def test_hostile_text_is_shown_not_obeyed():
    _, events = await run(replan_world(), RunConfig(loop=Loop(max_retries=2)))
    s = replayed(events[: nth(events, "retry", 0) + 1])
    verdict = s.nodes["b"].verdict
    assert "\x1b" not in verdict and "[bold]loud[/bold]" in verdict
    console = terminal(width=140)
    console.print(render_run(s))
    assert "[bold]loud[/bold]" in console.export_text()  # markup printed as text
    assert "\x1b[2J" not in console.file.getvalue()
    out = io.StringIO()
    log = PlainLog(out)
    for e in events:
        log(e)
    text = out.getvalue()
    assert "b #1: vf y_pos FAIL - y must be positive" in text and "b: retry 1" in text
    assert not any(c < " " and c != "\n" for c in text), "control characters in the plain log"
    # Whole sequences go, not just their ESC: no "[31m" left to read.
    assert clean("a\x1b[31m\n\tb\x9bc", 100) == "a b"


async def test_render_run_on_a_terminal():
    _, events = await run(replan_world(), RunConfig(loop=Loop(max_retries=2)))
    s = replayed(events[: nth(events, "retry", 1) + 1])
    console = terminal()
    console.print(render_run(s))
    text = console.export_text()
    for part in (
        "iteration 2",
        "running",
        "retries 2",
        "replans 1",
        "reused",
        "retry 1",
        "y_pos FAIL",
        "replanned after node 'b' failed",
        "verified before",
    ):
        assert part in text, part
    assert "\x1b[" in console.file.getvalue()
    styles = {
        seg.text.strip(): seg.style for seg in console.render(render_run(s)) if seg.text.strip()
    }
    assert styles["retry 1"] == Style.parse("bold yellow")
    assert styles["reused"] == Style.parse("blue")


async def test_the_board_shows_the_most_recent_tasks_in_flight():
    runs = [await run(replan_world(), RunConfig(loop=Loop(max_retries=2))) for _ in range(3)]
    view = BoardView(limit=2)
    painted = []
    view.repaint_s, view.repaint = 0.0, lambda: painted.append(1)
    for i, (_, events) in enumerate(runs):
        view.start(f"r0/t{i}")
        for e in events[: nth(events, "retry", i % 2) + 1]:
            view.apply(f"r0/t{i}", e)
    assert painted and list(view.board.tasks) == ["r0/t0", "r0/t1", "r0/t2"]
    console = terminal(width=140)
    console.print(view)
    text = console.export_text()
    assert "r0/t0" not in text and "r0/t1" in text and "r0/t2" in text
    assert "+1 more task(s) in flight" in text and text.count("retry 1") == 2
    view.done("r0/t2")
    console = terminal(width=140)
    console.print(view)
    text = console.export_text()
    assert "r0/t0" in text and "r0/t2" not in text and "more task" not in text


def test_task_board_bounds():
    board = TaskBoard()
    assert board.shown(3) == ([], 0)
    for k in "abcde":
        board.start(k)
    shown, hidden = board.shown(3)
    assert [k for k, _ in shown] == ["c", "d", "e"] and hidden == 2
    board.done("d")
    assert [k for k, _ in board.shown(3)[0]] == ["b", "c", "e"]
    console = terminal()
    console.print(render_board(board, 2))
    assert "starting" in console.export_text()


async def test_narrate_draws_on_a_terminal_and_logs_plain_lines_elsewhere(capsys):
    console = terminal()
    bus = verimap.EventBus()
    with narrate(bus, console=console):
        await verimap.build(
            replan_world().models(),
            InProcessSandboxDouble(),
            config=RunConfig(loop=Loop(max_retries=2)),
            events=bus,
        ).run("task")
    drawn = console.file.getvalue()
    assert "\x1b[" in drawn and "retry 1" in drawn and "reused" in drawn and "success" in drawn
    assert capsys.readouterr().err == "" and not bus.errors

    bus = verimap.EventBus()
    with narrate(bus, console=Console(file=io.StringIO())):
        await verimap.build(
            replan_world().models(),
            InProcessSandboxDouble(),
            config=RunConfig(loop=Loop(max_retries=2)),
            events=bus,
        ).run("task")
    err = capsys.readouterr().err
    assert "[it 2] a: reused (verified before, unchanged)" in err and "[it 2] b: retry 1" in err
    assert "\x1b" not in err

    bus = verimap.EventBus()
    with narrate(bus, quiet=True, console=console):
        bus.emit(Plan(run_id="r", plan={"nodes": [{"id": "a"}]}))
    assert capsys.readouterr().err == "" and plain_line(Event(type="x", run_id="r")) is None


def test_the_independent_solution_gets_a_line_with_its_number_or_its_error():
    def line(**data):
        return plain_line(CrossCheck(run_id="r", node_id="solve", attempt=1, iteration=1, **data))

    assert line(kind="program", answer=391.0).endswith("solve #1: independent program: 391.0")
    failed = line(kind="program", answer=None, error="ERROR: NameError: name 'x' is not defined")
    assert "independent program: ERROR: NameError" in failed
