"""Inputs a stage takes from a dependency's result: ``{"from_stage": ID, "path": P}`` as an input value.

A stage often needs what the stage before it made -- a static run the relaxed structure of its
relaxation. An input (or parameter) whose value is an object with exactly the members ``from_stage``
(one of the stage's ``depends_on``) and ``path`` (relative to that dependency's job payload, such as
``data/CONTCAR``) names that file (``schemas/stage-plan.schema.json``, ``stage_output``). Nothing can
read it at submission, so:

* :func:`problems` checks a stage's references as ``plan submit`` checks everything else, naming the
  member at fault;
* the stage's template (``stage.json``) records each one under :data:`MEMBER`, keyed by the payload path
  the file gets in the stage's job (``files/<name>``, or a workflow's destination such as
  ``files/POSCAR``), and the job's input already holds that path;
* the coordinator, when it starts the stage, reads each file from the current job of the dependency
  (:func:`read_outputs`; for a checked stage, from the work its job checked, :func:`payload_of`) and
  puts it in the new job's payload. A file it cannot read keeps the stage from
  starting: the stage is then ``failed`` with the reason, until ``plan retry``.

Imports: the standard library only (the coordinator, ``plan submit`` and ``plan amend`` use it); the
journal reader of :mod:`._records` only when a checked stage's work is looked up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

MEMBER = "stage_outputs"
"""The member of a stage template (``stage.json``) that lists its references: payload path to reference."""
KEYS = frozenset({"from_stage", "path"})
MAX_BYTES = 64 << 20
"""The largest file a reference copies (an input file, not a data set)."""
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")


def is_reference(value: object) -> bool:
    """Whether an input value is a stage output reference (an object naming ``from_stage``).

    Examples
    --------
    >>> is_reference({"from_stage": "relax", "path": "data/CONTCAR"}), is_reference("POSCAR")
    (True, False)
    """
    return isinstance(value, Mapping) and "from_stage" in value


def references(stage: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The stage's inputs and parameters (a parameter winning) that are references, by input name."""
    merged = {**(stage.get("inputs") or {}), **(stage.get("parameters") or {})}
    return {name: value for name, value in merged.items() if is_reference(value)}


def problems(stage: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(member, rule)`` for each reference of ``stage`` that cannot be read when the stage starts.

    Examples
    --------
    >>> stage = {"id": "b", "depends_on": ["a"], "inputs": {"x": {"from_stage": "c", "path": "o"}}}
    >>> for member, rule in problems(stage):
    ...     print(member, rule, sep=": ")
    inputs.x.from_stage: stage 'b' takes input 'x' from stage 'c', which is not one of its depends_on (a)
    """
    needs = list(stage.get("depends_on") or [])
    for member in ("inputs", "parameters"):
        for name, value in (stage.get(member) or {}).items():
            if not is_reference(value):
                continue
            where = f"{member}.{name}"
            extra = sorted(set(value) - KEYS)
            if extra or "path" not in value:
                yield (
                    where,
                    (
                        "a stage output reference has exactly the members from_stage and path, "
                        f"not {sorted(value)}"
                    ),
                )
                continue
            source, path = value["from_stage"], value["path"]
            if source not in needs:
                yield (
                    f"{where}.from_stage",
                    f"stage {stage['id']!r} takes input {name!r} from stage {source!r}, which is not one of "
                    f"its depends_on ({', '.join(needs) or 'none'})",
                )
            elif not _relative(path):
                yield f"{where}.path", f"{path!r} is not a path relative to the job's payload without . or .."
            elif "runner" in stage and not _FILE_NAME.match(name):
                yield (
                    where,
                    f"input {name!r} names the file the reference becomes; it must be a plain file name",
                )


def _relative(path: object) -> bool:
    if not isinstance(path, str) or not path or path.startswith("/") or "\0" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def readers(stages: list[Mapping[str, Any]], source: str) -> list[str]:
    """The ids of the stages that take an input from ``source``'s output."""
    return [
        stage["id"]
        for stage in stages
        if any(ref.get("from_stage") == source for ref in references(stage).values())
    ]


def payload_of(workspace_dir: Path, job: Mapping[str, Any], *, checked: bool) -> Path | None:
    """Where a stage's results are: its job's payload, or for a checked stage its work's (``None``:
    the work cannot be found).

    A checked stage's job runs the stage runner, which spawns the work as its child labelled ``work``;
    the job's current frame carries the join summary of its ``check`` activation, which names the work's
    payload (spec/01: each observation's ``payload_path``).
    """
    if not checked:
        return workspace_dir / str(job["placement"]) / str(job["job_key"])
    from ._records import read_frame  # the journal reader, only for a checked stage

    frame = read_frame(workspace_dir, str(job.get("record_ref")))
    summary = (frame or {}).get("join_summary") or {}
    for observation in summary.get("observations") or []:
        if observation.get("label") == "work" and isinstance(observation.get("payload_path"), str):
            return workspace_dir / str(observation["payload_path"])
    return None


def read_outputs(
    template: Mapping[str, Any], payloads: Mapping[str, tuple[str, Path | None]]
) -> tuple[dict[str, bytes], str | None]:
    """The files of ``template``'s references, read from the payloads of their stages' current jobs.

    ``payloads`` maps each stage a reference names to its job key and results payload (:func:`payload_of`;
    ``None`` when it has none). Returns the files by payload path, and ``None``; or nothing and why a file
    cannot be read.
    """
    files: dict[str, bytes] = {}
    for destination, reference in (template.get(MEMBER) or {}).items():
        source, path = reference["from_stage"], reference["path"]
        key, payload = payloads.get(source, ("", None))
        if payload is None:
            return {}, f"stage {source!r} has no job whose {path} it could take ({key or 'no job'})"
        try:
            files[destination] = _read(payload, path)
        except OSError as exc:
            return {}, f"{path} of stage {source!r} ({key}) cannot be read: {exc.strerror or exc}"
    return files, None


def _read(payload: Path, path: str) -> bytes:
    """The bytes of ``payload/path``, refusing a symbolic link out of the payload and a huge file."""
    target = (payload / path).resolve()
    if not target.is_relative_to(payload.resolve()):
        raise OSError(f"it leads out of the job's payload, to {target}")
    fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size > MAX_BYTES:
            raise OSError(f"it is larger than {MAX_BYTES} bytes")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
