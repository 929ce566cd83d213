"""The coordinator: the runner of a plan's one job, which runs the stages as its labelled children.

Each activation of its ``schedule`` step

1. reads the plan (``plan/plan.json`` once amended, else ``plan.json`` in its payload) and its book
   (:mod:`._book`, the job state), forgets spawns that never registered, and takes in the observations of
   the join it follows;
2. applies the pending amendments (``plan/amendments/``, :mod:`._amendments`: a new plan version, the
   audit entry, the invalidation cascade), then the operator's queued commands (``plan/inbox/``: a
   ``retry`` forgets a failed stage's job, so the stage runs again as a new job);
3. appends to ``progress.log`` every status change of every stage job it has not logged yet, walking
   the job's own journal frames back to the last one logged, each line stamped with the time its frame
   was recorded (:mod:`._records`), so no change is missing even when it is noted late;
4. spawns, as a child labelled with the stage id, every stage whose dependencies have all completed and
   that has no job yet -- so independent branches run in parallel and a stage starts one activation after
   its last dependency completed -- and a failed stage blocks only the stages downstream of it; a skipped
   stage never runs and counts as satisfied for its dependants; a stage of an amended plan is tagged
   ``<stage>-v<version>``;
5. rewrites ``workflow-state.json`` (spec/04's task list), saves the book, and then either waits on every
   live stage job with ``at_least`` 1 and ``on_impossible`` back to ``schedule`` (it wakes when any stage
   succeeds, or when every running one has failed), or, when nothing can run any more, pauses with
   ``plan complete`` or ``plan blocked: ...`` naming the failed stages, so the plan stays open to a retry.

``close`` (``plan close``, an operator's override_step) ends the plan: ``succeed`` when every stage
completed, else ``fail`` naming what failed and what never ran.

Imports: the SDK and the standard library only (a runner pays for every import on every attempt).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from httk.workflow.sdk import Attempt, Registry

from . import _outputs, _progress
from ._amend_rules import skipped
from ._amendments import CURRENT_PLAN, apply_pending, pending, template_dir
from ._book import Book
from ._mutations import done
from ._records import frames_since
from ._spawn import spawn_template
from ._statuses import status_of

PLAN_FILE = "plan.json"
STAGES_DIR = "stages"
TEMPLATE_FILE = "stage.json"
INBOX_DIR = "inbox"
WORKDIR = "plan"
STAGE_PLACEMENT_SUFFIX = ".stages"
FAILURE_CODE = "plans.stage_failed"

steps = Registry("httk.workflow.plans.coordinator")


class Plan:
    """The plan document the coordinator runs, with the lookups its activation needs."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document
        self.workflow_id: str = document["workflow_id"]
        self.stages: dict[str, Mapping[str, Any]] = {stage["id"]: stage for stage in document["stages"]}
        self.version = int(document.get("version", 1))
        self.amendments: list[Mapping[str, Any]] = list(document.get("amendments", []))
        self.skipped = skipped(self.amendments)

    def needs(self, stage: str) -> list[str]:
        return list(self.stages[stage].get("depends_on", []))

    def name(self, stage: str) -> str:
        return str(self.stages[stage].get("name") or stage)

    def checked(self, stage: str) -> bool:
        return bool((self.stages[stage].get("success_criteria") or {}).get("check"))

    def satisfied(self, book: Book, stage: str) -> bool:
        """Whether ``stage`` no longer holds its dependants back: it completed, or it is skipped."""
        return stage in self.skipped or book.completed(stage)

    def unfinished(self, book: Book) -> list[str]:
        """The stages that neither completed nor were skipped."""
        return [stage for stage in self.stages if not self.satisfied(book, stage)]


def load_document(payload: Path) -> dict[str, Any]:
    """The plan as it is now: as amended in the coordinator's workdir, else as submitted."""
    for path in (payload / WORKDIR / CURRENT_PLAN, payload / PLAN_FILE):
        try:
            with open(path, "rb") as stream:
                return json.load(stream)  # type: ignore[no-any-return]
        except FileNotFoundError:
            continue
    raise FileNotFoundError(payload / PLAN_FILE)


def _load_plan(a: Attempt) -> Plan:
    return Plan(load_document(a.job_dir))


@steps.step
def schedule(a: Attempt) -> None:
    """One activation of the coordinator (see the module docstring)."""
    plan = _load_plan(a)
    book = Book(a.state)
    book.confirm(a.workspace_dir, a.activation_id)
    book.observe(a.children)
    said = _progress.logged(a.workdir / _progress.LOG_FILE)
    document, lines = apply_pending(a.workdir, dict(plan.document), book, durable=a.durable)
    plan = Plan(document)
    lines += _apply_inbox(a, plan, book)
    lines += _history_lines(a, plan, book, said)
    ready = [stage for stage in plan.stages if _can_start(plan, book, stage)]
    starts = {stage: _prepare(a, plan, book, stage) for stage in ready}
    fresh = [stage for stage in ready if stage not in said or said[stage].status != "ready"]
    lines += _ready_lines(plan, book, [stage for stage in fresh if starts[stage].problem is None])
    lines += _unavailable_lines(a, plan, book, said, starts)
    ready = [stage for stage in ready if starts[stage].problem is None]
    for stage in ready:
        _spawn(a, plan, book, stage, starts[stage])
    _progress.append(a.workdir / _progress.LOG_FILE, lines, durable=a.durable)
    _write_task_list(a, plan, book)
    a.save_state(book.document())
    done("book", a.job_dir / ".httk-job")
    children = book.join_children()
    if children:
        started = f"started {', '.join(ready)}; " if ready else ""
        a.wait(
            "schedule",
            children,
            condition="at_least",
            count=1,
            on_impossible="schedule",
            message=f"{started}waiting on {len(children)} stage job(s)",
        )
        done("outcome", a.job_dir)
        return
    message = _verdict(plan, book)
    verdict = _progress.plan_line(_progress.now_iso(), plan.workflow_id, message)
    if not _progress.last_says(a.workdir / _progress.LOG_FILE, verdict):  # an attempt retried after it
        _progress.append(a.workdir / _progress.LOG_FILE, [verdict], durable=a.durable)
    a.pause(message)
    done("outcome", a.job_dir)


@steps.step
def close(a: Attempt) -> None:
    """End the plan: succeed when every stage completed, else fail naming what failed and never ran."""
    plan = _load_plan(a)
    book = Book(a.state)
    failed = [stage for stage in plan.unfinished(book) if book.failed(stage)]
    unfinished = [stage for stage in plan.unfinished(book) if stage not in failed]
    if not failed and not unfinished:
        message = "plan closed: every stage completed"
    else:
        parts = [f"failed: {', '.join(failed)}"] if failed else []
        parts += [f"not completed: {', '.join(unfinished)}"] if unfinished else []
        message = f"plan closed: {'; '.join(parts)}"
    _progress.append(
        a.workdir / _progress.LOG_FILE,
        [_progress.plan_line(_progress.now_iso(), plan.workflow_id, message)],
        durable=a.durable,
    )
    if failed or unfinished:
        a.fail(FAILURE_CODE, message, details={"failed": failed, "not_completed": unfinished})
    else:
        a.succeed(message=message)


def _can_start(plan: Plan, book: Book, stage: str) -> bool:
    return (
        stage not in plan.skipped
        and book.current(stage) is None
        and not book.unavailable(stage)
        and all(plan.satisfied(book, need) for need in plan.needs(stage))
    )


TAG_BYTES = 48
"""A tag's longest (spec/01 tag syntax, ``common.schema.json`` label); the runner never loads protocol."""


def versioned_tag(stage: str, version: int) -> str:
    """The tag of ``stage``'s job in plan ``version``: the id, then ``-v<version>`` once amended.

    A long id is shortened to make room, and a trailing ``-`` dropped, since a tag never holds ``--``.
    """
    if version == 1:
        return stage
    suffix = f"-v{version}"
    return stage[: TAG_BYTES - len(suffix)].rstrip("-") + suffix


class _Start:
    """A stage about to start: its job's template and payload files, or why it cannot start."""

    def __init__(self, template: Mapping[str, Any], files: dict[str, bytes], problem: str | None) -> None:
        self.template = template
        self.files = files
        self.problem = problem


def _prepare(a: Attempt, plan: Plan, book: Book, stage: str) -> _Start:
    """The stage's template and files, with the files it takes from its dependencies (:mod:`._outputs`)."""
    directory = template_dir(a.workdir, stage, plan.amendments) or a.job_dir / STAGES_DIR / stage
    with open(directory / TEMPLATE_FILE, "rb") as stream:
        template = json.load(stream)
    files = {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != TEMPLATE_FILE
    }
    payloads: dict[str, tuple[str, Path | None]] = {}
    for reference in (template.get(_outputs.MEMBER) or {}).values():
        job = book.current(reference["from_stage"])
        if job is not None:
            found = _outputs.payload_of(a.workspace_dir, job, checked=plan.checked(reference["from_stage"]))
            payloads[reference["from_stage"]] = (job["job_key"], found)
    taken, problem = _outputs.read_outputs(template, payloads)
    return _Start(template, {**files, **taken}, problem)


def _spawn(a: Attempt, plan: Plan, book: Book, stage: str, start: _Start) -> None:
    placement = f"{a.placement}/{a.job_key}{STAGE_PLACEMENT_SUFFIX}"
    tag = versioned_tag(stage, plan.version)
    child = spawn_template(a, start.template, start.files, label=stage, tag=tag, placement=placement)
    reference = {
        "workspace_id": child.workspace_id,
        "job_id": child.job_id,
        "job_key": child.job_key,
        "placement": child.placement,
    }
    book.add_job(stage, reference, a.activation_id)


def _unavailable_lines(
    a: Attempt, plan: Plan, book: Book, said: Mapping[str, _progress.Logged], starts: Mapping[str, _Start]
) -> list[str]:
    """Mark each stage whose dependency's output cannot be read failed, with its lines.

    The lines are stamped with the stage's ready time and name its retry count, so an attempt retried
    after writing them finds them in the log and does not say them again.
    """
    lines: list[str] = []
    logged = _progress.lines_of(a.workdir / _progress.LOG_FILE)
    for stage, start in starts.items():
        if start.problem is None:
            continue
        entry = book.entry(stage)
        entry["unavailable"] = start.problem
        [ready] = _ready_lines(plan, book, [stage])
        when = ready[1 : ready.index("]")]
        why = _progress.plan_line(
            when,
            plan.workflow_id,
            f"stage {stage} cannot start (retries {entry.get('retries', 0)}): {start.problem}",
        )
        if why in logged:
            continue
        if stage not in said or said[stage].status != "ready":
            lines.append(ready)
        lines += [_progress.stage_line(when, stage, plan.name(stage), "failed"), why]
    return lines


def _history_lines(a: Attempt, plan: Plan, book: Book, said: Mapping[str, _progress.Logged]) -> list[str]:
    """A line for every status change of a stage job not logged yet, from the job's own frames."""
    timed: list[tuple[str, str]] = []
    for stage in plan.stages:
        job = book.current(stage)
        if job is None or not isinstance(job.get("record_ref"), str):
            continue
        last = said.get(stage)
        after = last.generation if last is not None and last.job_key == job["job_key"] else -1
        status = last.status if last is not None else None
        for frame in frames_since(a.workspace_dir, job["record_ref"], -1 if after is None else after):
            now = status_of(str(frame.get("kind")), frame.get("step"), checked=plan.checked(stage))
            when = _progress.iso_of(frame.get("created_at")) or _progress.now_iso()
            _note_times(job, now, when, frame)
            if now != status:
                line = _progress.stage_line(
                    when, stage, plan.name(stage), now, (job["job_key"], frame["state_generation"])
                )
                timed.append((when, line))
                status = now
    return [line for _, line in sorted(timed, key=lambda item: item[0])]


def _note_times(job: dict[str, Any], status: str, when: str, frame: Mapping[str, Any]) -> None:
    """Keep the book's started/completed times and last error of a job from one of its frames."""
    if status in ("running", "post_processing") and job.get("started_at") is None:
        job["started_at"] = when
    if status == "completed":
        job["completed_at"] = when
    failure = frame.get("failure")
    if isinstance(failure, Mapping) and isinstance(failure.get("message"), str):
        job["last_error"] = failure["message"]


def _ready_lines(plan: Plan, book: Book, ready: list[str]) -> list[str]:
    """A ``ready`` line for each stage about to start, stamped with its last dependency's completion.

    ``ready`` leaves out the stages whose last line already says so (an attempt retried after writing).
    """
    lines = []
    for stage in ready:
        finished = [book.current(need) or {} for need in plan.needs(stage)]
        times = [job["completed_at"] for job in finished if isinstance(job.get("completed_at"), str)]
        when = max(times) if times else _progress.now_iso()
        lines.append(_progress.stage_line(when, stage, plan.name(stage), "ready"))
    return lines


def _apply_inbox(a: Attempt, plan: Plan, book: Book) -> list[str]:
    """Apply the operator's queued commands in order (``<n>.<command>.json``); return their log lines.

    A line is stamped with its command's time and names its number, so an attempt retried after writing
    it finds it in the log and does not say it again.
    """
    lines = []
    logged = _progress.lines_of(a.workdir / _progress.LOG_FILE)
    for number, path in pending(a.workdir / INBOX_DIR, book.inbox):
        with open(path, "rb") as stream:
            command = json.load(stream)
        stage = command.get("stage_id")
        if command.get("type") == "retry" and stage in plan.stages and book.failed(stage):
            entry = book.entry(stage)
            entry["retries"] = int(entry.get("retries", 0)) + 1
            if entry.pop("unavailable", None) is None:
                entry.setdefault("history", []).append(entry["jobs"].pop())
            who = command.get("operator", "an operator")
            reason = f": {command['reason']}" if command.get("reason") else ""
            line = _progress.plan_line(
                str(command.get("created_at") or _progress.now_iso()),
                plan.workflow_id,
                f"stage {stage} retried by {who}{reason} (command {number})",
            )
            if line not in logged:
                lines.append(line)
        book.inbox = number
    return lines


def _verdict(plan: Plan, book: Book) -> str:
    failed = [stage for stage in plan.unfinished(book) if book.failed(stage)]
    if not failed:
        return "plan complete"
    blocked = [
        stage for stage in plan.unfinished(book) if book.current(stage) is None and stage not in failed
    ]
    described = ", ".join(f"stage {stage} failed" for stage in failed)
    return f"plan blocked: {described}" + (f" (not started: {', '.join(blocked)})" if blocked else "")


def stage_view(plan: Plan, book: Book, stage: str) -> dict[str, Any]:
    """One stage of ``workflow-state.json``: spec/04's members, read from the plan and the book."""
    definition = plan.stages[stage]
    job = book.current(stage) or {}
    if stage in plan.skipped:
        status = "skipped"
    elif job:
        status = (
            "preparing" if job.get("kind") is None else status_of(job["kind"], checked=plan.checked(stage))
        )
    elif book.unavailable(stage):
        status = "failed"
    elif book.invalidated(stage):
        status = "invalidated"
    else:
        status = "ready" if all(plan.satisfied(book, need) for need in plan.needs(stage)) else "pending"
    failure = job.get("failure") or {}
    return {
        "id": stage,
        "name": plan.name(stage),
        "status": status,
        "depends_on": plan.needs(stage),
        "workflow": definition.get("workflow"),
        "runner": definition.get("runner"),
        "inputs": definition.get("inputs", {}),
        "outputs": [f"{job['placement']}/{job['job_key']}"] if job else [],
        "parameters": definition.get("parameters", {}),
        "success_criteria": definition.get("success_criteria"),
        "job": job.get("job_key"),
        "started_at": job.get("started_at"),
        "completed_at": job.get("completed_at"),
        "retry_count": int(book.stages.get(stage, {}).get("retries", 0)),
        "last_error": failure.get("message") or job.get("last_error") or book.unavailable(stage),
    }


def _write_task_list(a: Attempt, plan: Plan, book: Book) -> None:
    updated = _progress.now_iso()
    if book.created is None:  # kept in the saved book from the first activation on
        book.created = updated
    document = {
        "workflow_id": plan.workflow_id,
        "version": plan.version,
        "created": book.created,
        "updated": updated,
        "coordinator": f"{a.placement}/{a.job_key}",
        "amendments": plan.document.get("amendments", []),
        "stages": [stage_view(plan, book, stage) for stage in plan.stages],
    }
    _progress.write_state(a.workdir / _progress.STATE_FILE, document, durable=a.durable)


def run() -> None:
    """The coordinator runner's entry point (``runners/coordinator``)."""
    raise SystemExit(steps.dispatch())
