"""The JSON Schemas of the protocol documents, and the pydantic models generated from them.

Every example document of spec 01 (``examples/``) and every document written for this project
(``documents/``) must validate with both. Every document of the refusal table breaks one stated rule and
must be refused by the JSON Schema; the model must refuse it too unless the rule is one a generated model
cannot express (a conditional requirement or an exclusion), which the table says case by case, so that
the two never disagree silently.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from httk.workflow import models
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from pydantic import BaseModel, ValidationError
from referencing import Registry, Resource

HERE = Path(__file__).parent
SCHEMAS = models.schema_path("common").parent

# schema name -> the exported top-level model of that document
MODEL_OF: dict[str, str] = {
    "attempt-context": "AttemptContext",
    "detach-acknowledgement": "DetachAcknowledgement",
    "detach-request": "DetachRequest",
    "error": "FailureBreadcrumb",
    "failure": "Failure",
    "format": "FormatDocument",
    "gc": "GcFrame",
    "heartbeat": "Heartbeat",
    "job": "JobDefinition",
    "manager": "ManagerManifest",
    "outcome": "Outcome",
    "quarantine": "QuarantineRecord",
    "request": "Request",
    "retired-request": "RetiredRequest",
    "runner-event": "RunnerEvent",
    "spawn": "Spawn",
    "stage-plan": "StagePlan",
    "state-frame": "StateFrame",
    "transaction": "TransactionManifest",
    "transfer-ack": "TransferAcknowledgement",
    "transfer-history": "TransferHistory",
    "transfer-ledger": "TransferLedgerEntry",
    "transfer-manifest": "TransferManifest",
    "vasp-results": "VaspResults",
}
FORMAT_OF: dict[str, str] = {
    "attempt-context": "httk-workflow-attempt-context",
    "detach-acknowledgement": "httk-workflow-detach-acknowledgement",
    "detach-request": "httk-workflow-detach-request",
    "error": "httk-workflow-error",
    "format": "httk-workflow-filesystem",
    "gc": "httk-workflow-gc",
    "heartbeat": "httk-workflow-heartbeat",
    "job": "httk-workflow-job",
    "manager": "httk-workflow-manager",
    "outcome": "httk-workflow-outcome",
    "quarantine": "httk-workflow-quarantine",
    "request": "httk-workflow-request",
    "retired-request": "httk-workflow-retired-request",
    "runner-event": "httk-workflow-runner-event",
    "spawn": "httk-workflow-spawn",
    "stage-plan": "httk-workflow-stage-plan",
    "state-frame": "httk-workflow-state",
    "transaction": "httk-workflow-transaction",
    "transfer-ack": "httk-workflow-transfer-ack",
    "transfer-history": "httk-workflow-transfer-history",
    "transfer-ledger": "httk-workflow-transfer-ledger",
    "transfer-manifest": "httk-workflow-transfer-manifest",
    "vasp-results": "httk-workflow-vasp-results",
}
SPEC_EXAMPLES = sorted((HERE / "examples").glob("*.json"))
DOCUMENTS = sorted((HERE / "documents").glob("*.json"))


def _schema_name(path: Path) -> str:
    return path.name.split(".")[0]


def _model(schema: str) -> type[BaseModel]:
    model: type[BaseModel] = getattr(models, MODEL_OF[schema])
    return model


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


# --- the schemas themselves -------------------------------------------------------------------------


def test_the_schema_directory_holds_one_schema_per_document_plus_common() -> None:
    names = sorted(path.name for path in SCHEMAS.glob("*.json"))
    assert names == sorted(f"{name}.schema.json" for name in [*MODEL_OF, "common"])


@pytest.mark.parametrize("name", sorted([*MODEL_OF, "common"]))
def test_schema_is_a_valid_2020_12_schema_with_id_title_and_description(name: str) -> None:
    schema = models.load_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://httk.org/schemas/workflow/{name}.schema.json"
    assert schema["title"]
    assert schema["description"]


@pytest.mark.parametrize("name", sorted(FORMAT_OF))
def test_every_document_requires_its_format_and_format_version_1(name: str) -> None:
    schema = models.load_schema(name)
    assert schema["properties"]["format"] == {"const": FORMAT_OF[name], "description": "Document type."}
    assert schema["properties"]["format_version"]["const"] == 1
    assert {"format", "format_version"} <= set(schema["required"])


@pytest.mark.parametrize("name", sorted([*MODEL_OF, "common"]))
def test_every_reference_resolves_in_a_registry_of_the_schema_files(name: str) -> None:
    documents = [_load(path) for path in sorted(SCHEMAS.glob("*.schema.json"))]
    registry: Registry[Any] = Registry().with_resources(
        (document["$id"], Resource.from_contents(document)) for document in documents
    )
    schema = models.load_schema(name)
    resolver = registry.resolver(base_uri=schema["$id"])
    for ref in _refs(schema):
        assert ref.startswith(("#", "common.schema.json#", "failure.schema.json", "outcome.schema.json#")), (
            ref
        )
        resolver.lookup(ref)


def test_closed_objects_are_exactly_the_ones_the_specification_closes() -> None:
    """Unknown members are ignored when reading (spec 01) except in policy, retention and failure, and in
    the trust list of format.json (D20), whose members decide what a manager quarantines.

    A stage plan is written by hand rather than by a program, so its plan, stage, criteria and stage output
    reference objects are closed too: a misspelt member is refused instead of silently meaning nothing.
    """
    closed: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if node.get("additionalProperties") is False:
                closed.append(where)
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")

    for name in sorted([*MODEL_OF, "common"]):
        walk(models.load_schema(name), name)
    assert closed == [
        "common/$defs/retention",
        "failure",
        "format/properties/request_signatures",
        "format/$defs/policy",
        "stage-plan",
        "stage-plan/$defs/stage",
        "stage-plan/$defs/success_criteria",
        "stage-plan/$defs/stage_output",
    ]


def test_patterns_need_no_look_around_so_that_pydantic_can_compile_them() -> None:
    for name in sorted([*MODEL_OF, "common"]):
        text = SCHEMAS.joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
        assert not re.search(r"\(\?<?[=!]", text), name


def test_validator_is_cached() -> None:
    assert models.validator("job") is models.validator("job")


def test_an_unknown_schema_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown schema"):
        models.schema_path("../pyproject")
    with pytest.raises(ValueError, match="unknown schema"):
        models.load_schema("job.json")


# --- documents that must validate -------------------------------------------------------------------


def _assert_valid(path: Path) -> None:
    schema = _schema_name(path)
    document = _load(path)
    errors = [error.message for error in models.validator(schema).iter_errors(document)]
    assert errors == []
    model = _model(schema).model_validate_json(path.read_bytes())
    # Unknown members survive and nothing is invented: the model writes back exactly what it read.
    assert model.model_dump(mode="json", exclude_unset=True) == document


@pytest.mark.parametrize("path", SPEC_EXAMPLES, ids=lambda path: path.name)
def test_spec_example_validates_with_schema_and_model(path: Path) -> None:
    _assert_valid(path)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: path.name)
def test_project_document_validates_with_schema_and_model(path: Path) -> None:
    _assert_valid(path)


def test_every_document_schema_has_an_example() -> None:
    assert {_schema_name(path) for path in SPEC_EXAMPLES + DOCUMENTS} == set(MODEL_OF)


def test_absent_policy_members_read_as_their_defaults() -> None:
    document = _load(HERE / "documents" / "format.core-v1.json")
    document["policy"] = {}
    policy = models.FormatDocument.model_validate(document).policy
    assert policy is not None
    assert (policy.visibility_deadline_seconds, policy.lease_seconds, policy.journal_segment_bytes) == (
        5.0,
        900.0,
        67108864,
    )
    assert models.FormatDocument.model_validate(document).durable is True


# --- documents that must be refused -----------------------------------------------------------------

_DELETE = object()


def _example(name: str) -> Any:
    return _load(HERE / "examples" / name)


def _document(name: str) -> Any:
    return _load(HERE / "documents" / name)


def changed(document: Any, path: tuple[str | int, ...], value: Any = _DELETE) -> Any:
    """Return a copy of ``document`` with the member at ``path`` replaced by ``value`` (or deleted)."""
    result = copy.deepcopy(document)
    target = result
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return result


FORMAT = _example("format.json")
JOB = _example("job.json")
FAILURE = _example("failure.json")
OUTCOME = _example("outcome.minimal.json")
WAIT = _example("outcome.wait.json")
FAIL = _example("outcome.fail.json")
TRANSACTION = _document("transaction.all-ops.json")
FRAME = _example("state-frame.json")
CONTEXT = _example("attempt-context.json")
REQUEST = _document("request.continue.json")
SIGNED = _document("request.signed.json")
FORMAT = _document("format.full.json")
SPAWN = _document("spawn.json")
HEARTBEAT = _document("heartbeat.json")
MANAGER = _document("manager.json")
RETIRED = _example("retired-request.json")
QUARANTINED_REQUEST = _document("quarantine.request.json")
QUARANTINED_MARKER = _document("quarantine.marker.json")
CANCELLING = _document("state-frame.cancelling.json")
RUNNING = _document("state-frame.running.json")
COMMITTING = _document("state-frame.committing.json")
GC = _example("gc.json")
UPPER_UUID = "01234567-89AB-CDEF-0123-456789ABCDEF"
SHA = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"

BOTH = True  # the generated model refuses the document as well
SCHEMA_ONLY = False  # a conditional requirement or exclusion: only the JSON Schema can refuse it

REFUSED = [
    # format.json and its closed policy
    ("format", changed(FORMAT, ("policy", "sharding_depth"), 2), BOTH, "unknown-policy-member"),
    ("format", changed(FORMAT, ("policy", "lease_seconds"), 0.5), BOTH, "lease-seconds-0.5"),
    ("format", changed(FORMAT, ("policy", "journal_segment_bytes"), 100), BOTH, "segment-bytes-100"),
    ("format", changed(FORMAT, ("policy", "journal_segment_bytes"), 8192.5), BOTH, "segment-bytes-fraction"),
    ("format", changed(FORMAT, ("policy", "visibility_deadline_seconds"), 0), BOTH, "deadline-0"),
    ("format", changed(FORMAT, ("policy", "visibility_deadline_seconds"), 86401), BOTH, "deadline-1-day-1s"),
    ("format", changed(FORMAT, ("policy", "retention"), {"log_days": 1}), BOTH, "unknown-retention-member"),
    ("format", changed(FORMAT, ("policy", "retention"), {"trash_days": -1}), BOTH, "negative-retention"),
    ("format", changed(FORMAT, ("policy", "retention"), {"journal_days": "never"}), BOTH, "retention-word"),
    ("format", changed(FORMAT, ("format",), "httk-workflow-workspace"), BOTH, "wrong-format"),
    ("format", changed(FORMAT, ("format_version",), 2), BOTH, "format-version-2"),
    ("format", changed(FORMAT, ("core_profile",), "core-v3"), BOTH, "unknown-core-profile"),
    ("format", changed(FORMAT, ("record_ref_encoding",), "hwref-v2"), BOTH, "other-record-ref-encoding"),
    ("format", changed(FORMAT, ("workspace_id",), UPPER_UUID), BOTH, "uppercase-workspace-uuid"),
    ("format", changed(FORMAT, ("durable",), "no"), BOTH, "durable-not-boolean"),
    ("format", changed(FORMAT, ("settings",), {"vasp command": "x"}), BOTH, "setting-name-with-space"),
    ("format", changed(FORMAT, ("created_at",), "2026-07-24T14:00:00+02:00"), BOTH, "created-at-not-utc"),
    # job.json
    ("job", changed(JOB, ("priority",), 1000), BOTH, "priority-1000"),
    ("job", changed(JOB, ("priority",), -1), BOTH, "priority-negative"),
    ("job", changed(JOB, ("priority",), "500"), BOTH, "priority-string"),
    ("job", changed(JOB, ("id",), UPPER_UUID), BOTH, "uppercase-job-uuid"),
    ("job", changed(JOB, ("id",), "0123456789abcdef0123456789abcdef"), BOTH, "unhyphenated-uuid"),
    ("job", changed(JOB, ("tag",), "silicon--relax"), BOTH, "tag-with-double-dash"),
    ("job", changed(JOB, ("tag",), "Silicon"), BOTH, "tag-uppercase"),
    ("job", changed(JOB, ("tag",), "x" * 49), BOTH, "tag-49-bytes"),
    ("job", changed(JOB, ("runner", "sha256"), SHA), SCHEMA_ONLY, "default-payload-runner-with-sha256"),
    (
        "job",
        changed(changed(JOB, ("runner", "source"), "payload"), ("runner", "sha256"), SHA),
        SCHEMA_ONLY,
        "payload-runner-with-sha256",
    ),
    ("job", changed(JOB, ("runner", "source"), "workspace"), SCHEMA_ONLY, "workspace-runner-without-sha256"),
    ("job", changed(JOB, ("runner", "source"), "installed"), SCHEMA_ONLY, "installed-runner-without-sha256"),
    ("job", changed(JOB, ("runner", "source"), "remote"), BOTH, "unknown-runner-source"),
    ("job", changed(JOB, ("runner", "arguments"), "--fast --quiet"), BOTH, "arguments-as-a-string"),
    ("job", changed(JOB, ("runner", "path"), "/usr/bin/runner"), BOTH, "absolute-runner-path"),
    ("job", changed(JOB, ("runner", "path"), "../runner"), SCHEMA_ONLY, "dot-dot-runner-path"),
    ("job", changed(JOB, ("runner",), _DELETE), BOTH, "missing-runner"),
    ("job", changed(JOB, ("workdir", "mode"), _DELETE), BOTH, "missing-workdir-mode"),
    ("job", changed(JOB, ("workdir", "mode"), "shared"), BOTH, "unknown-workdir-mode"),
    ("job", changed(JOB, ("data", "mode"), _DELETE), BOTH, "missing-data-mode"),
    ("job", changed(JOB, ("data",), _DELETE), BOTH, "missing-data"),
    ("job", changed(JOB, ("claim", "pool"), _DELETE), BOTH, "missing-claim-pool"),
    ("job", changed(JOB, ("claim", "pool"), "GPU"), BOTH, "pool-uppercase"),
    ("job", changed(JOB, ("claim", "required_capabilities"), ["a--b"]), BOTH, "capability-double-dash"),
    ("job", changed(JOB, ("initial_step",), "pre/pare"), BOTH, "step-with-slash"),
    ("job", changed(JOB, ("initial_step",), "prepare\n"), BOTH, "step-final-newline"),
    ("job", changed(JOB, ("claim", "pool"), "default\n"), BOTH, "pool-final-newline"),
    ("job", changed(JOB, ("retry_policy", "maximum_attempts_per_activation"), 0), BOTH, "budget-0"),
    ("job", changed(JOB, ("retry_policy", "retry_on"), ["lease lost"]), BOTH, "retry-on-code-with-space"),
    ("job", changed(JOB, ("resources",), {"procs": -1}), BOTH, "negative-resource"),
    ("job", changed(JOB, ("resources",), {"mem": 1.5}), BOTH, "fractional-resource"),
    ("job", changed(JOB, ("parent",), {"workspace_id": UPPER_UUID}), BOTH, "incomplete-parent"),
    ("job", changed(JOB, ("inputs",), ["not", "an", "object"]), BOTH, "inputs-not-an-object"),
    ("job", changed(JOB, ("declarations",), {"../escape": {}}), BOTH, "declaration-name-with-slash"),
    ("job", changed(JOB, ("declarations",), {"relax": "text"}), BOTH, "declaration-not-an-object"),
    # the failure object: closed
    ("failure", changed(FAILURE, ("severity",), "high"), BOTH, "failure-extra-member"),
    ("failure", changed(FAILURE, ("code",), "vasp nonconvergent"), BOTH, "code-with-whitespace"),
    ("failure", changed(FAILURE, ("code",), ""), BOTH, "code-empty"),
    ("failure", changed(FAILURE, ("code",), "vasp.nonconvergent\n"), BOTH, "code-final-newline"),
    ("failure", changed(FAILURE, ("code",), "x" * 129), BOTH, "code-129-bytes"),
    ("failure", changed(FAILURE, ("message",), ""), BOTH, "message-empty"),
    ("failure", changed(FAILURE, ("message",), _DELETE), BOTH, "message-missing"),
    ("failure", changed(FAILURE, ("retryable",), "no"), BOTH, "retryable-not-boolean"),
    ("failure", changed(FAILURE, ("details",), "see log"), BOTH, "details-not-an-object"),
    # outcome.json
    ("outcome", changed(OUTCOME, ("next_step",), _DELETE), SCHEMA_ONLY, "advance-without-next-step"),
    ("outcome", changed(OUTCOME, ("action",), "explode"), BOTH, "unknown-action"),
    ("outcome", changed(OUTCOME, ("attempt_id",), _DELETE), BOTH, "missing-attempt-id"),
    ("outcome", changed(OUTCOME, ("priority",), 1000), BOTH, "outcome-priority-1000"),
    ("outcome", changed(WAIT, ("join",), _DELETE), SCHEMA_ONLY, "wait-without-join"),
    ("outcome", changed(WAIT, ("next_step",), _DELETE), SCHEMA_ONLY, "wait-without-next-step"),
    ("outcome", changed(WAIT, ("join", "condition"), "at_least"), SCHEMA_ONLY, "at-least-without-count"),
    ("outcome", changed(WAIT, ("join", "condition"), "most"), BOTH, "unknown-join-condition"),
    ("outcome", changed(WAIT, ("join", "count"), 0), BOTH, "join-count-0"),
    ("outcome", changed(WAIT, ("join", "on_impossible", "action"), "fail"), BOTH, "on-impossible-fail"),
    ("outcome", changed(WAIT, ("join", "on_impossible", "next_step"), _DELETE), BOTH, "no-fallback-step"),
    ("outcome", changed(WAIT, ("join", "children", 0, "placement_hint"), _DELETE), BOTH, "child-no-hint"),
    ("outcome", changed(WAIT, ("join", "children", 1, "job_key"), "branch-b"), BOTH, "child-key-no-uuid"),
    ("outcome", changed(FAIL, ("failure",), _DELETE), SCHEMA_ONLY, "fail-without-failure"),
    ("outcome", changed(FAIL, ("failure", "trace"), "..."), BOTH, "fail-with-open-failure"),
    ("outcome", changed(OUTCOME, ("action",), "retry"), SCHEMA_ONLY, "retry-without-reason"),
    ("outcome", changed(changed(OUTCOME, ("action",), "retry"), ("retry",), "again"), BOTH, "retry-string"),
    ("outcome", changed(OUTCOME, ("action",), "pause"), SCHEMA_ONLY, "pause-without-reason"),
    ("outcome", changed(changed(OUTCOME, ("action",), "pause"), ("pause",), {}), BOTH, "pause-empty-object"),
    # transaction manifest
    ("transaction", changed(TRANSACTION, ("operations", 1, "sha256"), _DELETE), BOTH, "put-file-no-sha256"),
    ("transaction", changed(TRANSACTION, ("operations", 1, "source"), _DELETE), BOTH, "put-file-no-source"),
    ("transaction", changed(TRANSACTION, ("operations", 2, "sha256"), "ab"), BOTH, "put-tree-short-digest"),
    ("transaction", changed(TRANSACTION, ("operations", 3, "path"), _DELETE), BOTH, "replace-tree-no-path"),
    ("transaction", changed(TRANSACTION, ("operations", 4, "path"), _DELETE), BOTH, "remove-no-path"),
    ("transaction", changed(TRANSACTION, ("operations", 0, "path"), _DELETE), BOTH, "make-dir-no-path"),
    ("transaction", changed(TRANSACTION, ("operations", 0, "op"), "copy"), BOTH, "unknown-op"),
    ("transaction", changed(TRANSACTION, ("operations", 0, "id"), _DELETE), BOTH, "operation-without-id"),
    ("transaction", changed(TRANSACTION, ("operations", 0, "id"), "a/b"), BOTH, "operation-id-with-slash"),
    ("transaction", changed(TRANSACTION, ("expected_data_generation",), _DELETE), BOTH, "no-expected-gen"),
    ("transaction", changed(TRANSACTION, ("operations", 1, "sha256"), SHA.upper()), BOTH, "uppercase-digest"),
    # spawn.json
    ("spawn", changed(SPAWN, ("children", 0, "label"), _DELETE), BOTH, "spawn-entry-without-label"),
    ("spawn", changed(SPAWN, ("children", 0, "label"), ""), BOTH, "spawn-entry-empty-label"),
    ("spawn", changed(SPAWN, ("children", 1, "spawn_id"), _DELETE), BOTH, "spawn-entry-without-spawn-id"),
    ("spawn", changed(SPAWN, ("children", 1, "placement"), "a//b"), BOTH, "placement-empty-component"),
    # attempt context
    ("attempt-context", changed(CONTEXT, ("attempt_ordinal",), 0), BOTH, "attempt-ordinal-0"),
    ("attempt-context", changed(CONTEXT, ("workdir_mode",), "shared"), BOTH, "context-workdir-mode"),
    ("attempt-context", changed(CONTEXT, ("is_restart",), 1), BOTH, "is-restart-not-boolean"),
    ("attempt-context", changed(CONTEXT, ("children",), [{"job_id": UPPER_UUID}]), BOTH, "bad-observation"),
    ("attempt-context", changed(CONTEXT, ("placement",), "a/../b"), SCHEMA_ONLY, "placement-dot-dot"),
    ("attempt-context", changed(CONTEXT, ("placement",), ".httk-workflow/x"), SCHEMA_ONLY, "placement-httk"),
    # state frame
    ("state-frame", changed(FRAME, ("kind",), "stale"), BOTH, "unknown-kind"),
    ("state-frame", changed(FRAME, ("state_generation",), -1), BOTH, "negative-generation"),
    ("state-frame", changed(FRAME, ("state_generation",), 2**64), BOTH, "generation-over-u64"),
    ("state-frame", changed(FRAME, ("previous_record_ref",), _DELETE), BOTH, "no-previous-record-ref"),
    ("state-frame", changed(FRAME, ("job_id",), UPPER_UUID), BOTH, "frame-uppercase-uuid"),
    ("state-frame", changed(FRAME, ("placement",), "/project-17"), BOTH, "absolute-placement"),
    ("state-frame", changed(FRAME, ("kind",), "failed"), SCHEMA_ONLY, "failed-frame-without-failure"),
    (
        "state-frame",
        changed(changed(FRAME, ("kind",), "failed"), ("failure",), None),
        SCHEMA_ONLY,
        "failed-frame-with-null-failure",
    ),
    ("state-frame", changed(FRAME, ("kind",), "waiting"), SCHEMA_ONLY, "waiting-frame-without-join"),
    ("state-frame", changed(FRAME, ("kind",), "cancelled"), SCHEMA_ONLY, "cancelled-frame-without-evidence"),
    (
        "state-frame",
        changed(changed(FRAME, ("kind",), "cancelled"), ("cancellation",), {}),
        SCHEMA_ONLY,
        "cancelled-frame-unverified",
    ),
    ("state-frame", changed(FRAME, ("cancellation",), {"verified": "signalled"}), BOTH, "unknown-evidence"),
    ("state-frame", changed(FRAME, ("fsck_repair",), {"recovered_record_ref": "r1"}), BOTH, "bad-record-ref"),
    ("state-frame", changed(FRAME, ("process",), {"host": "node17", "pid": 0}), BOTH, "pid-0"),
    ("state-frame", changed(FRAME, ("lease_seconds",), 0), BOTH, "frame-lease-0"),
    ("state-frame", changed(FRAME, ("activation_reason",), "resumed"), BOTH, "unknown-activation-reason"),
    ("state-frame", changed(FRAME, ("unclean_restart",), "yes"), BOTH, "unclean-restart-not-boolean"),
    ("state-frame", changed(FRAME, ("operator_reason",), 7), BOTH, "operator-reason-not-a-string"),
    ("state-frame", changed(FRAME, ("unresolved",), ["branch-a"]), BOTH, "unresolved-not-a-job-key"),
    ("state-frame", changed(CANCELLING, ("cancellation", "fenced_by"), "me"), BOTH, "fenced-by-not-a-uuid"),
    (
        "state-frame",
        changed(CANCELLING, ("cancellation", "control_dir"), "../x"),
        BOTH,
        "control-dir-elsewhere",
    ),
    (
        "state-frame",
        changed(RUNNING, ("takeover", "rule"), "lease_expired_alone"),
        BOTH,
        "unknown-takeover-rule",
    ),
    ("state-frame", changed(RUNNING, ("takeover", "workdir_mode"), _DELETE), BOTH, "takeover-without-mode"),
    ("state-frame", changed(RUNNING, ("process", "start_ticks"), "81723645"), BOTH, "start-ticks-string"),
    ("state-frame", changed(COMMITTING, ("outcome", "action"), _DELETE), BOTH, "outcome-without-action"),
    ("state-frame", changed(COMMITTING, ("outcome", "has_transaction"), 1), BOTH, "has-transaction-not-bool"),
    (
        "state-frame",
        changed(FRAME, ("spawned",), [{"job_id": UPPER_UUID.lower(), "label": "a"}]),
        BOTH,
        "spawned-child-incomplete",
    ),
    (
        "state-frame",
        changed(FRAME, ("released_claim",), {"manager_id": UPPER_UUID.lower()}),
        BOTH,
        "released-claim-incomplete",
    ),
    # request
    ("request", changed(REQUEST, ("action",), "override_step"), SCHEMA_ONLY, "override-step-without-step"),
    ("request", changed(REQUEST, ("action",), "set_priority"), SCHEMA_ONLY, "set-priority-without-priority"),
    ("request", changed(REQUEST, ("action",), "relocate"), BOTH, "extension-action"),
    ("request", changed(REQUEST, ("placement",), _DELETE), BOTH, "request-without-placement"),
    ("request", changed(REQUEST, ("expected_record_ref",), "g7"), BOTH, "request-bad-record-ref"),
    ("request", changed(REQUEST, ("operator",), ""), BOTH, "request-anonymous"),
    ("request", changed(SIGNED, ("operator_key",), _DELETE), SCHEMA_ONLY, "signature-without-key"),
    ("request", changed(SIGNED, ("signature",), _DELETE), SCHEMA_ONLY, "key-without-signature"),
    ("request", changed(SIGNED, ("operator_key",), "rsa:" + SIGNED["operator_key"][8:]), BOTH, "key-prefix"),
    ("request", changed(SIGNED, ("operator_key",), SIGNED["operator_key"][:-2] + "="), BOTH, "key-length"),
    ("request", changed(SIGNED, ("signature",), SIGNED["signature"][:-4] + "===="), BOTH, "bad-base64"),
    ("request", changed(SIGNED, ("signature",), "A" * 86 + "B="), BOTH, "signature-not-canonical"),
    ("format", changed(FORMAT, ("request_signatures", "required"), "yes"), BOTH, "required-not-bool"),
    (
        "format",
        changed(FORMAT, ("request_signatures", "trusted_keys", 0), "ed25519:"),
        BOTH,
        "trusted-bad-key",
    ),
    ("format", changed(FORMAT, ("request_signatures", "keys"), []), BOTH, "trust-unknown-member"),
    # retired request, heartbeat, manager manifest, gc frame
    ("retired-request", changed(RETIRED, ("request",), "ready/x.json"), BOTH, "retired-request-path"),
    ("retired-request", changed(RETIRED, ("manager_id",), UPPER_UUID), BOTH, "retired-uppercase-uuid"),
    ("retired-request", changed(RETIRED, ("retired_at",), "yesterday"), BOTH, "retired-at-not-a-time"),
    ("quarantine", changed(QUARANTINED_REQUEST, ("entry",), "../request-x"), BOTH, "entry-traverses"),
    ("quarantine", changed(QUARANTINED_REQUEST, ("original_path",), "/etc/x"), BOTH, "absolute-original"),
    ("quarantine", changed(QUARANTINED_REQUEST, ("reason",), ""), BOTH, "quarantine-without-why"),
    ("quarantine", changed(QUARANTINED_REQUEST, ("manager_id",), _DELETE), SCHEMA_ONLY, "request-by-nobody"),
    ("quarantine", changed(QUARANTINED_MARKER, ("problem",), _DELETE), SCHEMA_ONLY, "marker-without-problem"),
    ("quarantine", changed(QUARANTINED_MARKER, ("quarantined_by",), "me"), BOTH, "marker-by-another-tool"),
    ("quarantine", changed(QUARANTINED_MARKER, ("job_key",), "x"), BOTH, "marker-bad-job-key"),
    ("heartbeat", changed(HEARTBEAT, ("sequence",), -1), BOTH, "negative-sequence"),
    ("heartbeat", changed(HEARTBEAT, ("pid",), 0), BOTH, "heartbeat-pid-0"),
    ("heartbeat", changed(HEARTBEAT, ("updated_at",), "2026-07-26 09:12:44"), BOTH, "updated-at-not-rfc3339"),
    ("heartbeat", changed(HEARTBEAT, ("writer_id",), _DELETE), BOTH, "heartbeat-without-writer"),
    ("heartbeat", changed(HEARTBEAT, ("lease_seconds",), 0), BOTH, "heartbeat-lease-0"),
    ("manager", changed(MANAGER, ("pools",), ["Default"]), BOTH, "manager-pool-uppercase"),
    ("manager", changed(MANAGER, ("executors",), _DELETE), BOTH, "manager-without-executors"),
    ("manager", changed(MANAGER, ("resources",), {"procs": "64"}), BOTH, "manager-resource-string"),
    ("manager", changed(MANAGER, ("placement_prefixes",), ["/abs"]), BOTH, "manager-absolute-prefix"),
    ("gc", changed(GC, ("categories", "attempt_control", "removed"), _DELETE), BOTH, "category-no-removed"),
    ("gc", changed(GC, ("removed",), -1), BOTH, "gc-removed-negative"),
    ("gc", changed(GC, ("retention",), {"journal_days": 30, "keep_days": 1}), BOTH, "gc-unknown-retention"),
]


@pytest.mark.parametrize(
    ("schema", "document", "model_refuses"),
    [pytest.param(schema, document, refuses, id=case) for schema, document, refuses, case in REFUSED],
)
def test_document_breaking_a_rule_is_refused(schema: str, document: Any, model_refuses: bool) -> None:
    assert not models.validator(schema).is_valid(document)
    try:
        _model(schema).model_validate(document)
    except ValidationError:
        refused = True
    else:
        refused = False
    assert refused is model_refuses


def test_refusal_cases_have_unique_ids() -> None:
    ids = [case for *_, case in REFUSED]
    assert len(ids) == len(set(ids))
