"""``collect``: one record per finished job, with the result document its workflow committed. Read-only.

A workflow that computes something stores its results as one JSON document in the job's transactional
``data/``, committed with its succeed outcome (the packaged VASP workflows write ``data/results.json``,
``schemas/vasp-results.schema.json``). The engine knows no workflow: :func:`collect_results` walks the
finished kinds -- succeeded, failed, cancelled -- in ``job list``'s listing order, reads each job's
job.json (its ``workflow``, whether its data is transactional) and ``data/<document>`` (``results.json``
unless asked for another), and yields one :class:`ResultRecord` per job.

A record is **degraded** when its results are missing or not to be taken whole, and ``problems`` says
why, one sentence each:

- the job failed (its failure's code and message) or was cancelled;
- job.json cannot be read, or the job keeps no transactional data;
- the document is missing, not a regular file, larger than :data:`MAX_RESULT_BYTES`, or not a strict
  JSON object (``_jsonio``'s rules);
- the document's own ``warnings``: a workflow may list, as strings, what its results lack (the VASP
  workflows say when values come from OUTCAR because vasprun.xml was incomplete).

A stray entry in the state tree is not a job and yields no record (``workspace fsck`` reports it).

Cost: O(finished jobs), which is why it is in DESIGN's complexity budget: per job one job.json and one
document read, and for a failed or cancelled job one frame read; the state directories are listed and
sorted as ``job list`` lists them. Records are yielded as they are read, so memory stays that of one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from httk.workflow.engine.core._scan import Anomaly
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace
from httk.workflow.protocol import InvalidDocumentError, InvalidNameError
from httk.workflow.protocol._jsonio import read_json_object

from ._events import printable
from ._inspect import iter_jobs, marker_identity
from ._show import read_job, read_marker_frame

FINISHED = (Kind.SUCCEEDED, Kind.FAILED, Kind.CANCELLED)
DEFAULT_DOCUMENT = "results.json"
MAX_RESULT_BYTES = 64 << 20
"""The largest result document read (64 MiB: a long relaxation's every ionic step fits many times)."""
MAX_WARNINGS = 20
_MISSING = " is missing"
Progress = Callable[[str, int], None]


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """One finished job: who it is, its result document (``None`` when there is none to read), and why
    the record is degraded (``problems``, empty when it is not)."""

    marker: MarkerLocation
    workflow: str | None
    payload: Path
    document: str
    results: dict[str, Any] | None
    problems: tuple[str, ...]

    @property
    def degraded(self) -> bool:
        return bool(self.problems)

    def as_dict(self) -> dict[str, Any]:
        """The record as ``collect --json`` prints it."""
        identity = marker_identity(self.marker)
        return {
            "job_id": identity["job_id"],
            "job_key": identity["job_key"],
            "tag": identity["tag"],
            "placement": identity["placement"],
            "kind": identity["kind"],
            "workflow": self.workflow,
            "payload": str(self.payload),
            "document": f"data/{self.document}",
            "degraded": self.degraded,
            "problems": list(self.problems),
            "results": self.results,
        }

    def cells(self) -> tuple[str, str, str, str]:
        """The record as one row of ``collect``'s table: job, kind, workflow, and ``ok`` or why not;
        printable (a workflow's name and warnings are a runner's text)."""
        verdict = "; ".join(self.problems) if self.problems else "ok"
        workflow = "-" if self.workflow is None else printable(self.workflow, 40)
        return (
            f"{self.marker.placement}/{self.marker.job_key}",
            self.marker.kind.value,
            workflow,
            printable(verdict),
        )

    def columns(self) -> dict[str, Any]:
        """The record as one row of ``collect --csv``: the job, then every scalar member of the results
        under its dotted path (``results.energy.energy``); arrays are left to ``--json``."""
        identity = marker_identity(self.marker)
        row: dict[str, Any] = {
            "job_key": identity["job_key"],
            "job_id": identity["job_id"],
            "placement": identity["placement"],
            "kind": identity["kind"],
            "workflow": self.workflow,
            "degraded": self.degraded,
            "problems": "; ".join(self.problems),
        }
        if self.results is not None:
            row.update(scalar_members(self.results, "results"))
        return row


def scalar_members(value: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    """Every string, number, boolean and null below ``value`` by dotted path, objects entered, arrays not.

    Examples
    --------
    >>> dict(scalar_members({"energy": {"e0": -10.5}, "forces": [[0, 0, 1]], "ok": True}, "results"))
    {'results.energy.e0': -10.5, 'results.ok': True}
    """
    for key, member in value.items():
        path = f"{prefix}.{key}"
        if isinstance(member, Mapping):
            yield from scalar_members(member, path)
        elif not isinstance(member, list):
            yield path, member


def check_document(document: str) -> str:
    """``document`` as a path below data/: relative, normalized, never leaving data/."""
    path = PurePosixPath(document)
    if not document or path.is_absolute() or any(part in ("", ".", "..") for part in document.split("/")):
        raise InvalidNameError("result document", document, "must be a relative path inside data/")
    return str(path)


def collect_results(
    workspace: Workspace,
    *,
    workflow: str | None = None,
    placement: str | None = None,
    document: str = DEFAULT_DOCUMENT,
    progress: Progress | None = None,
) -> Iterator[ResultRecord]:
    """One record per finished job (at or below ``placement``; of ``workflow`` when given), in listing
    order; ``progress("collecting results", done)`` after each job looked at."""
    document = check_document(document)
    stream = iter_jobs(workspace, kinds=FINISHED, placement=placement)
    done = 0
    try:
        for item in stream:
            if isinstance(item, Anomaly):
                continue
            record = _record(workspace, item, document, workflow)
            done += 1
            if progress is not None:
                progress("collecting results", done)
            if record is not None:
                yield record
    finally:
        stream.close()


def _record(
    workspace: Workspace, marker: MarkerLocation, document: str, wanted: str | None
) -> ResultRecord | None:
    payload = workspace.payload_path(marker.placement, marker.job_key)
    job, job_problem, _digest = read_job(payload)
    name = job.get("workflow") if job is not None else None
    name = name if isinstance(name, str) else None
    if wanted is not None and name != wanted:
        return None
    problems = [] if job_problem is None else [f"job.json: {job_problem}"]
    if marker.kind is not Kind.SUCCEEDED:
        problems.append(_ending(workspace, marker))
    results = None
    data = (job or {}).get("data")
    if job is not None and not (isinstance(data, Mapping) and data.get("mode") == "transactional"):
        problems.append("the job keeps no transactional data/, so it has no committed results")
    elif job is not None:
        results, problem = _read_results(payload / "data" / document, document)
        if problem is not None and (marker.kind is Kind.SUCCEEDED or not problem.endswith(_MISSING)):
            problems.append(problem)  # that a failed job has no results, its failure says already
        problems.extend(_warnings(results))
    return ResultRecord(marker, name, payload, document, results, tuple(problems))


def _ending(workspace: Workspace, marker: MarkerLocation) -> str:
    """Why a failed or cancelled job has no results, from its frame."""
    frame = read_marker_frame(workspace, marker).frame or {}
    if marker.kind is Kind.CANCELLED:
        cancellation = frame.get("cancellation")
        reason = frame.get("operator_reason")
        verified = cancellation.get("verified") if isinstance(cancellation, Mapping) else None
        return f"cancelled{f': {reason}' if isinstance(reason, str) else ''}" + (
            f" (verified: {verified})" if isinstance(verified, str) else ""
        )
    failure = frame.get("failure")
    if isinstance(failure, Mapping):
        return f"failed: {failure.get('code')}: {failure.get('message', '')}"
    return "failed (its state frame cannot be read)"


def _read_results(path: Path, document: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return read_json_object(path, document=f"data/{document}", max_bytes=MAX_RESULT_BYTES), None
    except InvalidDocumentError as exc:
        if isinstance(exc.__cause__, FileNotFoundError | NotADirectoryError):
            return None, f"data/{document}{_MISSING}"
        return None, f"data/{document} {exc.rule}"  # the record names the payload already


def _warnings(results: Mapping[str, Any] | None) -> list[str]:
    warnings = (results or {}).get("warnings")
    if not isinstance(warnings, list):
        return []
    said = [
        f"the results say: {printable(text)}" for text in warnings[:MAX_WARNINGS] if isinstance(text, str)
    ]
    if len(warnings) > MAX_WARNINGS:
        said.append(f"and {len(warnings) - MAX_WARNINGS} more warnings")
    return said
