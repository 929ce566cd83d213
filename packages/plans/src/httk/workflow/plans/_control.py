"""What an operator does to a running plan: ``plan retry``, ``plan close``, and reading ``plan log``.

The coordinator is an ordinary job, so an operator reaches it the ordinary way -- operator requests the
managers apply -- plus one inbox the coordinator reads at the start of every activation:

- ``retry STAGE`` writes ``plan/inbox/<n>.retry.json`` (created under a temporary name, then linked to
  its final name, which fails rather than replaces when another command took ``n``), and wakes a paused
  coordinator with an ``override_step`` request to ``schedule``; a waiting one reads it when it next
  wakes. The coordinator then forgets the stage's failed job (it stays, as history), so the stage runs
  again as a new job: spec/01 never revives a child a join decided on.
- ``close`` asks for ``override_step`` to ``close`` of a paused coordinator, which succeeds when every
  stage completed and fails naming the failed and unfinished stages otherwise.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from httk.workflow.protocol import WorkflowError

from ._coordinator import INBOX_DIR, load_document
from ._progress import LOG_FILE, now_iso
from ._status import plan_payload, read_book
from ._submit import WORKDIR

WAKEABLE = ("paused",)


class PlanControlError(WorkflowError, ValueError):
    """An operator command a plan cannot take now (it names why)."""


def retry_stage(workspace: Any, selector: str, stage: str, *, operator: str, reason: str) -> str:
    """Queue a retry of the failed ``stage``; return what happened, for the operator."""
    marker, payload = plan_payload(workspace, selector)
    book = read_book(payload)
    plan_stages = {item["id"] for item in load_document(payload)["stages"]}
    if stage not in plan_stages:
        raise PlanControlError(
            f"the plan has no stage {stage!r} (its stages: {', '.join(sorted(plan_stages))})"
        )
    if not book.failed(stage):
        kind = book.kind(stage) or "not started"
        raise PlanControlError(
            f"stage {stage!r} has not failed (its job is {kind}); only a failed stage is retried"
        )
    inbox = payload / WORKDIR / INBOX_DIR
    command = {
        "type": "retry",
        "stage_id": stage,
        "operator": operator,
        "reason": reason,
        "created_at": now_iso(),
    }
    name = enqueue(inbox, "retry", command, durable=workspace.durable)
    if marker.kind.value in WAKEABLE:
        _request(workspace, marker, "schedule", operator, reason or f"retry stage {stage}")
        return f"queued {name}; the coordinator was paused and is asked to continue"
    return f"queued {name}; the coordinator ({marker.kind.value}) applies it when it next wakes"


def close_plan(workspace: Any, selector: str, *, operator: str, reason: str) -> str:
    """Ask the paused coordinator to end the plan."""
    marker, _payload = plan_payload(workspace, selector)
    if marker.kind.value not in WAKEABLE:
        raise PlanControlError(
            f"the plan's coordinator is {marker.kind.value}; a plan is closed once it paused "
            "(plan complete, or plan blocked)"
        )
    _request(workspace, marker, "close", operator, reason or "plan close")
    return f"asked the coordinator {marker.job_key} to close the plan"


def _request(workspace: Any, marker: Any, step: str, operator: str, reason: str) -> None:
    request_action(workspace, marker, "override_step", operator, reason, step=step)


def request_action(
    workspace: Any, marker: Any, action: str, operator: str, reason: str, *, step: str | None = None
) -> None:
    """Publish the operator request ``action`` for the coordinator at ``marker``."""
    from httk.workflow.engine import publish_request

    publish_request(
        workspace,
        marker.placement,
        marker.job_key,
        action,
        operator=operator,
        reason=reason,
        step=step,
    )


def enqueue(inbox: Path, kind: str, command: dict[str, Any], *, durable: bool) -> str:
    inbox.mkdir(parents=True, exist_ok=True)
    temporary = inbox / f".{uuid.uuid4().hex}.tmp"
    data = (json.dumps(command, indent=2) + "\n").encode("utf-8")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    try:
        number = 1 + max(
            (int(name.split(".", 1)[0]) for name in os.listdir(inbox) if name[:1].isdigit()), default=0
        )
        while True:
            name = f"{number:06d}.{kind}.json"
            try:
                os.link(temporary, inbox / name)
                break
            except FileExistsError:
                number += 1
    finally:
        os.unlink(temporary)
    if durable:
        fd = os.open(inbox, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return name


def log_path(workspace: Any, selector: str) -> Path:
    """The plan's ``progress.log``."""
    _marker, payload = plan_payload(workspace, selector)
    return payload / WORKDIR / LOG_FILE


def read_lines(
    path: Path, *, follow: bool, poll: float = 0.2, stop: Callable[[], bool] = lambda: False
) -> Iterator[str]:
    """The log's lines; with ``follow`` then every line appended later, whole lines only, until ``stop``."""
    offset = 0
    pending = b""
    while True:
        try:
            with open(path, "rb") as stream:
                stream.seek(offset)
                chunk = stream.read()
        except FileNotFoundError:
            chunk = b""
        offset += len(chunk)
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line.decode("utf-8", errors="replace")
        if not follow or stop():
            return
        time.sleep(poll)
