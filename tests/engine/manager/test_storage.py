"""StorageWatch: a storage error is contained and logged once per job; claiming pauses and resumes."""

from __future__ import annotations

import errno
import logging

import pytest
from httk.workflow.engine.core._clock import ManualClock
from httk.workflow.engine.manager._storage import (
    PERSIST_TRIES,
    PROBE_SECONDS,
    StorageWatch,
    persist,
    transient,
)
from httk.workflow.protocol import JournalError, TransitionError, WorkspaceUnavailableError


def full(path: str = "/ws/x") -> OSError:
    return OSError(errno.ENOSPC, "No space left on device", path)


def test_an_error_is_contained_logged_once_per_job_and_pauses_claiming(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = StorageWatch(ManualClock())
    caplog.set_level(logging.ERROR, logger="httk.workflow.manager")

    def fail() -> None:
        raise full()

    for _ in range(3):
        assert watch.contain("claim", "job-a", fail) is None
    watch.contain("claim", "job-b", fail)
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0] == "storage is failing (OSError, ENOSPC): claiming paused until writes work again"
    assert [m for m in messages if m.startswith("cannot claim")] == [
        "cannot claim job-a: [Errno 28] No space left on device: '/ws/x'; it stays at its last commit point "
        "and is tried again",
        "cannot claim job-b: [Errno 28] No space left on device: '/ws/x'; it stays at its last commit point "
        "and is tried again",
    ]
    assert watch.paused


def test_a_write_that_works_resumes_claiming_and_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    watch = StorageWatch(clock)
    watch.failed("claim", "job-a", full())
    assert watch.probe_due() and not watch.probe_due()  # at most one probe a second
    clock.advance(PROBE_SECONDS)
    assert watch.probe_due()
    caplog.set_level(logging.WARNING, logger="httk.workflow.manager")
    caplog.clear()
    watch.worked()
    watch.worked()
    assert not watch.paused
    assert [r.getMessage() for r in caplog.records] == [
        f"storage works again after {PROBE_SECONDS:.1f} s: claiming resumed"
    ]


def test_a_corrupt_job_is_logged_but_does_not_pause_claiming() -> None:
    watch = StorageWatch(ManualClock())

    def corrupt() -> None:
        raise TransitionError("job j has 2 markers, which is corruption")

    assert watch.contain("claim", "j", corrupt) is None and not watch.paused


def test_what_succeeds_is_returned_untouched() -> None:
    assert StorageWatch(ManualClock()).contain("claim", "j", lambda a, b: a + b, 2, b=3) == 5


def test_persist_tries_again_then_gives_one_clear_error() -> None:
    clock = ManualClock()
    tries: list[int] = []

    def publish() -> None:
        tries.append(1)
        raise full()

    with pytest.raises(WorkspaceUnavailableError, match=r"cannot publish the record: .*No space left"):
        persist("publish the record", publish, clock)
    assert len(tries) == PERSIST_TRIES
    with pytest.raises(FileExistsError):
        persist("publish the record", lambda: (_ for _ in ()).throw(FileExistsError("taken")), clock)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (full(), True),
        (OSError(errno.EIO, "I/O error"), True),
        (OSError(errno.EACCES, "Permission denied"), False),
        (FileNotFoundError(errno.ENOENT, "gone"), False),
        (JournalError("cannot append"), True),
    ],
)
def test_only_storage_trouble_is_transient(error: BaseException, expected: bool) -> None:
    assert transient(error) is expected
