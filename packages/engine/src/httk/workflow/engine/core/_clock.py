"""Time comes in through this small interface so that leases, deadlines and backoff can be driven by tests.

:class:`SystemClock` is the real one. :class:`ManualClock` never sleeps: ``sleep`` advances its time and
runs the callbacks a test registered, which is how a test makes a journal frame "appear" during a
reader's backoff without any real waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def now(self) -> datetime: ...


class SystemClock:
    """Wall and monotonic time of this machine."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to (or when something sleeps on it)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._monotonic = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep: list[Callable[[ManualClock], None]] = []

    def monotonic(self) -> float:
        return self._monotonic

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._monotonic += seconds
        self._now += timedelta(seconds=seconds)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        for callback in list(self.on_sleep):
            callback(self)


SYSTEM_CLOCK = SystemClock()


def utc_timestamp(moment: datetime) -> str:
    """RFC 3339 UTC with microseconds and a ``Z``, the timestamp form of every document we write."""
    # isoformat is a third of strftime's cost, and every state frame carries one timestamp.
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def parse_time(timestamp: object) -> datetime | None:
    """The instant a document's timestamp names, or ``None`` for a missing or unreadable one."""
    if not isinstance(timestamp, str):
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def age_seconds(timestamp: object, now: datetime) -> float | None:
    """Seconds from a document's timestamp to ``now``; ``None`` for a missing or unreadable one."""
    moment = parse_time(timestamp)
    return None if moment is None else (now - moment).total_seconds()


def backoff_schedule(
    deadline_seconds: float, first: float = 0.01, factor: float = 2.0, cap: float = 1.0
) -> list[float]:
    """Sleeps of a bounded retry: 10 ms doubling to at most ``cap``, adding up to ``deadline_seconds``."""
    sleeps: list[float] = []
    total, step = 0.0, first
    while total < deadline_seconds:
        step = min(step, cap, deadline_seconds - total)
        sleeps.append(step)
        total += step
        step *= factor
    return sleeps
