"""The protocol documents of httk-workflow: their JSON Schemas and the pydantic models generated from them.

``schemas/`` holds one JSON Schema (draft 2020-12) per protocol document -- format.json, job.json, the
failure object, outcome.json, the transaction manifest, spawn.json, the attempt context, the state frame,
requests and their retirement records, the manager heartbeat and manifest, the gc frame, the quarantine
record, the detached-transfer documents (manifest, carried history, acknowledgement, ledger entry),
a runner-reported event, the results of the packaged VASP workflows and the stage plan of
``httk workflow plan`` -- plus
``common.schema.json`` with the definitions they share. The schemas are the contract. The models are
derived from them by ``scripts/generate_models.py``, all into the one module ``_generated``, and never
edited by hand.

Rules a schema cannot express (byte limits of a serialization, path containment, digest agreement,
uniqueness within a list) are checked by ``httk.workflow.protocol``, not here; and the generated models
do not apply the schemas' conditional requirements (``if``/``then``) or exclusions (``not``), which only
:func:`validator` does.

Importing this package is cheap: the models are imported on first use of their name, and jsonschema only
when :func:`validator` is first called, because a runner process pays for every import on every attempt.

Examples
--------
>>> from httk.workflow.models import Failure, validator
>>> Failure.model_validate({"code": "vasp.nonconvergent", "message": "did not converge"}).retryable
False
>>> validator("failure").is_valid({"code": "two words", "message": "m"})
False
"""

from __future__ import annotations

import functools
import importlib
import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # No stubs for jsonschema are installed (types-jsonschema is not a dev requirement yet).
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from referencing import Registry

    from ._generated import (
        AttemptContext,
        DetachAcknowledgement,
        DetachRequest,
        Failure,
        FailureBreadcrumb,
        FormatDocument,
        GcFrame,
        Heartbeat,
        JobDefinition,
        ManagerManifest,
        Outcome,
        QuarantineRecord,
        Request,
        RetiredRequest,
        RunnerEvent,
        Spawn,
        StagePlan,
        StateFrame,
        TransactionManifest,
        TransferAcknowledgement,
        TransferHistory,
        TransferLedgerEntry,
        TransferManifest,
        VaspResults,
    )

__all__ = [
    "AttemptContext",
    "DetachAcknowledgement",
    "DetachRequest",
    "Failure",
    "FailureBreadcrumb",
    "FormatDocument",
    "GcFrame",
    "Heartbeat",
    "JobDefinition",
    "ManagerManifest",
    "Outcome",
    "QuarantineRecord",
    "Request",
    "RetiredRequest",
    "RunnerEvent",
    "Spawn",
    "StagePlan",
    "StateFrame",
    "TransactionManifest",
    "TransferAcknowledgement",
    "TransferHistory",
    "TransferLedgerEntry",
    "TransferManifest",
    "VaspResults",
    "load_schema",
    "schema_path",
    "validator",
]

# The top-level model of each document: exported name -> schema name.
_MODELS: dict[str, str] = {
    "AttemptContext": "attempt-context",
    "DetachAcknowledgement": "detach-acknowledgement",
    "DetachRequest": "detach-request",
    "Failure": "failure",
    "FailureBreadcrumb": "error",
    "FormatDocument": "format",
    "GcFrame": "gc",
    "Heartbeat": "heartbeat",
    "JobDefinition": "job",
    "ManagerManifest": "manager",
    "Outcome": "outcome",
    "QuarantineRecord": "quarantine",
    "Request": "request",
    "RetiredRequest": "retired-request",
    "RunnerEvent": "runner-event",
    "Spawn": "spawn",
    "StagePlan": "stage-plan",
    "StateFrame": "state-frame",
    "TransactionManifest": "transaction",
    "TransferAcknowledgement": "transfer-ack",
    "TransferHistory": "transfer-history",
    "TransferLedgerEntry": "transfer-ledger",
    "TransferManifest": "transfer-manifest",
    "VaspResults": "vasp-results",
}

# Every schema file is ``schemas/<name>.schema.json``; ``common`` holds only shared definitions.
_SCHEMA_NAMES = frozenset({"common", *_MODELS.values()})


def __getattr__(name: str) -> Any:
    """Import a document model on first use (PEP 562), so that importing the package stays cheap."""
    if name not in _MODELS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    model = getattr(importlib.import_module(f"{__name__}._generated"), name)
    globals()[name] = model
    return model


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _check_name(name: str) -> str:
    if name not in _SCHEMA_NAMES:
        known = ", ".join(sorted(_SCHEMA_NAMES))
        raise ValueError(f"unknown schema {name!r}; expected one of: {known}")
    return name


def schema_path(name: str) -> Path:
    """Return the path of ``schemas/<name>.schema.json``.

    Examples
    --------
    >>> schema_path("job").name
    'job.schema.json'
    """
    resource = resources.files(__name__) / "schemas" / f"{_check_name(name)}.schema.json"
    if not isinstance(resource, Path):
        raise RuntimeError(f"{__name__} is not installed as plain files; cannot name a path for {name!r}")
    return resource


def load_schema(name: str) -> dict[str, Any]:
    """Return the parsed JSON Schema ``schemas/<name>.schema.json``.

    Examples
    --------
    >>> load_schema("state-frame")["$id"]
    'https://httk.org/schemas/workflow/state-frame.schema.json'
    """
    resource = resources.files(__name__) / "schemas" / f"{_check_name(name)}.schema.json"
    document: dict[str, Any] = json.loads(resource.read_text(encoding="utf-8"))
    return document


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """Return a cached JSON Schema validator for document ``name`` that resolves ``common.schema.json``.

    It is a Draft 2020-12 validator that applies everything the schema says, including the conditional
    requirements and exclusions the generated models cannot express, with one correction: ``pattern``
    anchors have their ECMA-262 meaning (``$`` is the end of the string, not "before a final newline").
    jsonschema is imported on the first call only.

    Examples
    --------
    >>> validator("outcome").is_valid({"format": "httk-workflow-outcome"})
    False
    """
    from ._validation import build_validator

    return build_validator(load_schema(name), _registry())


@functools.cache
def _registry() -> Registry[Any]:
    from ._validation import build_registry

    return build_registry([load_schema(name) for name in sorted(_SCHEMA_NAMES)])
