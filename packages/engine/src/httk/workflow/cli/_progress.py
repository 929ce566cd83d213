"""Progress bars for long commands: on a terminal only, and never in the way of what a command prints.

A bar is drawn on standard error, and only when standard error is a terminal and ``--json`` was not
given (:func:`wanted`): a pipe, a file or a script reading JSON gets exactly the output it would get
without one. The bar is transient (erased when the work ends), so what stays on the screen is the
command's own output. rich is imported only when a bar is really drawn: loading it costs about 70 ms,
which a command whose output is piped should not pay.

The engine reports progress through a plain callable, ``progress(what, done)`` (what is being done,
and how many units of it are done so far), which :meth:`Bar.report` is; a command that drives the
loop itself calls :meth:`Bar.advance`. Without a known total the bar pulses and counts.

Examples
--------
>>> with progress_bar("checking markers", enabled=wanted(as_json)) as bar:  # doctest: +SKIP
...     report = fsck(workspace, progress=bar.report)
"""

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

REDRAW_SECONDS = 0.05
"""The least time between two updates handed to rich (which redraws ten times a second anyway): an
engine reporting every marker must not pay rich's bookkeeping for each one."""


def wanted(as_json: bool) -> bool:
    """Whether a bar belongs on this command's standard error: a terminal, and no ``--json``."""
    return not as_json and sys.stderr.isatty()


class Bar:
    """One task's progress: :meth:`advance` and :meth:`report` are cheap no-ops when nothing is drawn."""

    def __init__(self, progress: "Progress | None", task: "TaskID | None", description: str) -> None:
        self._progress = progress
        self._task = task
        self._description = description
        self._done = 0
        self._next = 0.0

    @property
    def done(self) -> int:
        """The units reported done so far."""
        return self._done

    def advance(self, amount: int = 1) -> None:
        """Count ``amount`` more units done."""
        self.report(self._description, self._done + amount)

    def report(self, what: str, done: int) -> None:
        """``what`` is being done and ``done`` units of it are done (the engine's progress callable)."""
        self._done = done
        if self._progress is None or self._task is None:
            return
        now = time.monotonic()
        if what == self._description and now < self._next:
            return
        self._next = now + REDRAW_SECONDS
        self._description = what
        self._progress.update(self._task, completed=done, description=what)

    def finish(self) -> None:
        """Show the final count (a throttled last update would otherwise be lost)."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self._done, description=self._description)


@contextmanager
def progress_bar(description: str, *, enabled: bool, total: int | None = None) -> Iterator[Bar]:
    """A transient bar on standard error while the block runs, or a :class:`Bar` that draws nothing."""
    if not enabled:
        yield Bar(None, None, description)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn()]
    if total is None:
        columns += [TextColumn("{task.completed:,.0f}"), TimeElapsedColumn()]
    else:
        columns += [MofNCompleteColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        bar = Bar(progress, progress.add_task(description, total=total), description)
        try:
            yield bar
        finally:
            bar.finish()
