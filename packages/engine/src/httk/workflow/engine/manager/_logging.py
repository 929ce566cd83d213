"""Manager logging: the complete record in a file, warnings on the console, optionally as JSON lines.

Every record carries the manager id, so the logs of several managers sharing a file or a collector can
be told apart. The file receives everything at ``level`` (info by default); the console receives
warnings and errors; an explicit ``--log-level`` sets both.

A run routes its log with :func:`routed`, which removes and closes what it installed when the run ends,
however it ends: a manager run in a process that lives on (a test, a library caller, ``job debug``)
must not keep its log file open, nor send the next run's records to it or to a stream that is gone.

The file is bounded as spec/03 bounds the managers' log: when the manager starts, and every 1,000
records after that, a file past 16 MiB is renamed to ``<log>.1`` (replacing an older backup) and a new
one begun, so a manager serving for months keeps at most about 32 MiB of log. Checking the size every
1,000 records instead of on each one keeps the cost off the records a manager writes per job.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from httk.workflow.protocol import InvalidNameError

LOGGER = "httk.workflow"


class _ManagerFilter(logging.Filter):
    def __init__(self, manager_id: str) -> None:
        super().__init__()
        self.manager_id = manager_id

    def filter(self, record: logging.LogRecord) -> bool:
        record.manager_id = self.manager_id
        return True


class BoundedFileHandler(logging.FileHandler):
    """A log file replaced by a fresh one past :attr:`max_bytes`, keeping one backup ``<name>.1``."""

    max_bytes = 16 << 20
    check_every = 1000

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8")
        self._records = 0
        self._rotate_if_large()

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        self._records += 1
        if self._records >= self.check_every:
            self._records = 0
            self._rotate_if_large()  # emit runs under the handler's lock (Handler.handle)

    def _rotate_if_large(self) -> None:
        stream = self.stream
        if stream is None:
            return
        try:
            if os.fstat(stream.fileno()).st_size <= self.max_bytes:
                return
            stream.close()
            os.replace(self.baseFilename, self.baseFilename + ".1")
        except OSError:
            return  # a log that cannot be rotated keeps growing rather than stopping the manager
        finally:
            if stream.closed:
                self.stream = self._open()


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, manager id, message."""

    def format(self, record: logging.LogRecord) -> str:
        document = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "manager_id": getattr(record, "manager_id", None),
            "message": record.getMessage(),
        }
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, ensure_ascii=False)


def level_number(level: str | None) -> int:
    """The numeric level of a ``--log-level`` name (info when absent); an unknown name is bad input."""
    numeric = logging.getLevelName((level or "info").upper())
    if not isinstance(numeric, int):
        raise InvalidNameError("log level", level, "use debug, info, warning or error")
    return numeric


def configure(
    manager_id: str, log_file: Path, *, level: str | None = None, json_logs: bool = False
) -> list[logging.Handler]:
    """Route the ``httk.workflow`` loggers to ``log_file`` and standard error; return the new handlers.

    Without ``level`` the file gets info and the console warnings; a given level sets both. The caller
    owns the returned handlers (:func:`routed` closes them).
    """
    numeric = level_number(level)
    logger = logging.getLogger(LOGGER)
    logger.handlers.clear()
    logger.setLevel(numeric)
    logger.propagate = False
    text = logging.Formatter("%(asctime)s %(levelname)s [%(manager_id)s] %(message)s")
    formatter: logging.Formatter = JsonFormatter() if json_logs else text
    log_file.parent.mkdir(parents=True, exist_ok=True)
    file_handler = BoundedFileHandler(log_file)
    file_handler.setFormatter(formatter)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(numeric if level is not None else logging.WARNING)
    console.setFormatter(formatter if json_logs else logging.Formatter("%(levelname)s: %(message)s"))
    handlers: list[logging.Handler] = [file_handler, console]
    for handler in handlers:
        handler.addFilter(_ManagerFilter(manager_id))
        logger.addHandler(handler)
    return handlers


@contextlib.contextmanager
def routed(
    manager_id: str, log_file: Path, *, level: str | None = None, json_logs: bool = False
) -> Iterator[None]:
    """:func:`configure` for the duration of the block; then close its handlers and restore the routing
    the ``httk.workflow`` logger had before, also when the block raises."""
    logger = logging.getLogger(LOGGER)
    saved = (list(logger.handlers), logger.level, logger.propagate)
    installed = configure(manager_id, log_file, level=level, json_logs=json_logs)
    try:
        yield
    finally:
        for handler in installed:
            logger.removeHandler(handler)
            handler.close()
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]
