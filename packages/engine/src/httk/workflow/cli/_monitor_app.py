"""The textual application of ``httk workflow monitor`` (the command is ``cli/_monitor_cmd.py``).

The dashboard shows, for the workspace being watched, a summary line, the counts per state kind and
placement prefix, the managers with their heartbeats, a filter and one page of jobs. Enter opens a
job (``cli/_monitor_screens.py``: its show, log and why). The request keys — ``c`` continue, ``x``
cancel, ``p`` pause, ``i`` priority — act on the job the cursor is on (or the job open), always
behind a confirmation, and publish through ``requests._requests.publish_request``, exactly as ``job
request`` does: against the job's current marker, so a manager applies it only if the job has not
moved since.

A count is shown as it came from ``engine/ops/_monitor.py``: a plain number is exact, ``~N`` is sampled
(counted over several refreshes; the summary says how old), ``>=N`` is partial (a kind's first count
is not finished yet).

Threads. Every read of a workspace and every publication runs in a thread worker, so the screen
answers keys while a refresh walks a large workspace. One worker at a time uses a workspace: a
refresh tick that finds the previous refresh still running is skipped, never overlapped, because a
monitor's counting streams serve one caller. Widgets are touched only on the event loop: a worker
hands its result back as a message (``post_message`` is safe from any thread and never waits), so a
worker finishing while the application shuts down cannot block it.

This module imports textual at the top: it is itself imported only inside the command's body.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from httk.workflow.engine import Certainty, JobQuery, MonitorSnapshot
from httk.workflow.protocol import InvalidNameError, WorkflowError
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable, Footer, Header, Input, Static

from ._monitor_screens import Confirmation, ConfirmScreen, JobScreen, MonitorSettings, Watched, hand_back

if TYPE_CHECKING:
    from httk.workflow.engine import MarkerLocation, Workspace

FILTER_HELP = "filter: kind:K[,K] tag:TEXT placement:P (/ edits it; empty shows every job)"
EDITING = "editing the filter: Enter applies it, Escape goes back to the jobs"
SAMPLED, PARTIAL = "~", ">="
DASHBOARD_ONLY = frozenset({"edit_filter", "leave_filter", "page", "next_workspace"})
MANAGER_ROWS = 20


def parse_filter(text: str, *, limit: int) -> JobQuery:
    """``kind:K[,K] tag:TEXT placement:P`` (a bare word is a tag) as a checked query of ``limit`` jobs."""
    kinds: list[str] = []
    tag: str | None = None
    placement: str | None = None
    for word in text.split():
        key, colon, value = word.partition(":")
        if not colon:
            tag = word
        elif key == "kind":
            kinds.extend(name for name in value.split(",") if name)
        elif key == "tag":
            tag = value
        elif key == "placement":
            placement = value
        else:
            raise InvalidNameError("filter", word, "is not kind:K, tag:TEXT or placement:P")
    return JobQuery.of(kinds, tag_contains=tag, placement=placement, limit=limit)


def filter_text(query: JobQuery) -> str:
    """The filter ``query`` came from, as the user would type it."""
    words = [f"kind:{','.join(kind.value for kind in query.kinds)}"] if query.kinds else []
    if query.tag_contains is not None:
        words.append(f"tag:{query.tag_contains}")
    if query.placement is not None:
        words.append(f"placement:{query.placement}")
    return " ".join(words)


def count_text(certainty: Certainty, value: int) -> str:
    """A number as certain as the count it belongs to: ``N``, ``~N`` (sampled) or ``>=N`` (partial)."""
    mark = {Certainty.EXACT: "", Certainty.SAMPLED: SAMPLED, Certainty.PARTIAL: PARTIAL}[certainty]
    return f"{mark}{value}"


def certainty_line(snapshot: MonitorSnapshot) -> str:
    """What the summary says of the counts: exact, or which are sampled or partial and how old."""
    sampled = [count for count in snapshot.counts if count.certainty is Certainty.SAMPLED]
    partial = [count for count in snapshot.counts if count.certainty is Certainty.PARTIAL]
    if not sampled and not partial:
        return "counts exact"
    parts = []
    if sampled:
        oldest = max(count.age_seconds for count in sampled)
        names = ", ".join(count.kind.value for count in sampled)
        parts.append(
            f"{SAMPLED} sampled: {names} (more than one refresh's {snapshot.budget} entries; "
            f"counted over several refreshes, the oldest part {oldest:.0f}s old)"
        )
    if partial:
        names = ", ".join(count.kind.value for count in partial)
        parts.append(f"{PARTIAL} partial: {names} (the first count is not finished)")
    return "; ".join(parts)


def summary_lines(watched: Sequence[Watched], current: int, interval: float) -> list[str]:
    """The summary above the tables: which workspace, how many jobs and managers, how fresh, how sure."""
    here = watched[current]
    root = str(here.workspace.root)
    lines = [f"workspace {here.title}  {root}"]
    if len(watched) > 1:
        names = "  ".join(
            f"[{index + 1}{'*' if index == current else ''}] {item.title}"
            for index, item in enumerate(watched)
        )
        lines[0] += f"   ({names}; w switches)"
    snapshot = here.snapshot
    if snapshot is None:
        lines.append("reading the workspace ...")
    else:
        live = snapshot.managers_live
        stamp = time.strftime("%H:%M:%S", time.localtime(here.refreshed_at))
        lines.append(
            f"{snapshot.total} jobs · managers {live} live, {len(snapshot.managers) - live} not · "
            f"refreshed {stamp}, every {interval:g}s"
        )
        lines.append(certainty_line(snapshot))
        if snapshot.anomalies:
            lines.append(
                f"{snapshot.anomalies} entries of the state tree are not markers: run workspace fsck"
            )
        if snapshot.read_only_reason:
            lines.append(f"read-only: {snapshot.read_only_reason}")
    if here.error:
        lines.append(f"error: {here.error}")
    if here.said:
        lines.append(here.said)
    return lines


class Refreshed(Message):
    """A worker's refresh of one workspace: the snapshot, or why there is none."""

    def __init__(self, watched: Watched, snapshot: MonitorSnapshot | None, error: str | None) -> None:
        super().__init__()
        self.watched, self.snapshot, self.error = watched, snapshot, error


class Said(Message):
    """What came of a request a worker published (or why it was refused)."""

    def __init__(self, watched: Watched, said: str, refused: bool) -> None:
        super().__init__()
        self.watched, self.said, self.refused = watched, said, refused


def age_text(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.1f}s"


class MonitorApp(App[None]):
    """The dashboard; see the module docstring."""

    TITLE = "httk workflow monitor"
    CSS = """
    #summary { height: auto; padding: 0 1; }
    #top { height: auto; max-height: 16; }
    #counts { width: auto; max-width: 60%; height: auto; max-height: 16; margin-right: 2; }
    #managers { width: 1fr; height: auto; max-height: 16; }
    #filter { margin-top: 1; }
    #page { height: 1; padding: 0 1; }
    #jobs { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("r", "refresh_now", "refresh"),
        Binding("slash", "edit_filter", "filter"),
        Binding("escape", "leave_filter", "jobs", show=False),
        Binding("left_square_bracket", "page(-1)", "previous page"),
        Binding("right_square_bracket", "page(1)", "next page"),
        Binding("w", "next_workspace", "workspace"),
        Binding("c", "request('continue')", "continue"),
        Binding("x", "request('cancel')", "cancel"),
        Binding("p", "request('pause')", "pause"),
        Binding("i", "request('set_priority')", "priority"),
    ]

    def __init__(self, watched: Sequence[Watched], settings: MonitorSettings) -> None:
        super().__init__()
        self.watched = list(watched)
        self.settings = settings
        self.current = 0
        self._rows: dict[str, MarkerLocation] = {}
        self._count_columns: tuple[str, ...] = ()

    # -- layout and refreshing ------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=True)
        yield Static("", id="summary")
        with Horizontal(id="top"):
            yield DataTable(id="counts", cursor_type="none")
            yield DataTable(id="managers", cursor_type="none")
        yield Input(placeholder=FILTER_HELP, id="filter")
        yield Static("", id="page")
        yield DataTable(id="jobs", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        managers = self.query_one("#managers", DataTable)
        managers.add_columns("manager", "state", "heartbeat", "lease", "host", "workers", "pools")
        jobs = self.query_one("#jobs", DataTable)
        jobs.add_columns("kind", "priority", "gen", "placement", "job")
        jobs.focus()
        self._draw()
        self.set_interval(self.settings.interval, self.refresh_all)
        self.refresh_all()

    def refresh_all(self) -> None:
        for watched in self.watched:
            self.in_thread(partial(self._gather, watched))

    def in_thread(self, work: Callable[[], None]) -> None:
        self.run_worker(work, thread=True, exit_on_error=False, group="monitor")

    def _gather(self, watched: Watched) -> None:
        """In a worker thread: one refresh of one workspace, skipped while the last one still runs."""
        if not watched.lock.acquire(blocking=False):
            return
        try:
            snapshot, error = watched.monitor.refresh(watched.query), None
        except (WorkflowError, OSError) as exc:
            snapshot, error = None, str(exc)
        finally:
            watched.lock.release()
        hand_back(self, Refreshed(watched, snapshot, error))

    def on_refreshed(self, message: Refreshed) -> None:
        watched = message.watched
        if message.snapshot is not None:
            watched.snapshot, watched.refreshed_at = message.snapshot, time.time()
        watched.error = message.error
        if watched is self.watched[self.current]:
            self._draw()

    # -- drawing --------------------------------------------------------------------------------------
    def _draw(self) -> None:
        watched = self.watched[self.current]
        summary = summary_lines(self.watched, self.current, self.settings.interval)
        self.query_one("#summary", Static).update("\n".join(summary))
        snapshot = watched.snapshot
        if snapshot is None:
            return
        self._draw_counts(snapshot)
        self._draw_managers(snapshot)
        self._draw_jobs(watched, snapshot)

    def _draw_counts(self, snapshot: MonitorSnapshot) -> None:
        table = self.query_one("#counts", DataTable)
        placements = snapshot.placements
        columns = ("kind", "jobs", *placements)
        if columns != self._count_columns:
            table.clear(columns=True)
            table.add_columns(*columns)
            self._count_columns = columns
        else:
            table.clear()
        for count in snapshot.counts:
            cells = [count_text(count.certainty, count.by_placement.get(p, 0)) for p in placements]
            table.add_row(count.kind.value, count_text(count.certainty, count.count), *cells)
        totals = [sum(count.by_placement.get(p, 0) for count in snapshot.counts) for p in placements]
        certainty = snapshot.certainty
        table.add_row(
            "total", count_text(certainty, snapshot.total), *(count_text(certainty, n) for n in totals)
        )

    def _draw_managers(self, snapshot: MonitorSnapshot) -> None:
        table = self.query_one("#managers", DataTable)
        table.clear()
        for view in snapshot.managers[:MANAGER_ROWS]:
            label = view.member("manager_label")
            row = view.as_dict()
            table.add_row(
                view.manager_id[:8] + (f" ({label})" if label else ""),
                view.state,
                age_text(view.age_seconds),
                f"{view.lease_seconds:g}s",
                str(row.get("host") or "-"),
                str(row.get("workers") or "-"),
                ",".join(row.get("pools") or []) or "-",
            )
        if not snapshot.managers:
            table.add_row("no manager has registered", "", "", "", "", "", "")

    def _draw_jobs(self, watched: Watched, snapshot: MonitorSnapshot) -> None:
        table = self.query_one("#jobs", DataTable)
        selected, cursor = self._selected_key(table), table.cursor_row
        page = snapshot.page
        table.clear()
        self._rows = {}
        for marker in page.jobs:  # a page names each job once (ops._inspect.page_of)
            key = f"{marker.placement}/{marker.job_key}"
            self._rows[key] = marker
            name = marker.name
            table.add_row(
                marker.kind.value,
                f"{name.priority:03d}",
                str(name.generation),
                marker.placement,
                marker.job_key,
                key=key,
            )
        keys = list(self._rows)
        if selected is not None and keys:
            # The job keeps the cursor while it is on the page; else the cursor keeps its row.
            row = keys.index(selected) if selected in self._rows else min(cursor, len(keys) - 1)
            table.move_cursor(row=row)
        where = filter_text(page.query) or "every job"
        number = len(watched.earlier_pages) + 1
        more = " · ] next page" if page.next_after is not None else ""
        back = " · [ previous page" if watched.earlier_pages else ""
        shown = f"{len(page.jobs)} shown" if page.jobs else "no jobs match"
        self.query_one("#page", Static).update(f"jobs: {where} · page {number} · {shown}{more}{back}")

    @staticmethod
    def _selected_key(table: DataTable[object]) -> str | None:
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        return None if key is None else str(key)

    # -- actions ---------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Over a confirmation only quitting works; over a job, not what belongs to the dashboard."""
        if isinstance(self.screen, ConfirmScreen):
            return action == "quit"
        if isinstance(self.screen, JobScreen):
            return action not in DASHBOARD_ONLY
        return True

    def action_refresh_now(self) -> None:
        self.refresh_all()

    def action_edit_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_leave_filter(self) -> None:
        self.query_one("#jobs", DataTable).focus()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if event.widget.id == "filter":
            event.widget.border_title = EDITING

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        if event.widget.id == "filter":
            event.widget.border_title = None

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "filter":
            return
        watched = self.watched[self.current]
        try:
            query = parse_filter(event.value, limit=self.settings.page_size)
        except InvalidNameError as exc:
            self.notify(str(exc), title="filter", severity="error")
            return
        watched.query, watched.earlier_pages = query, []
        self.query_one("#jobs", DataTable).focus()
        self.refresh_all()

    def action_page(self, step: int) -> None:
        watched = self.watched[self.current]
        snapshot = watched.snapshot
        if step > 0 and snapshot is not None and snapshot.page.next_after is not None:
            watched.earlier_pages.append(watched.query.after)
            watched.query = replace(watched.query, after=snapshot.page.next_after)
        elif step < 0 and watched.earlier_pages:
            watched.query = replace(watched.query, after=watched.earlier_pages.pop())
        else:
            return
        self.refresh_all()

    def action_next_workspace(self) -> None:
        self.current = (self.current + 1) % len(self.watched)
        watched = self.watched[self.current]
        self.query_one("#filter", Input).value = filter_text(watched.query)
        self._count_columns = ()
        self._draw()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "jobs" or event.row_key.value not in self._rows:
            return
        marker = self._rows[event.row_key.value]
        self.push_screen(JobScreen(self.watched[self.current], marker, self.settings.interval))

    def action_request(self, action: str) -> None:
        marker = self._target_job()
        if marker is None:
            self.notify("no job selected", severity="warning")
            return
        watched = self.watched[self.current]
        self.push_screen(ConfirmScreen(action, marker), partial(self._confirmed, watched, marker))

    def _target_job(self) -> MarkerLocation | None:
        if isinstance(self.screen, JobScreen):
            return self.screen.marker
        table = self.query_one("#jobs", DataTable)
        key = self._selected_key(table)
        return None if key is None else self._rows.get(key)

    def _confirmed(self, watched: Watched, marker: MarkerLocation, answer: Confirmation | None) -> None:
        if answer is None:
            self._said(watched, f"nothing requested for {marker.job_key}")
            return
        self.in_thread(partial(self._publish, watched, marker, answer))

    def _publish(self, watched: Watched, marker: MarkerLocation, answer: Confirmation) -> None:
        """In a worker thread: the request ``job request`` would publish, and what came of it."""
        from httk.workflow.engine import publish_request

        try:
            with watched.lock:
                published = publish_request(
                    watched.writer(),
                    marker.placement,
                    marker.job_key,
                    answer.action,
                    operator=self.settings.operator,
                    reason=answer.reason,
                    priority=answer.priority,
                    signer=self.settings.signer,
                )
        except (WorkflowError, OSError) as exc:
            said, refused = f"{answer.action} refused: {exc}", True
        else:
            document = published.document
            said = (
                f"requested {answer.action} of {marker.job_key} ({published.kind.value} at generation "
                f"{document['expected_generation']}): request {document['request_id']}"
            )
            said += "".join(f" (note: {text})" for text in published.notes)
            refused = False
        hand_back(self, Said(watched, said, refused))

    def on_said(self, message: Said) -> None:
        self._said(message.watched, message.said, message.refused)

    def _said(self, watched: Watched, said: str, refused: bool = False) -> None:
        watched.said = said
        self.notify(said, severity="error" if refused else "information", timeout=10)
        if isinstance(self.screen, JobScreen):
            self.screen.tell(said)
        self._draw()
        self.refresh_all()

    def on_unmount(self) -> None:
        for watched in self.watched:
            with watched.lock:
                watched.close()


def run_monitor(workspaces: Sequence[Workspace], settings: MonitorSettings) -> None:
    """Run the dashboard over ``workspaces`` (attached read-only) until the user quits."""
    watched = [Watched(workspace, settings) for workspace in workspaces]
    MonitorApp(watched, settings).run()
