"""The coordinator's side of amendments: applying the pending amendment documents, in order.

``plan amend`` checked each document against the plan before it queued it in ``plan/amendments/``
(``<n>.<type>.json``, written like the inbox's commands, :mod:`._control`); a document also carries the
template of the stage's new job when it redefines one (:data:`._amend_rules.REDEFINING`), resolved where
the workspace's workflows and runner store are at hand. At the start of an activation the coordinator
applies each document after the book's ``amended`` count:

1. it checks the document again against the plan as it is now (two amendments queued against the same
   version may collide: the second is then refused, with a log line, and changes nothing);
2. writes the new template, if any, to ``plan/stages/<stage>.v<version>/`` (a temporary directory,
   renamed), then the amended plan to ``plan/plan.json`` (``version`` + 1, the entry with spec/04's
   members appended) by an atomic replace;
3. moves aside, into the stage's history, the current job of every stage the amendment invalidates:
   the amended stage when it has a job (whatever its state: it ran the old definition), then spec/04's
   cascade through every completed stage downstream -- and a live one, which is consuming a result the
   amendment made stale. The old jobs and their payloads stay as they are (the old outputs); each such
   stage is ``invalidated`` until it runs again as a new job tagged ``<stage>-v<version>``.

The application is idempotent, so an attempt that died after writing some of it is retried safely: the
entry's ``id`` is ``amend-<n>`` after the document's number, and a plan that already holds it is not
amended again -- the book (saved only with the outcome) is then brought up to it from the entry, and
of its log lines (stamped with the entry's time, so the same again) only those the log lacks are said.

Imports: the standard library only.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from httk.workflow.sdk._files import replace_atomically

from . import _amend_rules as rules
from . import _progress
from ._book import Book
from ._graph import find_cycle
from ._mutations import done

AMENDMENTS_DIR = "amendments"
CURRENT_PLAN = "plan.json"
"""The plan as amended, in the coordinator's workdir (the payload's ``plan.json`` is as submitted)."""
TEMPLATES_DIR = "stages"


def pending(directory: Path, after: int) -> list[tuple[int, Path]]:
    """The queued documents in ``directory`` numbered above ``after``, in order."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(int(name.split(".", 1)[0]), directory / name) for name in names if _queued(name)]
    return sorted(item for item in found if item[0] > after)


def _queued(name: str) -> bool:
    number = name.split(".", 1)[0]
    return name.endswith(".json") and number.isdigit()


def template_dir(workdir: Path, stage: str, amendments: list[Mapping[str, Any]]) -> Path | None:
    """Where the latest amendment that redefined ``stage`` put its template (``None``: the submitted one)."""
    for amendment in reversed(amendments):
        if amendment["stage_id"] == stage and amendment["type"] in rules.REDEFINING:
            return workdir / TEMPLATES_DIR / f"{stage}.v{amendment['version']}"
    return None


def apply_pending(
    workdir: Path, document: dict[str, Any], book: Book, *, durable: bool
) -> tuple[dict[str, Any], list[str]]:
    """Apply every pending amendment (see the module docstring); the plan as it now is, and the log lines."""
    lines: list[str] = []
    for number, path in pending(workdir / AMENDMENTS_DIR, book.amended):
        with open(path, "rb") as stream:
            request = json.load(stream)
        ident = f"amend-{number}"
        entry = next((item for item in document.get("amendments", []) if item["id"] == ident), None)
        if entry is not None:  # applied by an attempt that died before its outcome: say only what it did not
            said = _progress.lines_of(workdir / _progress.LOG_FILE)
            lines += [line for line in _take_in(document, book, entry) if line not in said]
        else:
            try:
                document, entry = _amended(workdir, document, book, request, ident, durable=durable)
            except rules.AmendmentRefusedError as refusal:
                lines.append(_plan_line(document, f"amendment {path.name} refused: {refusal}"))
                book.amended = number
                continue
            lines += _take_in(document, book, entry)
        book.amended = number
    return document, lines


def _amended(
    workdir: Path,
    document: dict[str, Any],
    book: Book,
    request: Mapping[str, Any],
    ident: str,
    *,
    durable: bool,
) -> tuple[dict[str, Any], dict[str, Any]]:
    kind, stage = request["type"], request["stage_id"]
    stages = {item["id"]: item for item in document["stages"]}
    changes = _changes(document, book, request, stages)
    version = int(document.get("version", 1)) + 1
    entry = {
        "id": ident,
        "version": version,
        "timestamp": _progress.now_iso(),
        "type": kind,
        "stage_id": stage,
        "description": request.get("reason", ""),
        "changes": changes,
        "invalidated_stages": [],
        "approved_by": request.get("operator", "operator"),
    }
    amended_stages = rules.changed_stages(document["stages"], entry)
    cycle = find_cycle({item["id"]: item.get("depends_on", []) for item in amended_stages})
    if cycle is not None:
        raise rules.AmendmentRefusedError(
            f"the {kind} of stage {stage!r} makes a cycle: {' -> '.join(cycle)}"
        )
    entry["invalidated_stages"] = _invalidated(book, kind, stage, changes, amended_stages)
    template = request.get("template")
    if kind in rules.REDEFINING:
        if not isinstance(template, Mapping):
            raise rules.AmendmentRefusedError(f"the {kind} of stage {stage!r} carries no stage template")
        _write_template(workdir / TEMPLATES_DIR / f"{stage}.v{version}", template, durable=durable)
    amended = {
        **document,
        "version": version,
        "stages": amended_stages,
        "amendments": [*document.get("amendments", []), entry],
    }
    _progress.write_state(workdir / CURRENT_PLAN, amended, durable=durable)
    return amended, entry


def _changes(
    document: Mapping[str, Any], book: Book, request: Mapping[str, Any], stages: Mapping[str, Any]
) -> dict[str, Any]:
    """The amendment's ``changes``, checked against the plan as it is now."""
    kind, stage = request["type"], request["stage_id"]
    if kind not in rules.TYPES:
        raise rules.AmendmentRefusedError(f"unknown amendment type {kind!r}")
    if kind == "stage_insert":
        return _insert_changes(request, stages)
    if stage not in stages:
        raise rules.AmendmentRefusedError(f"the plan has no stage {stage!r}")
    if stage in rules.skipped(document.get("amendments", [])):
        raise rules.AmendmentRefusedError(f"stage {stage!r} is skipped")
    if kind in rules.SET_MEMBER:
        member = rules.SET_MEMBER[kind]
        values = request.get("set") or {}
        current = stages[stage].get(member) or {}
        return {member: {key: {"old": current.get(key), "new": value} for key, value in values.items()}}
    if kind == "stage_skip":
        rules.skip_refusal(document["stages"], stage, document.get("amendments", []))
    status = "completed" if book.completed(stage) else ("failed" if book.failed(stage) else "not run")
    if kind == "stage_rerun" and status != "completed":
        raise rules.AmendmentRefusedError(
            f"stage {stage!r} has not completed; only a completed stage is rerun"
        )
    return {"status": {"old": status, "new": "skipped" if kind == "stage_skip" else "invalidated"}}


def _insert_changes(request: Mapping[str, Any], stages: Mapping[str, Any]) -> dict[str, Any]:
    new = request.get("stage")
    if not isinstance(new, Mapping) or new.get("id") != request["stage_id"]:
        raise rules.AmendmentRefusedError("a stage_insert carries the stage it inserts, with its id")
    if new["id"] in stages:
        raise rules.AmendmentRefusedError(f"the plan already has a stage {new['id']!r}")
    for need in [*new.get("depends_on", []), *request.get("before", [])]:
        if need not in stages:
            raise rules.AmendmentRefusedError(
                f"stage {new['id']!r} names {need!r}, which is not a stage of the plan"
            )
    changes: dict[str, Any] = {"stage": {"old": None, "new": dict(new)}}
    before = list(request.get("before", []))
    if before:
        changes["depends_on"] = {
            name: {
                "old": list(stages[name].get("depends_on", [])),
                "new": [*stages[name].get("depends_on", []), new["id"]],
            }
            for name in before
        }
    return changes


def _invalidated(
    book: Book, kind: str, stage: str, changes: Mapping[str, Any], stages: list[dict[str, Any]]
) -> list[str]:
    if kind == "stage_skip":
        return []
    roots = list(changes.get("depends_on") or {}) if kind == "stage_insert" else [stage]
    roots = [name for name in roots if book.current(name) is not None]
    return rules.cascade(
        roots, rules.dependants_of(stages), lambda name: book.completed(name) or book.live(name)
    )


def _take_in(document: Mapping[str, Any], book: Book, entry: Mapping[str, Any]) -> list[str]:
    """Bring the book up to an applied amendment; its log lines."""
    names = {item["id"]: item.get("name") or item["id"] for item in document["stages"]}
    when = str(entry["timestamp"])
    lines = []
    for stage in entry["invalidated_stages"]:
        if book.current(stage) is not None:
            record = book.entry(stage)
            record.setdefault("history", []).append(record["jobs"].pop())
            record["invalidated"] = entry["version"]
        lines.append(_progress.stage_line(when, stage, names.get(stage, stage), "invalidated"))
    if entry["type"] == "stage_skip":
        lines.append(_progress.stage_line(when, entry["stage_id"], names[entry["stage_id"]], "skipped"))
    affected = ", ".join(entry["invalidated_stages"]) or "none"
    summary = (
        f"amendment {entry['id']} ({entry['type']} of stage {entry['stage_id']}) makes version "
        f"{entry['version']}, approved by {entry['approved_by']}: {entry['description'] or 'no reason given'}"
        f"; invalidated: {affected}"
    )
    return [_plan_line(document, summary, when), *lines]


def _plan_line(document: Mapping[str, Any], message: str, when: str | None = None) -> str:
    return _progress.plan_line(when or _progress.now_iso(), str(document["workflow_id"]), message)


def _write_template(target: Path, template: Mapping[str, Any], *, durable: bool) -> None:
    """The stage job's template, written whole under a temporary name and renamed into place."""
    if (target / "stage.json").is_file():
        return  # an earlier attempt of this activation wrote it
    temporary = target.with_name(f".{target.name}.tmp.{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    files: Mapping[str, str] = template.get("files") or {}
    for relative, data in files.items():
        (temporary / relative).parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(temporary / relative, base64.b64decode(data), durable=durable)
    job = (json.dumps(template["job"], indent=2) + "\n").encode()
    replace_atomically(temporary / "stage.json", job, durable=durable)
    shutil.rmtree(target, ignore_errors=True)
    os.rename(temporary, target)
    if durable:
        _progress.fsync_dir(target.parent)
    done("template", target)
