"""Every rule of "Job definition and submission", one broken rule per row, and the failure object."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from httk.workflow.protocol._errors import InvalidDocumentError, UnsafePathError
from httk.workflow.protocol._job_rules import (
    MAX_DECLARATIONS_BYTES,
    MAX_INPUTS_BYTES,
    normalize_relative_path,
    validate_failure,
    validate_job,
)
from httk.workflow.protocol._jsonio import dump_compact, parse_json_object
from hypothesis import given, settings
from hypothesis import strategies as st

# Copied exactly from spec/01, "Job definition and submission".
SPEC_MINIMAL_JOB = """\
{
  "format": "httk-workflow-job",
  "format_version": 1,
  "id": "01234567-89ab-cdef-0123-456789abcdef",
  "tag": "silicon-relax",
  "name": "Silicon relaxation",
  "workflow": "example.vasp-relax",
  "runner": {
    "backend": "path",
    "path": "files/runner",
    "arguments": []
  },
  "workdir": {
    "mode": "persistent",
    "path": "run"
  },
  "data": {
    "mode": "none"
  },
  "initial_step": "prepare",
  "priority": 500,
  "claim": {
    "pool": "default",
    "required_capabilities": []
  },
  "retry_policy": {
    "maximum_attempts_per_activation": 10,
    "maximum_total_attempts": 100,
    "maximum_activations": 50,
    "retry_on": ["lease_lost", "timeout", "process_failure"]
  },
  "resources": {},
  "parent": null
}
"""

JOB_ID = "01234567-89ab-cdef-0123-456789abcdef"
PARENT_ID = "411d9e6e-c050-451d-a851-e20f2570d7c5"
WORKSPACE_ID = "b588833b-87ea-4da2-b860-1c9e768cfbc1"
ACTIVATION_ID = "e7f86a0e-34d6-45a7-b92d-3f4b2dc98c54"
SHA = "0" * 63 + "a"


class _Delete:
    """Marks a member to remove; survives ``copy.deepcopy`` as the same object."""

    def __deepcopy__(self, memo: object) -> _Delete:
        return self


DEL = _Delete()

PARENT = {
    "workspace_id": WORKSPACE_ID,
    "job_id": PARENT_ID,
    "job_key": f"relax--{PARENT_ID}",
    "placement": "project-17/0/03a",
    "activation_id": ACTIVATION_ID,
    "spawn_id": "a6c2c973-29e1-44e2-9649-ae419e340ac4",
}


def spec_job() -> dict[str, Any]:
    return parse_json_object(SPEC_MINIMAL_JOB.encode(), document="job.json")


def mutate(doc: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Apply ``{"dotted.member": value}`` changes; ``DEL`` removes the member."""
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = doc
        for name in parents:
            target = target[name]
        if value is DEL:
            del target[last]
        else:
            target[last] = value
    return doc


def test_spec_minimal_job_is_valid() -> None:
    doc = spec_job()
    before = copy.deepcopy(doc)
    assert validate_job(doc) is doc
    assert doc == before  # nothing normalized or filled in


VALID = [
    pytest.param({}, id="spec-example"),
    pytest.param(
        {
            "tag": DEL,
            "name": DEL,
            "workflow": DEL,
            "runner.backend": DEL,
            "runner.arguments": DEL,
            "claim.required_capabilities": DEL,
            "retry_policy": DEL,
            "resources": DEL,
            "parent": DEL,
        },
        id="only-required-members",
    ),
    pytest.param({"tag": None}, id="null-tag"),  # the schema's "null or absent": the key is the UUID
    pytest.param({"workdir": {"mode": "isolated"}}, id="isolated-without-path"),
    pytest.param({"workdir.path": "work/run.main"}, id="nested-persistent-workdir"),
    pytest.param({"data.mode": "transactional"}, id="transactional"),
    pytest.param({"runner.source": "payload", "runner.path": "runner"}, id="explicit-payload"),
    pytest.param({"runner.source": "workspace", "runner.sha256": "ab" * 32}, id="workspace-runner"),
    pytest.param(
        {
            "runner.source": "installed",
            "runner.path": "pkg:httk.workflow/runners/echo.sh",
            "runner.sha256": SHA,
        },
        id="installed-pkg-form",
    ),
    pytest.param(
        {"runner.source": "installed", "runner.path": "vasp/relax", "runner.sha256": SHA},
        id="installed-plain-path",
    ),
    pytest.param(
        {"runner.backend": "slurm-array", "runner.arguments": ["--x", "a b", ""]}, id="backend-args"
    ),
    pytest.param({"runner.path": "files/pkg:x"}, id="pkg-colon-not-at-start"),
    pytest.param({"priority": 0}, id="priority-0"),
    pytest.param({"priority": 999}, id="priority-999"),
    pytest.param({"claim.required_capabilities": ["gpu", "vasp.6"]}, id="capabilities"),
    pytest.param({"retry_policy": {}}, id="empty-retry-policy"),
    pytest.param({"retry_policy.retry_on": ["vasp.nonconvergent", "é"]}, id="namespaced-codes"),
    pytest.param({"resources": {"procs": 32, "mem": 0, "matlab_license_slots": 1}}, id="resources"),
    pytest.param({"parent": PARENT}, id="parent-object"),
    pytest.param({"parent": {**PARENT, "job_key": PARENT_ID}}, id="parent-key-without-tag"),
    pytest.param({"inputs": {"encut": 520, "kpoints": [4, 4, 4], "nested": {"a": None}}}, id="inputs"),
    pytest.param({"inputs": {"k": "x" * (MAX_INPUTS_BYTES - 8)}}, id="inputs-at-limit"),
    pytest.param({"inputs": {}, "declarations": {}}, id="empty-inputs-declarations"),
    pytest.param({"declarations": {"relax": {"$id": "x", "outputs": []}, "_a.b-c": {}}}, id="declarations"),
    pytest.param(
        {
            "inputs": {"k": "x" * (MAX_INPUTS_BYTES - 8)},
            "declarations": {"d": {"k": "y" * (MAX_DECLARATIONS_BYTES - 14)}},
        },
        id="both-limits-separately",
    ),
    pytest.param(
        {"future_member": {"anything": [1]}, "runner.future": 1, "claim.future": None}, id="unknown-members"
    ),
]


@pytest.mark.parametrize("changes", VALID)
def test_valid_variations(changes: dict[str, Any]) -> None:
    doc = mutate(spec_job(), copy.deepcopy(changes))
    before = copy.deepcopy(doc)
    assert validate_job(doc) is doc
    assert doc == before


def test_inputs_limit_uses_the_compact_utf8_serialization() -> None:
    doc = mutate(spec_job(), {"inputs": {"k": "x" * (MAX_INPUTS_BYTES - 8)}})
    assert len(dump_compact(doc["inputs"])) == MAX_INPUTS_BYTES
    validate_job(doc)


BROKEN: list[Any] = [
    # header
    ({"format": DEL}, "format", "is required"),
    ({"format": "httk-workflow-spawn"}, "format", "must be 'httk-workflow-job'"),
    ({"format_version": DEL}, "format_version", "is required"),
    ({"format_version": 2}, "format_version", "not supported"),
    ({"format_version": True}, "format_version", "must be the integer 1"),
    ({"format_version": 1.0}, "format_version", "must be the integer 1"),
    ({"format_version": "1"}, "format_version", "must be the integer 1"),
    ({"id": DEL}, "id", "is required"),
    ({"id": JOB_ID.upper()}, "id", "lowercase canonical UUID"),
    ({"id": JOB_ID.replace("-", "")}, "id", "lowercase canonical UUID"),
    ({"id": 5}, "id", "lowercase canonical UUID"),
    ({"tag": "Silicon"}, "tag", "must be 1-48 bytes"),
    ({"tag": "a--b"}, "tag", "must not contain '--'"),
    ({"tag": "a" * 49}, "tag", "must be 1-48 bytes"),
    ({"tag": "-a"}, "tag", "starting with a letter or digit"),
    ({"name": 5}, "name", "must be a string"),
    ({"workflow": []}, "workflow", "must be a string"),
    # runner
    ({"runner": DEL}, "runner", "is required"),
    ({"runner": "files/runner"}, "runner", "must be a JSON object"),
    ({"runner.backend": ""}, "runner.backend", "must be 1-48 bytes"),
    ({"runner.backend": 3}, "runner.backend", "must be 1-48 bytes"),
    ({"runner.source": "remote"}, "runner.source", "must be 'payload', 'workspace' or 'installed'"),
    ({"runner.source": None}, "runner.source", "must be 'payload', 'workspace' or 'installed'"),
    ({"runner.path": DEL}, "runner.path", "is required"),
    ({"runner.path": ""}, "runner.path", "must not be empty"),
    ({"runner.path": 7}, "runner.path", "must be a string"),
    ({"runner.path": "/usr/bin/runner"}, "runner.path", "must be relative"),
    ({"runner.path": "../runner"}, "runner.path", "must be normalized"),
    ({"runner.path": "files/../runner"}, "runner.path", "must be normalized"),
    ({"runner.path": "./files/runner"}, "runner.path", "must be normalized"),
    ({"runner.path": "files//runner"}, "runner.path", "must be normalized"),
    ({"runner.path": "files/runner/"}, "runner.path", "must be normalized"),
    ({"runner.path": "files/run\0ner"}, "runner.path", "NUL"),
    ({"runner.path": "files/" + "r" * 256}, "runner.path", "longer than 255 bytes"),
    ({"runner.path": ".httk-job/runner"}, "runner.path", "must not lie in .httk-job/"),
    ({"runner.path": ".httk-attempt.x/runner"}, "runner.path", "must not lie in .httk-job/"),
    ({"runner.path": "pkg:httk.workflow/run"}, "runner.path", "requires runner.source 'installed'"),
    (
        {"runner.source": "workspace", "runner.sha256": SHA, "runner.path": "pkg:httk/run"},
        "runner.path",
        "requires runner.source 'installed'",
    ),
    (
        {"runner.source": "installed", "runner.sha256": SHA, "runner.path": "pkg:/run"},
        "runner.path",
        "pkg:<module>",
    ),
    (
        {"runner.source": "installed", "runner.sha256": SHA, "runner.path": "pkg:httk"},
        "runner.path",
        "pkg:<module>",
    ),
    (
        {"runner.source": "installed", "runner.sha256": SHA, "runner.path": "pkg:httk..wf/run"},
        "runner.path",
        "dotted Python identifier",
    ),
    (
        {"runner.source": "installed", "runner.sha256": SHA, "runner.path": "pkg:1httk/run"},
        "runner.path",
        "dotted Python identifier",
    ),
    (
        {"runner.source": "installed", "runner.sha256": SHA, "runner.path": "pkg:httk.class/run"},
        "runner.path",
        "dotted Python identifier",
    ),
    (
        {"runner.source": "installed", "runner.sha256": SHA, "runner.path": "pkg:httk-wf/run"},
        "runner.path",
        "dotted Python identifier",
    ),
    (
        {"runner.source": "installed", "runner.sha256": SHA, "runner.path": "pkg:httk/../run"},
        "runner.path",
        "must be normalized",
    ),
    (
        {"runner.source": "installed", "runner.sha256": SHA, "runner.path": "pkg:httk/"},
        "runner.path",
        "not be empty",
    ),
    (
        {"runner.source": "installed", "runner.sha256": SHA, "runner.path": "/opt/runner"},
        "runner.path",
        "must be relative",
    ),
    (
        {"runner.source": "workspace", "runner.sha256": SHA, "runner.path": "a/../../b"},
        "runner.path",
        "normalized",
    ),
    ({"runner.arguments": "-v input"}, "runner.arguments", "must be an array"),
    ({"runner.arguments": [1]}, "runner.arguments[0]", "must be a string"),
    ({"runner.arguments": ["ok", "a\0b"]}, "runner.arguments[1]", "NUL"),
    ({"runner.sha256": SHA}, "runner.sha256", "must be absent for source 'payload'"),
    ({"runner.source": "payload", "runner.sha256": SHA}, "runner.sha256", "must be absent"),
    ({"runner.source": "workspace"}, "runner.sha256", "is required for source 'workspace'"),
    ({"runner.source": "installed"}, "runner.sha256", "is required for source 'installed'"),
    (
        {"runner.source": "workspace", "runner.sha256": SHA.upper()},
        "runner.sha256",
        "64 lowercase hexadecimal",
    ),
    ({"runner.source": "workspace", "runner.sha256": SHA[:-1]}, "runner.sha256", "64 lowercase hexadecimal"),
    ({"runner.source": "workspace", "runner.sha256": None}, "runner.sha256", "64 lowercase hexadecimal"),
    # workdir and data
    ({"workdir": DEL}, "workdir", "is required"),
    ({"workdir": "run"}, "workdir", "must be a JSON object"),
    ({"workdir.mode": DEL}, "workdir.mode", "no implicit default"),
    ({"workdir.mode": "scratch"}, "workdir.mode", "must be 'persistent' or 'isolated'"),
    ({"workdir.path": DEL}, "workdir.path", "is required for mode 'persistent'"),
    ({"workdir.path": "/scratch/run"}, "workdir.path", "must be relative"),
    ({"workdir.path": "run/../x"}, "workdir.path", "must be normalized"),
    ({"workdir.path": ""}, "workdir.path", "must not be empty"),
    ({"workdir.path": ["run"]}, "workdir.path", "must be a string"),
    ({"workdir.path": ".httk-job"}, "workdir.path", "reserved"),
    ({"workdir.path": ".httk-job/run"}, "workdir.path", "reserved"),
    ({"workdir.path": ".httk-attempt.0123"}, "workdir.path", "reserved"),
    ({"workdir.path": "data"}, "workdir.path", "reserved"),
    ({"workdir.path": "data/run"}, "workdir.path", "reserved"),
    ({"workdir.path": "job.json"}, "workdir.path", "reserved"),
    ({"workdir.mode": "isolated"}, "workdir.path", "only allowed with mode 'persistent'"),
    ({"data": DEL}, "data", "is required"),
    ({"data": "none"}, "data", "must be a JSON object"),
    ({"data.mode": DEL}, "data.mode", "no implicit default"),
    ({"data.mode": "full"}, "data.mode", "must be 'none' or 'transactional'"),
    # step and priority
    ({"initial_step": DEL}, "initial_step", "is required"),
    ({"initial_step": ""}, "initial_step", "must be 1-128 bytes"),
    ({"initial_step": "-x"}, "initial_step", "not starting with '.' or '-'"),
    ({"initial_step": "a/b"}, "initial_step", "must be 1-128 bytes"),
    ({"initial_step": 5}, "initial_step", "must be 1-128 bytes"),
    ({"priority": DEL}, "priority", "is required"),
    ({"priority": 1000}, "priority", "0 through 999"),
    ({"priority": -1}, "priority", "0 through 999"),
    ({"priority": True}, "priority", "0 through 999"),
    ({"priority": 500.0}, "priority", "0 through 999"),
    ({"priority": "500"}, "priority", "0 through 999"),
    # claim
    ({"claim": DEL}, "claim", "is required"),
    ({"claim": "default"}, "claim", "must be a JSON object"),
    ({"claim.pool": DEL}, "claim.pool", "is required"),
    ({"claim.pool": "Default"}, "claim.pool", "must be 1-48 bytes"),
    ({"claim.pool": "gpu--fast"}, "claim.pool", "must not contain '--'"),
    ({"claim.required_capabilities": "gpu"}, "claim.required_capabilities", "must be an array"),
    ({"claim.required_capabilities": ["gpu", "GPU"]}, "claim.required_capabilities[1]", "must be 1-48 bytes"),
    ({"claim.required_capabilities": ["gpu", 1]}, "claim.required_capabilities[1]", "must be 1-48 bytes"),
    ({"claim.required_capabilities": ["gpu", "gpu"]}, "claim.required_capabilities[1]", "more than once"),
    # retry_policy
    ({"retry_policy": []}, "retry_policy", "must be a JSON object"),
    ({"retry_policy": None}, "retry_policy", "must be a JSON object"),
    (
        {"retry_policy.maximum_attempts_per_activation": 0},
        "retry_policy.maximum_attempts_per_activation",
        "positive",
    ),
    ({"retry_policy.maximum_total_attempts": -1}, "retry_policy.maximum_total_attempts", "positive integer"),
    ({"retry_policy.maximum_activations": True}, "retry_policy.maximum_activations", "positive integer"),
    ({"retry_policy.maximum_activations": 1.5}, "retry_policy.maximum_activations", "positive integer"),
    ({"retry_policy.maximum_activations": "50"}, "retry_policy.maximum_activations", "positive integer"),
    ({"retry_policy.maximum_activations": None}, "retry_policy.maximum_activations", "positive integer"),
    (
        {"retry_policy.maximum_total_attempts": 1 << 63},
        "retry_policy.maximum_total_attempts",
        "positive integer",
    ),
    ({"retry_policy.retry_on": "lease_lost"}, "retry_policy.retry_on", "must be an array"),
    ({"retry_policy.retry_on": ["lease lost"]}, "retry_policy.retry_on[0]", "without whitespace"),
    ({"retry_policy.retry_on": ["ok", "tab\there"]}, "retry_policy.retry_on[1]", "without whitespace"),
    ({"retry_policy.retry_on": ["nb\u00a0sp"]}, "retry_policy.retry_on[0]", "without whitespace"),
    ({"retry_policy.retry_on": [""]}, "retry_policy.retry_on[0]", "must not be empty"),
    ({"retry_policy.retry_on": ["x" * 129]}, "retry_policy.retry_on[0]", "at most 128 bytes"),
    ({"retry_policy.retry_on": ["é" * 65]}, "retry_policy.retry_on[0]", "at most 128 bytes"),
    ({"retry_policy.retry_on": [3]}, "retry_policy.retry_on[0]", "must be a string"),
    # resources
    ({"resources": []}, "resources", "must be a JSON object"),
    ({"resources": {"Procs": 1}}, "resources", "resource label 'Procs'"),
    ({"resources": {"procs": -1}}, "resources.procs", "non-negative integer"),
    ({"resources": {"procs": True}}, "resources.procs", "non-negative integer"),
    ({"resources": {"mem": 1.0}}, "resources.mem", "non-negative integer"),
    ({"resources": {"mem": "16G"}}, "resources.mem", "non-negative integer"),
    ({"resources": {"mem": 1 << 63}}, "resources.mem", "non-negative integer"),
    # parent (D13)
    ({"parent": "411d9e6e-c050-451d-a851-e20f2570d7c5"}, "parent", "must be null or a JSON object"),
    ({"parent": {}}, "parent.workspace_id", "is required"),
    *[
        ({"parent": {k: v for k, v in PARENT.items() if k != key}}, f"parent.{key}", "is required")
        for key in PARENT
    ],
    ({"parent": {**PARENT, "workspace_id": "x"}}, "parent.workspace_id", "lowercase canonical UUID"),
    ({"parent": {**PARENT, "job_id": PARENT_ID.upper()}}, "parent.job_id", "lowercase canonical UUID"),
    ({"parent": {**PARENT, "activation_id": None}}, "parent.activation_id", "lowercase canonical UUID"),
    ({"parent": {**PARENT, "job_key": "relax"}}, "parent.job_key", "36-character UUID"),
    ({"parent": {**PARENT, "job_key": f"Relax--{PARENT_ID}"}}, "parent.job_key", "invalid tag"),
    (
        {"parent": {**PARENT, "job_key": f"relax--{ACTIVATION_ID}"}},
        "parent.job_key",
        "must end in parent.job_id",
    ),
    ({"parent": {**PARENT, "job_id": JOB_ID, "job_key": JOB_ID}}, "parent.job_id", "must differ"),
    ({"parent": {**PARENT, "placement": "../escape"}}, "parent.placement", "'..'"),
    ({"parent": {**PARENT, "placement": "/abs"}}, "parent.placement", "relative"),
    ({"parent": {**PARENT, "placement": "a/.httk-workflow/b"}}, "parent.placement", "reserved"),
    ({"parent": {**PARENT, "spawn_id": ""}}, "parent.spawn_id", "must match"),
    ({"parent": {**PARENT, "spawn_id": "../x"}}, "parent.spawn_id", "must match"),
    ({"parent": {**PARENT, "spawn_id": 7}}, "parent.spawn_id", "must match"),
    # inputs and declarations
    ({"inputs": []}, "inputs", "must be a JSON object"),
    ({"inputs": "encut=520"}, "inputs", "must be a JSON object"),
    ({"inputs": {"k": "x" * (MAX_INPUTS_BYTES - 7)}}, "inputs", "over the limit of 262144"),
    ({"inputs": {"k": "é" * (MAX_INPUTS_BYTES // 2)}}, "inputs", "over the limit of 262144"),
    ({"inputs": {"k": float("nan")}}, "inputs", "not representable as JSON"),
    ({"inputs": {"k": {1, 2}}}, "inputs", "not representable as JSON"),
    ({"inputs": {1: "x"}}, "inputs", "must be a string"),
    ({"declarations": []}, "declarations", "must be a JSON object"),
    ({"declarations": {"bad name": {}}}, "declarations", "declaration name 'bad name'"),
    ({"declarations": {".hidden": {}}}, "declarations", "declaration name"),
    ({"declarations": {"a" * 65: {}}}, "declarations", "declaration name"),
    ({"declarations": {"relax": []}}, "declarations.relax", "must be a JSON object"),
    ({"declarations": {"relax": "x"}}, "declarations.relax", "must be a JSON object"),
    (
        {"declarations": {"d": {"k": "y" * (MAX_DECLARATIONS_BYTES - 13)}}},
        "declarations",
        "over the limit of 262144",
    ),
]


@pytest.mark.parametrize(
    ("changes", "member", "fragment"),
    [pytest.param(*row, id=f"{row[1]}:{row[2]}") for row in BROKEN],
)
def test_each_broken_rule_names_member_and_rule(changes: dict[str, Any], member: str, fragment: str) -> None:
    doc = mutate(spec_job(), copy.deepcopy(changes))
    with pytest.raises(InvalidDocumentError) as info:
        validate_job(doc, path="/w/p/job.json")
    assert info.value.member == member
    assert fragment in info.value.rule
    assert info.value.document == "job.json"
    assert info.value.path == "/w/p/job.json"


def test_path_escapes_are_unsafe_path_errors() -> None:
    doc = mutate(spec_job(), {"runner.path": "../../etc/passwd"})
    with pytest.raises(UnsafePathError):
        validate_job(doc)


def test_document_that_is_not_an_object() -> None:
    with pytest.raises(InvalidDocumentError) as info:
        validate_job([])  # type: ignore[arg-type]
    assert info.value.member == ""
    assert "JSON object" in info.value.rule


def test_job_json_example_round_trips_through_the_file_reader(tmp_path: Any) -> None:
    from httk.workflow.protocol._jsonio import read_json_object

    path = tmp_path / "job.json"
    path.write_text(SPEC_MINIMAL_JOB)
    assert validate_job(read_json_object(path, document="job.json"), path=path)["priority"] == 500


# --- normalize_relative_path -------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["a", "a/b", "run.x/y", "..a/b..", ".hidden", "a b/c\\d", "é/ü"])
def test_normalized_relative_paths_are_returned_unchanged(text: str) -> None:
    assert normalize_relative_path(text, what="path", member="m") is text


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("/a", "relative"),
        ("a/", "normalized"),
        ("a//b", "normalized"),
        (".", "normalized"),
        ("a/..", "normalized"),
    ],
)
def test_unnormalized_paths_are_unsafe(text: str, fragment: str) -> None:
    with pytest.raises(UnsafePathError) as info:
        normalize_relative_path(text, what="workdir path", member="workdir.path", document="x", path="/p")
    assert (info.value.member, info.value.document, info.value.path) == ("workdir.path", "x", "/p")
    assert fragment in info.value.rule


# --- the failure object ------------------------------------------------------------------------------

SPEC_FAILURE = {
    "code": "vasp.nonconvergent",
    "message": "electronic minimization did not converge",
    "details": {"iterations": 61, "log": "vasp/convergence.log"},
    "retryable": False,
}


def test_spec_failure_is_valid() -> None:
    failure = copy.deepcopy(SPEC_FAILURE)
    assert validate_failure(failure) is failure
    assert failure == SPEC_FAILURE
    validate_failure({"code": "x" * 128, "message": "m"})
    validate_failure({"code": "é" * 64, "message": "m", "retryable": True, "details": {}})


@pytest.mark.parametrize(
    ("changes", "member", "fragment"),
    [
        ({"code": DEL}, "code", "is required"),
        ({"code": ""}, "code", "must not be empty"),
        ({"code": "two words"}, "code", "without whitespace"),
        ({"code": "line\n"}, "code", "without whitespace"),
        ({"code": "nul\0"}, "code", "control characters"),
        ({"code": "x" * 129}, "code", "at most 128 bytes"),
        ({"code": "é" * 65}, "code", "at most 128 bytes"),
        ({"code": 7}, "code", "must be a string"),
        ({"message": DEL}, "message", "is required"),
        ({"message": ""}, "message", "nonempty"),
        ({"message": "  \n"}, "message", "nonempty"),
        ({"message": None}, "message", "must be a string"),
        ({"message": "bad \ud800"}, "message", "surrogates"),
        ({"details": []}, "details", "must be a JSON object"),
        ({"details": {"x": float("inf")}}, "details", "not representable"),
        ({"retryable": "false"}, "retryable", "true or false"),
        ({"retryable": 0}, "retryable", "true or false"),
        ({"severity": "high"}, "severity", "only code, message, details and retryable"),
    ],
)
def test_broken_failure_objects(changes: dict[str, Any], member: str, fragment: str) -> None:
    failure = mutate(copy.deepcopy(SPEC_FAILURE), changes)
    with pytest.raises(InvalidDocumentError) as info:
        validate_failure(failure, path="/o/outcome.json")
    assert info.value.member == member
    assert fragment in info.value.rule
    assert info.value.path == "/o/outcome.json"


def test_failure_that_is_not_an_object() -> None:
    with pytest.raises(InvalidDocumentError, match="JSON object"):
        validate_failure("vasp.nonconvergent")


# --- random mutations never escape as another exception ----------------------------------------------

_INTERESTING = st.sampled_from(
    [
        "",
        "persistent",
        "isolated",
        "none",
        "transactional",
        "payload",
        "workspace",
        "installed",
        "pkg:httk.workflow/run",
        "pkg:",
        "../x",
        "/abs",
        ".httk-job",
        "data",
        "run",
        "default",
        JOB_ID,
        PARENT_ID,
        "ab" * 32,
        "\0",
        "\ud800",
        "a--b",
    ]
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | _INTERESTING
)
_KEYS = st.text(max_size=8) | st.sampled_from(["path", "mode", "source", "sha256", "pool", *PARENT])
_JSON = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_KEYS, children, max_size=3),
    max_leaves=8,
)


def _locations(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, child in value.items():
            found.append((*prefix, key))
            found.extend(_locations(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.append((*prefix, index))
            found.extend(_locations(child, (*prefix, index)))
    return found


def _containers(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if isinstance(value, dict) else []
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_containers(child, (*prefix, key)))
    return found


def _resolve(doc: Any, where: tuple[Any, ...]) -> Any:
    for step in where:
        doc = doc[step]
    return doc


BASES = [
    spec_job(),
    mutate(spec_job(), {"parent": PARENT, "inputs": {"a": [1]}, "declarations": {"d": {}}}),
    mutate(spec_job(), {"runner.source": "installed", "runner.path": "pkg:httk/x", "runner.sha256": SHA}),
]


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_random_mutations_validate_or_raise_invalid_document(data: st.DataObject) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(BASES)))
    for _ in range(data.draw(st.integers(1, 3))):
        action = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        if action == "insert":
            where = data.draw(st.sampled_from(_containers(doc)))
            _resolve(doc, where)[data.draw(_KEYS)] = data.draw(_JSON)
            continue
        locations = _locations(doc)
        if not locations:
            break
        *parent, last = data.draw(st.sampled_from(locations))
        container = _resolve(doc, tuple(parent))
        if action == "delete":
            del container[last]
        else:
            container[last] = data.draw(_JSON)
    before = copy.deepcopy(doc)
    try:
        assert validate_job(doc) is doc
    except InvalidDocumentError as exc:
        assert exc.document == "job.json"
        assert isinstance(exc.rule, str) and exc.rule
    assert json.dumps(doc, sort_keys=True, default=repr) == json.dumps(before, sort_keys=True, default=repr)
