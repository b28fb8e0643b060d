"""The live view drawn with rich: a run's plan DAG while it runs, and the eval tasks in flight.

The state comes from `verimap.observe.live`; this module only draws it. Rich refreshes from a
thread of its own while the event loop applies events, so each view holds a lock that both
sides take. Every model-written text goes in as a `Text`, never as markup, so a VF message
holding `[red]` is shown, not obeyed, and after `live.clean`, so an escape sequence in it is
dropped, not sent to the terminal.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from verimap.base.events import AnyEvent, EventBus
from verimap.observe.live import EXECUTING, LiveState, PlainLog, TaskBoard, clean

STATUS_STYLE = {
    "pending": "dim",
    "running": "bold cyan",
    "retry": "bold yellow",
    "verified": "green",
    "reused": "blue",
    "fail-accepted": "dark_orange",
    "unconfirmed": "yellow",
    "failed": "bold red",
    "skipped": "dim",
    "stopped": "dim",
}
PHASE_STYLE = {"success": "bold green", "partial": "bold yellow"}
# Final phases that are not success or partial: failed, budget_exhausted.
_BAD_PHASE = "bold red"


def stderr_console() -> Console:
    """The console the live view draws on (tests replace it with a recording one)."""
    return Console(stderr=True)


def is_live(console: Console) -> bool:
    """Whether `console` can redraw in place: a terminal that is not dumb."""
    return console.is_terminal and not console.is_dumb_terminal


def _phase(state: LiveState) -> Text:
    style = PHASE_STYLE.get(state.phase, _BAD_PHASE) if state.finished else "bold"
    return Text(state.phase, style=style)


def _elapsed(state: LiveState) -> str:
    if state.started is None:
        return ""
    return f"{(state.ended or time.time()) - state.started:.0f}s"


def _status(node_status: str, label: str) -> Text:
    return Text(label, style=STATUS_STYLE.get(node_status, ""))


def render_run(state: LiveState) -> RenderableType:
    """One run: a header line, then a row per node of the current plan."""
    head = Text.assemble(
        ("verimap ", "bold"),
        f"iteration {state.iteration or '-'} · ",
        _phase(state),
        f" · {_elapsed(state)}" if state.started is not None else "",
        f" · retries {state.retries}" if state.retries else "",
        f" · replans {state.replans}" if state.replans else "",
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    table.add_column("node", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("att", justify="right", no_wrap=True)
    table.add_column("last verdict", no_wrap=True, overflow="ellipsis", max_width=100)
    for n in state.nodes.values():
        table.add_row(
            Text(clean(n.id, 60)),
            _status(n.status, n.label),
            str(n.attempt or "-"),
            Text(n.verdict or "", style="dim" if n.verdict_passed else "red"),
        )
    parts: list[RenderableType] = [head]
    if state.nodes:
        parts.append(table)
    if state.note:
        parts.append(Text(state.note, style="italic"))
    return Group(*parts)


def render_board(board: TaskBoard, limit: int, max_nodes: int = 8) -> RenderableType:
    """The `limit` most recent eval tasks in flight, a row per node of each one's plan."""
    shown, hidden = board.shown(limit)
    if not shown:
        return Group()
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left")
    for col in ("task", "it", "node", "status", "att"):
        table.add_column(col, no_wrap=True)
    table.add_column("last verdict", no_wrap=True, overflow="ellipsis", max_width=80)
    for key, st in shown:
        task = Text(clean(key, 60), style="bold")
        if st.nodes and st.phase != EXECUTING:  # replanning, or done and about to leave
            task.append(f" {st.phase}", style=PHASE_STYLE.get(st.phase, "italic"))
        if not st.nodes:
            table.add_row(task, str(st.iteration or "-"), "", _phase(st), "", Text(st.note))
            continue
        nodes = list(st.nodes.values())
        for i, n in enumerate(nodes[:max_nodes]):
            table.add_row(
                task if i == 0 else "",
                str(st.iteration or "-") if i == 0 else "",
                Text(clean(n.id, 60)),
                _status(n.status, n.label),
                str(n.attempt or "-"),
                Text(n.verdict, style="dim" if n.verdict_passed else "red"),
            )
        if len(nodes) > max_nodes:
            table.add_row("", "", Text(f"+{len(nodes) - max_nodes} nodes", style="dim"))
    parts: list[RenderableType] = [table]
    if hidden:
        parts.append(Text(f"+{hidden} more task(s) in flight", style="dim"))
    return Group(*parts)


class RunView:
    """A run's `LiveState` behind a lock: an event subscriber and a rich renderable."""

    def __init__(self) -> None:
        self.state = LiveState()
        self._lock = threading.Lock()

    def __call__(self, event: AnyEvent) -> None:
        with self._lock:
            self.state.apply(event)

    def __rich__(self) -> RenderableType:
        with self._lock:
            return render_run(self.state)


class BoardView:
    """A `TaskBoard` behind a lock, repainted at most every `repaint_s` after a change (rich's
    own refresh catches what a skipped repaint left out)."""

    repaint_s = 0.1

    def __init__(self, limit: int = 4) -> None:
        self.board = TaskBoard()
        self.limit = limit
        self.repaint: Any = None  # set to the display's refresh once it runs
        self._lock = threading.Lock()
        self._painted = 0.0

    def start(self, key: str) -> None:
        with self._lock:
            self.board.start(key)
        self._changed()

    def done(self, key: str) -> None:
        with self._lock:
            self.board.done(key)
        self._changed()

    def bus(self, key: str) -> EventBus:
        """An event bus for the run of task `key`."""
        bus = EventBus()
        bus.subscribe(lambda e: self.apply(key, e))
        return bus

    def apply(self, key: str, event: AnyEvent) -> None:
        with self._lock:
            self.board.apply(key, event)
        self._changed()

    def _changed(self) -> None:
        now = time.monotonic()
        if self.repaint is not None and now - self._painted >= self.repaint_s:
            self._painted = now
            self.repaint()

    def __rich__(self) -> RenderableType:
        with self._lock:
            return render_board(self.board, self.limit)


class BoardProgress(Progress):
    """The eval's progress bar with the tasks in flight drawn under it, in the same display."""

    def __init__(self, *columns: Any, board: BoardView | None = None, **kw: Any) -> None:
        self.board = board  # before Progress.__init__, which renders once
        super().__init__(*columns, **kw)
        if board is not None:
            board.repaint = self.refresh

    def get_renderables(self) -> Iterator[RenderableType]:
        yield from super().get_renderables()
        if self.board is not None:
            yield self.board


@contextmanager
def _notes_through(console: Console) -> Iterator[None]:
    """verimap's log notes (a local model server starting, say) go through the live display's
    redirected stderr while it runs, so they print above it instead of tearing it."""
    moved = {
        h: h.stream
        for h in logging.getLogger("verimap").handlers
        if isinstance(h, logging.StreamHandler) and h.stream is console.file
    }
    for h in moved:
        h.setStream(sys.stderr)
    try:
        yield
    finally:
        for h, stream in moved.items():
            h.setStream(stream)


@contextmanager
def narrate(
    events: EventBus, *, quiet: bool = False, console: Console | None = None
) -> Iterator[None]:
    """Tell the run on `events` while the block runs: a live view when stderr is a terminal,
    a plain line log when it is not, nothing when `quiet`."""
    if quiet:
        yield
        return
    console = console or stderr_console()
    if not is_live(console):
        unsubscribe = events.subscribe(PlainLog())
        try:
            yield
        finally:
            unsubscribe()
        return
    view = RunView()
    # Transient: the verdict table printed after the run says the same, once.
    with Live(
        view, console=console, transient=True, refresh_per_second=4, redirect_stdout=False
    ) as live:

        def show(event: AnyEvent) -> None:
            view(event)
            live.refresh()

        unsubscribe = events.subscribe(show)
        try:
            with _notes_through(console):
                yield
        finally:
            unsubscribe()
