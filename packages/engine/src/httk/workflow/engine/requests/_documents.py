"""Operator requests as documents: the one shape (D13), its strict reading, and which kinds each action fits.

A request is ``requests/ready/<request_id>.json``, one JSON object::

    {"format": "httk-workflow-request", "format_version": 1, "request_id", "job_id", "job_key",
     "placement", "expected_generation", "expected_record_ref", "action", "operator", "reason",
     "created_at"}  + "priority" (set_priority), "step" (override_step), "force" (continue, override_step)
                    + "operator_key" and "signature" together when it is signed (D20, :mod:`._signatures`)

:func:`parse_request` is stricter than the schema on purpose: every name is checked with the protocol's
own validators, the file must be named after its ``request_id``, ``job_key`` must end in ``job_id``,
generation 0 goes with ``init`` and only with it, and a signature's two members come together, each in
its one canonical spelling (whether the signature verifies is the manager's next question). Anything it
refuses is *malformed* and is quarantined, never retired (``spec/01``, "Manual continuation and control
requests"). Unknown members are ignored.

:func:`refusal` is the spec's narrow action-validity list as data; the manager retires a request it
refuses, and the client refuses the same request before publishing it. Pure: no I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from httk.workflow.engine.core._states import OWNED_KINDS, Kind, Trigger, sources
from httk.workflow.protocol import (
    GENERATION_BITS,
    INIT_REF,
    InvalidDocumentError,
    InvalidNameError,
    JobKey,
    RecordRef,
    validate_placement,
    validate_priority,
    validate_step,
    validate_uuid,
)
from httk.workflow.protocol._jsonio import has_format, parse_json_object
from httk.workflow.protocol._signing import SignatureFormatError, decode_operator_key, decode_signature

REQUEST_FORMAT = "httk-workflow-request"
REQUEST_SUFFIX = ".json"
MAX_REQUEST_BYTES = 64 * 1024
"""A request is a few hundred bytes; anything near this is not one."""

ACTIONS = ("continue", "override_step", "cancel", "set_priority", "pause")
FORCEABLE = frozenset({"continue", "override_step"})
"""The actions whose hazard ``force`` accepts: reviving a child a decided join consumed."""

K = Kind
T = Trigger
ACTION_TRIGGERS: Mapping[str, tuple[Trigger, ...]] = {
    "continue": (T.OPERATOR_CONTINUE,),
    "override_step": (T.OPERATOR_CONTINUE,),
    "set_priority": (T.SET_PRIORITY,),
    "pause": (T.PAUSE,),
    "cancel": (T.CANCEL, T.CANCEL_FENCE),
}
"""The moves each action makes when the manager applies it."""

# Invariant: exactly the specification's "Action validity is deliberately narrow" list
# (tests/engine/requests/test_documents.py pins it): the kinds each action's moves leave, and for a cancel
# also ``cancelling``, where the request is accepted and changes nothing (the first cancel is under way).
VALID_KINDS: Mapping[str, frozenset[Kind]] = {
    action: sources(*triggers) | ({K.CANCELLING} if action == "cancel" else frozenset())
    for action, triggers in ACTION_TRIGGERS.items()
}
_ATTEMPT_UNDER_WAY = OWNED_KINDS - {K.CANCELLING}  # a cancelling attempt is already being stopped
_TIMESTAMP_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z\Z")


class MalformedRequestError(InvalidDocumentError):
    """A request file that violates the protocol: it is quarantined, never applied or retired."""

    def __init__(self, member: str, rule: str, path: str | None = None) -> None:
        super().__init__("request", member, rule, path)


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed, well-formed request. ``document`` is what was read, unknown members included."""

    request_id: str
    job_id: str
    job_key: str
    placement: str
    expected_generation: int
    expected_record_ref: str
    action: str
    operator: str
    reason: str
    priority: int | None
    step: str | None
    force: bool
    document: dict[str, Any]
    operator_key: str | None = None
    signature: str | None = None
    verified_key: str | None = None
    """``operator_key`` once the manager has verified the signature (:func:`verified`), else None."""

    @property
    def file_name(self) -> str:
        return self.request_id + REQUEST_SUFFIX

    def frame_members(self) -> dict[str, Any]:
        """What every frame this request causes records about it (the frame's own ``reason`` is a code);
        ``operator_key`` only when its signature was verified."""
        members = {"operator": self.operator, "operator_reason": self.reason, "request_id": self.request_id}
        if self.verified_key is not None:
            members["operator_key"] = self.verified_key
        return members

    def verified(self) -> Request:
        """This request, its signature verified (the caller has checked it: :mod:`._signatures`)."""
        return replace(self, verified_key=self.operator_key)


def request_document(
    *,
    request_id: str,
    job_key: str,
    placement: str,
    expected_generation: int,
    expected_record_ref: str,
    action: str,
    operator: str,
    reason: str,
    created_at: str,
    priority: int | None = None,
    step: str | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """The D13 document; ``priority``/``step``/``force`` only where the action needs them."""
    document: dict[str, Any] = {
        "format": REQUEST_FORMAT,
        "format_version": 1,
        "request_id": request_id,
        "job_id": JobKey.parse(job_key).job_id,
        "job_key": job_key,
        "placement": placement,
        "expected_generation": expected_generation,
        "expected_record_ref": expected_record_ref,
        "action": action,
        "operator": operator,
        "reason": reason,
        "created_at": created_at,
    }
    if action == "set_priority":
        document["priority"] = priority
    if action == "override_step":
        document["step"] = step
    if action in FORCEABLE and force:
        document["force"] = True
    return document


def parse_request(data: bytes, file_name: str, *, path: str | None = None) -> Request:
    """Read one request file's bytes strictly; raises :class:`MalformedRequestError` naming the defect."""
    if not file_name.endswith(REQUEST_SUFFIX):
        raise MalformedRequestError("", f"the file name {file_name!r} is not <request_id>.json", path)
    try:
        document = parse_json_object(data, document="request", path=path, max_bytes=MAX_REQUEST_BYTES)
    except InvalidDocumentError as exc:
        raise MalformedRequestError("", exc.rule, path) from None
    return _request(document, file_name[: -len(REQUEST_SUFFIX)], path)


def _request(document: dict[str, Any], stem: str, path: str | None) -> Request:
    if not has_format(document, REQUEST_FORMAT):
        raise MalformedRequestError("format", f"must be {REQUEST_FORMAT!r} with format_version 1", path)
    request_id = _name(document, "request_id", lambda v: validate_uuid(v, "request id"), path)
    if request_id != stem:
        raise MalformedRequestError("request_id", f"does not match the file name {stem}.json", path)
    job_id = _name(document, "job_id", validate_uuid, path)
    key = _name(document, "job_key", lambda v: str(JobKey.parse(v)), path)
    if JobKey.parse(key).job_id != job_id:
        raise MalformedRequestError("job_key", "must end in job_id", path)
    placement = _name(document, "placement", validate_placement, path)
    generation, ref = _expected(document, path)
    action = document.get("action")
    if action not in ACTIONS:
        raise MalformedRequestError("action", f"must be one of {', '.join(ACTIONS)}", path)
    operator = document.get("operator")
    if not isinstance(operator, str) or not operator:
        raise MalformedRequestError("operator", "must be a nonempty string", path)
    reason = document.get("reason")
    if not isinstance(reason, str):
        raise MalformedRequestError("reason", "must be a string", path)
    created = document.get("created_at")
    if not isinstance(created, str) or not _TIMESTAMP_RE.match(created):
        raise MalformedRequestError("created_at", "must be an RFC 3339 UTC timestamp ending in Z", path)
    force = document.get("force", False)
    if not isinstance(force, bool):
        raise MalformedRequestError("force", "must be true or false", path)
    operator_key, signature = _signature(document, path)
    return Request(
        request_id=request_id,
        job_id=job_id,
        job_key=key,
        placement=placement,
        expected_generation=generation,
        expected_record_ref=ref,
        action=action,
        operator=operator,
        reason=reason,
        priority=_name(document, "priority", validate_priority, path) if action == "set_priority" else None,
        step=_name(document, "step", validate_step, path) if action == "override_step" else None,
        force=force,
        document=document,
        operator_key=operator_key,
        signature=signature,
    )


def _signature(document: Mapping[str, Any], path: str | None) -> tuple[str | None, str | None]:
    """The request's ``operator_key`` and ``signature``, both or neither, each well spelled."""
    key, signature = document.get("operator_key"), document.get("signature")
    if key is None and signature is None:
        return None, None
    if key is None or signature is None:
        missing = "operator_key" if key is None else "signature"
        raise MalformedRequestError(missing, "is required in a signed request (it has the other one)", path)
    for member, value, decode in (
        ("operator_key", key, decode_operator_key),
        ("signature", signature, decode_signature),
    ):
        try:
            decode(value)
        except SignatureFormatError as exc:
            raise MalformedRequestError(member, str(exc), path) from None
    return key, signature


def _name(document: Mapping[str, Any], member: str, check: Any, path: str | None) -> Any:
    if member not in document:
        raise MalformedRequestError(member, "is required", path)
    try:
        return check(document[member])
    except InvalidNameError as exc:
        raise MalformedRequestError(member, exc.rule, path) from None


def _expected(document: Mapping[str, Any], path: str | None) -> tuple[int, str]:
    generation = document.get("expected_generation")
    if isinstance(generation, bool) or not isinstance(generation, int):
        raise MalformedRequestError("expected_generation", "must be an integer", path)
    if not 0 <= generation < 1 << GENERATION_BITS:
        raise MalformedRequestError("expected_generation", "must be an unsigned 64-bit number", path)
    ref = document.get("expected_record_ref")
    if not isinstance(ref, str):
        raise MalformedRequestError("expected_record_ref", "must be a string", path)
    if (ref == INIT_REF) != (generation == 0):
        raise MalformedRequestError("expected_record_ref", "generation 0 and only it expects 'init'", path)
    if ref != INIT_REF:
        try:
            RecordRef.parse(ref)
        except InvalidNameError as exc:
            raise MalformedRequestError("expected_record_ref", exc.rule, path) from None
    return generation, ref


def refusal(action: str, kind: Kind) -> str | None:
    """Why ``action`` cannot apply to a job in ``kind`` (the reason a request is retired with), or None."""
    if kind in VALID_KINDS[action]:
        return None
    if action in ("continue", "override_step"):
        return f"{action} applies only to a failed or paused job; the job is {kind.value}"
    if action == "cancel":
        return f"cancel applies only to a job that is not terminal; the job is already {kind.value}"
    allowed = {"set_priority": "submitted, ready, waiting, paused or failed"}.get(
        action, "submitted, ready or waiting"
    )
    text = f"{action} applies only to a {allowed} job; the job is {kind.value}"
    if kind in _ATTEMPT_UNDER_WAY:
        text += " and its marker belongs to the manager running it (cancel stops live work)"
    return text


APPLIED, RETIRE, QUARANTINE, HOLD = "applied", "retire", "quarantine", "hold"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What becomes of a claimed request: applied (remove it), retire, quarantine, or hold (retry later)."""

    what: str
    reason: str = ""
