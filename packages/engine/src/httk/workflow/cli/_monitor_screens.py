"""What the monitor watches, and its two other screens: one job (show, log, why), and a confirmation.

A :class:`Watched` is one workspace under watch: its counting monitor, its filter and page, its last
snapshot, and the lock that keeps one worker thread at a time on it.

The job screen reads the job where it is now (``engine/ops/_monitor.job_detail``: a probe of its
placement, then what ``job show``, ``job log --limit`` and ``job why`` read) in a worker thread, once
at opening and again at every refresh interval, and draws it with the text those commands print. The
confirmation names the action, the job and the state and generation the request will be published
against, and asks for the reason the journal records (and the priority of a set_priority); nothing is
published unless it is confirmed.

Like ``cli/_monitor_app.py`` this module imports textual at the top and is loaded only by the command.
"""

from __future__ import annotations

import threading
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from httk.workflow.engine import JobDetail, JobQuery, KeySigner, Monitor, MonitorSnapshot, job_detail
from httk.workflow.protocol import InvalidNameError, WorkflowError, validate_priority
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.message_pump import MessagePump
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Header, Input, Label, Static, TabbedContent, TabPane

from . import _inspect_render as render

if TYPE_CHECKING:
    from httk.workflow.engine import MarkerLocation, Position, Workspace

LOG_LIMIT = 200
"""The newest transitions the log tab shows (``job log --limit``)."""

ACTION_WORDS = {
    "continue": "continue (retry the current activation of)",
    "cancel": "cancel",
    "pause": "pause",
    "set_priority": "set the priority of",
}


@dataclass(frozen=True)
class MonitorSettings:
    """What the command line chose: refresh interval, counting budget, columns, page, and requests."""

    interval: float
    budget: int
    depth: int
    page_size: int
    operator: str
    durable: bool | None
    signer: KeySigner | None = None
    """Signs the requests (``job request``'s signer: the user's operator identity), or None."""


class Watched:
    """One watched workspace: its monitor, filter and page, its last snapshot, and what was said last."""

    def __init__(self, workspace: Workspace, settings: MonitorSettings) -> None:
        self.workspace = workspace
        self.monitor = Monitor(workspace, budget=settings.budget, depth=settings.depth)
        self.query = JobQuery(limit=settings.page_size)
        self.earlier_pages: list[Position | None] = []  # the cursors of the pages before this one
        self.snapshot: MonitorSnapshot | None = None
        self.refreshed_at: float | None = None
        self.error: str | None = None
        self.said: str | None = None  # the outcome of the last request, kept on the summary
        # Invariant: a thread uses the workspace and its monitor only while holding this lock.
        self.lock = threading.Lock()
        self._writer: Workspace | None = None
        self._durable = settings.durable

    @property
    def title(self) -> str:
        return self.workspace.name or self.workspace.root.name

    def writer(self) -> Workspace:
        """The workspace attached writable, on the first request only (reading never needs it)."""
        if self._writer is None:
            from httk.workflow.engine import attach

            self._writer = attach(self.workspace.root, durable=self._durable)
        return self._writer

    def close(self) -> None:
        self.monitor.close()
        if self._writer is not None:
            self._writer.close()


def hand_back(receiver: MessagePump, message: Message) -> None:
    """Post a worker's result to ``receiver`` from the worker's thread, without waiting; a receiver
    already closed (the screen left, the application gone) drops it."""
    with suppress(RuntimeError):  # the event loop is already closed: nobody is left to show it
        receiver.post_message(message)


class JobScreen(Screen[None]):
    """One job: ``1`` show, ``2`` log, ``3`` why; Escape goes back. The request keys act on this job."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("1", "tab('show')", "show"),
        Binding("2", "tab('log')", "log"),
        Binding("3", "tab('why')", "why"),
    ]
    CSS = """
    #job-title, #job-said { height: auto; padding: 0 1; }
    JobScreen TabbedContent, JobScreen TabPane, JobScreen VerticalScroll { height: 1fr; }
    JobScreen TabPane { padding: 0; }
    JobScreen VerticalScroll Static { padding: 0 1; }
    """

    def __init__(self, watched: Watched, marker: MarkerLocation, interval: float) -> None:
        super().__init__()
        self.watched = watched
        self.marker = marker  # where the job is now, as the last reading found it
        self.interval = interval
        self.gone = False

    def compose(self) -> ComposeResult:
        yield Header(show_clock=True)
        yield Static(self._title(), id="job-title")
        yield Static("", id="job-said")
        with TabbedContent(initial="show"):
            for name in ("show", "log", "why"):
                with TabPane(name, id=name), VerticalScroll():
                    yield Static("reading ...", id=f"{name}-text", markup=False)  # a runner's text
        yield Footer()

    def on_mount(self) -> None:
        self.reload()
        self.set_interval(self.interval, self.reload)

    def tell(self, said: str) -> None:
        """Show what came of the last request, under the title."""
        self.query_one("#job-said", Static).update(said)

    def action_tab(self, name: str) -> None:
        self.query_one(TabbedContent).active = name

    def reload(self) -> None:
        self.app.run_worker(self._read, thread=True, exit_on_error=False, group="monitor")

    def _read(self) -> None:
        """In a worker thread: the job as it is now, or why it cannot be read."""
        marker = self.marker
        try:
            with self.watched.lock:
                detail = job_detail(
                    self.watched.workspace, marker.placement, marker.job_key, log_limit=LOG_LIMIT
                )
            problem = None
        except (WorkflowError, OSError) as exc:
            detail, problem = None, str(exc)
        hand_back(self, self.Read(detail, problem))

    class Read(Message):
        """The job as a worker read it, or why it could not."""

        def __init__(self, detail: JobDetail | None, problem: str | None) -> None:
            super().__init__()
            self.detail, self.problem = detail, problem

    def on_job_screen_read(self, message: Read) -> None:
        detail, problem = message.detail, message.problem
        if problem is not None:
            self._fill(f"error: {problem}")
            return
        if detail is None:
            self.gone = True
            self._fill(f"job {self.marker.job_key} is no longer at placement {self.marker.placement}")
            return
        self.marker, self.gone = detail.marker, False
        self.query_one("#job-title", Static).update(self._title())
        self.query_one("#show-text", Static).update("\n".join(render.show_lines(detail.show)))
        log = [render.log_line(entry) for entry in detail.log] or ["no transition yet"]
        self.query_one("#log-text", Static).update("\n".join(log))
        self.query_one("#why-text", Static).update("\n".join(detail.why.lines()))

    def _fill(self, text: str) -> None:
        for name in ("show", "log", "why"):
            self.query_one(f"#{name}-text", Static).update(text)

    def _title(self) -> str:
        marker = self.marker
        return (
            f"job {marker.job_key}: {marker.kind.value} at {marker.placement} "
            f"(generation {marker.name.generation}) in {self.watched.title}"
        )


@dataclass(frozen=True)
class Confirmation:
    """What the operator confirmed: the action, the reason for the journal, and a set_priority's value."""

    action: str
    reason: str
    priority: int | None = None


class ConfirmScreen(ModalScreen["Confirmation | None"]):
    """Ask before publishing: Enter (or the button) confirms, Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]
    CSS = """
    ConfirmScreen { align: center middle; }
    #confirm-box { width: 90%; max-width: 110; height: auto; border: thick $warning; padding: 1 2;
                   background: $surface; }
    #confirm-box Input { margin-top: 1; }
    #confirm-buttons { height: auto; margin-top: 1; }
    """

    def __init__(self, action: str, marker: MarkerLocation) -> None:
        super().__init__()
        self.action = action
        self.marker = marker

    def compose(self) -> ComposeResult:
        marker = self.marker
        question = (
            f"Really {ACTION_WORDS.get(self.action, self.action)} the job\n  {marker.job_key}?\n"
            f"It was {marker.kind.value} at {marker.placement}, generation {marker.name.generation}. The "
            "request is published against its marker as it is when you confirm, and a manager applies "
            "it only if the job has not moved since."
        )
        with Vertical(id="confirm-box"):
            yield Label(question, id="question")
            if self.action == "set_priority":
                yield Input(placeholder="priority: 0 (highest) to 999", id="priority", type="integer")
            yield Input(placeholder="reason, for the journal (may be empty)", id="reason")
            yield Label("Enter confirms, Escape cancels.")
            with Horizontal(id="confirm-buttons"):
                yield Button("confirm", variant="warning", id="confirm")
                yield Button("cancel", id="cancel")

    def on_mount(self) -> None:
        first = "#priority" if self.action == "set_priority" else "#reason"
        self.query_one(first, Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "priority":
            self.query_one("#reason", Input).focus()
        else:
            self._confirm()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "confirm":
            self._confirm()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def _confirm(self) -> None:
        priority = None
        if self.action == "set_priority":
            text = self.query_one("#priority", Input).value.strip()
            try:
                priority = validate_priority(int(text))
            except (ValueError, InvalidNameError):
                self.notify(f"the priority must be an integer from 0 to 999, not {text!r}", severity="error")
                self.query_one("#priority", Input).focus()
                return
        self.dismiss(Confirmation(self.action, self.query_one("#reason", Input).value, priority))
