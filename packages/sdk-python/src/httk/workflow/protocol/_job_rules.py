"""The rules of job.json and of the failure object, checked by hand on the submission hot path.

:func:`validate_job` applies every rule of "Job definition and submission" to a decoded job.json and
raises :class:`InvalidDocumentError` whose ``member`` is the dotted JSON path of the offending member
(``runner.sha256``, ``claim.required_capabilities[1]``, ``resources.procs``) and whose ``rule`` says what
is wrong. It never mutates or normalizes the document: the immutable job digest is over the stored bytes.

Choices the specification leaves open, made here once:

- Unknown members are ignored, at the top level and inside nested objects ("Unknown object members MUST
  be ignored"); the failure object is closed and is the one exception.
- Optional members are absent or valid; ``null`` is accepted only for ``parent``, where the specification
  writes it. The defaults are ``runner.backend = "path"``, ``runner.source = "payload"``,
  ``runner.arguments = []`` and ``claim.required_capabilities = []``.
- Required: ``format``, ``format_version``, ``id``, ``runner`` with ``path``, ``workdir.mode``,
  ``data.mode``, ``initial_step``, ``priority`` (the submitted marker carries it), ``claim.pool``, and
  ``workdir.path`` when the mode is persistent. With mode isolated ``workdir.path`` is refused: each
  attempt runs in ``run.<attempt-id>/``, and a path that would be silently ignored misleads its author.
- ``runner.backend`` and resource names use the label (tag) syntax, as pools and capabilities do.
- A persistent workdir's first component must not be ``.httk-job``, ``.httk-attempt.*``, ``data`` or
  ``job.json``; a payload runner's first component must not be ``.httk-job`` or ``.httk-attempt.*``,
  which every payload digest leaves out.
- Counts (retry limits, resource amounts) are at most 2**63 - 1; ``parent.spawn_id`` uses the protocol
  component syntax ``[A-Za-z0-9_][A-Za-z0-9._-]{0,63}`` (which admits a UUID); ``parent.job_key`` must
  end in ``parent.job_id``, which must differ from the job's own ``id``.
- The ``inputs`` and ``declarations`` limits are on their compact UTF-8 serialization
  (:func:`dump_compact`), each separately.

Cost: a handful of dictionary lookups and precompiled regular-expression matches; no allocation beyond
the serialization of ``inputs`` and ``declarations`` when present.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path
from typing import Any, NoReturn

from ._errors import InvalidDocumentError, InvalidNameError, UnsafePathError
from ._jsonio import dump_compact
from ._markers import validate_priority
from ._names import (
    JobKey,
    validate_capability,
    validate_declaration_name,
    validate_placement,
    validate_pool,
    validate_step,
    validate_tag,
    validate_uuid,
)

JOB_DOCUMENT = "job.json"
JOB_FORMAT = "httk-workflow-job"
JOB_FORMAT_VERSION = 1
MAX_INPUTS_BYTES = 262144
MAX_DECLARATIONS_BYTES = 262144
MAX_FAILURE_CODE_BYTES = 128
MAX_COUNT = (1 << 63) - 1
MAX_COMPONENT_BYTES = 255
RUNNER_SOURCES = ("payload", "workspace", "installed")
WORKDIR_MODES = ("persistent", "isolated")
DATA_MODES = ("none", "transactional")
PKG_PREFIX = "pkg:"
RETRY_LIMITS = ("maximum_attempts_per_activation", "maximum_total_attempts", "maximum_activations")
FAILURE_DOCUMENT = "failure"
FAILURE_MEMBERS = frozenset({"code", "message", "details", "retryable"})
PARENT_MEMBERS = ("workspace_id", "job_id", "job_key", "placement", "activation_id", "spawn_id")

_MISSING: Any = object()
_SHA256_RE = re.compile(r"[0-9a-f]{64}\Z")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_COMPONENT_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}\Z")
_CODE_FORBIDDEN_RE = re.compile("[\\s\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_BAD_COMPONENTS = frozenset({"", ".", ".."})
_PRIVATE_DIR = ".httk-job"
_ATTEMPT_PREFIX = ".httk-attempt."
_WORKDIR_RESERVED = frozenset({_PRIVATE_DIR, "data", "job.json"})


def _fail(member: str, rule: str, path: Path | str | None) -> NoReturn:
    raise InvalidDocumentError(JOB_DOCUMENT, member, rule, path)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and value.__class__ is not bool


def normalize_relative_path(
    text: object,
    *,
    what: str,
    member: str,
    document: str = JOB_DOCUMENT,
    path: Path | str | None = None,
) -> str:
    """Accept a normalized relative POSIX path that stays beneath its root, and return it unchanged.

    Refused: a non-string or empty value, NUL bytes, a leading ``/``, and empty, ``.`` or ``..``
    components (so also ``a//b`` and a trailing ``/``), and components over 255 bytes. Nothing is
    rewritten: a path that is not already in normal form is an error, never silently repaired.

    Raises
    ------
    UnsafePathError
        The path is absolute, not normalized, or could escape its root.
    InvalidDocumentError
        The value is not a nonempty string.

    Examples
    --------
    >>> normalize_relative_path("files/runner", what="runner path", member="runner.path")
    'files/runner'
    """
    if not isinstance(text, str):
        raise InvalidDocumentError(document, member, f"{what} must be a string", path)
    if not text:
        raise InvalidDocumentError(document, member, f"{what} must not be empty", path)
    if "\0" in text:
        raise UnsafePathError(document, member, f"{what} must not contain NUL bytes", path)
    if text[0] == "/":
        raise UnsafePathError(document, member, f"{what} must be relative, not absolute", path)
    for component in text.split("/"):
        if component in _BAD_COMPONENTS:
            raise UnsafePathError(
                document, member, f"{what} must be normalized: no empty, '.' or '..' components", path
            )
        if len(component) > MAX_COMPONENT_BYTES // 4 and (
            len(component.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES
        ):
            raise UnsafePathError(
                document, member, f"{what} has a component longer than {MAX_COMPONENT_BYTES} bytes", path
            )
    return text


def _check_name(validator: Any, value: object, member: str, path: Path | str | None) -> None:
    try:
        validator(value)
    except InvalidNameError as exc:
        _fail(member, exc.rule, path)


def _object(doc: dict[str, Any], key: str, member: str, path: Path | str | None) -> dict[str, Any]:
    value = doc.get(key, _MISSING)
    if value is _MISSING:
        _fail(member, "is required", path)
    if not isinstance(value, dict):
        _fail(member, "must be a JSON object", path)
    return value


def _first_component(text: str) -> str:
    return text.partition("/")[0]


def validate_job(doc: dict[str, Any], *, path: Path | str | None = None) -> dict[str, Any]:
    """Apply every rule of "Job definition and submission" to a decoded job.json; return it unchanged.

    Parameters
    ----------
    doc
        The decoded document, typically from :func:`read_json_object`.
    path
        Where the document came from, for error messages.

    Raises
    ------
    InvalidDocumentError
        The first broken rule; ``member`` is the dotted path of the member, ``rule`` what is wrong.

    Examples
    --------
    >>> job = {
    ...     "format": "httk-workflow-job", "format_version": 1,
    ...     "id": "01234567-89ab-cdef-0123-456789abcdef",
    ...     "runner": {"path": "files/runner"}, "workdir": {"mode": "isolated"},
    ...     "data": {"mode": "none"}, "initial_step": "prepare", "priority": 500,
    ...     "claim": {"pool": "default"},
    ... }
    >>> validate_job(job) is job
    True
    """
    if not isinstance(doc, dict):
        _fail("", "must be a JSON object", path)
    _check_header(doc, path)
    _check_runner(_object(doc, "runner", "runner", path), path)
    _check_workdir(_object(doc, "workdir", "workdir", path), path)
    data_mode = _object(doc, "data", "data", path).get("mode", _MISSING)
    if data_mode is _MISSING:
        _fail("data.mode", "is required; the protocol has no implicit default", path)
    if data_mode not in DATA_MODES:
        _fail("data.mode", "must be 'none' or 'transactional'", path)
    if "initial_step" not in doc:
        _fail("initial_step", "is required", path)
    _check_name(validate_step, doc["initial_step"], "initial_step", path)
    if "priority" not in doc:
        _fail("priority", "is required", path)
    _check_name(validate_priority, doc["priority"], "priority", path)
    _check_claim(_object(doc, "claim", "claim", path), path)
    if "retry_policy" in doc:
        _check_retry_policy(doc["retry_policy"], path)
    if "resources" in doc:
        check_resources(doc["resources"], path)
    parent = doc.get("parent")
    if parent is not None:
        _check_parent(parent, doc["id"], path)
    if "inputs" in doc:
        _check_inputs(doc["inputs"], path)
    if "declarations" in doc:
        _check_declarations(doc["declarations"], path)
    return doc


def _check_header(doc: dict[str, Any], path: Path | str | None) -> None:
    fmt = doc.get("format", _MISSING)
    if fmt != JOB_FORMAT:
        _fail("format", "is required" if fmt is _MISSING else f"must be {JOB_FORMAT!r}", path)
    version = doc.get("format_version", _MISSING)
    if version is _MISSING:
        _fail("format_version", "is required", path)
    if not _is_int(version):
        _fail("format_version", "must be the integer 1", path)
    if version != JOB_FORMAT_VERSION:
        _fail("format_version", f"{version} is not supported; this implementation reads 1", path)
    if "id" not in doc:
        _fail("id", "is required", path)
    _check_name(validate_uuid, doc["id"], "id", path)
    if doc.get("tag") is not None:  # null, like absent, is a job key that is the UUID alone
        _check_name(validate_tag, doc["tag"], "tag", path)
    for key in ("name", "workflow"):
        if key in doc and not isinstance(doc[key], str):
            _fail(key, "must be a string", path)


def _check_runner(runner: dict[str, Any], path: Path | str | None) -> None:
    if "backend" in runner:
        _check_name(validate_pool, runner["backend"], "runner.backend", path)
    source = runner.get("source", "payload")
    if source not in RUNNER_SOURCES:
        _fail("runner.source", "must be 'payload', 'workspace' or 'installed'", path)
    runner_path = runner.get("path", _MISSING)
    if runner_path is _MISSING:
        _fail("runner.path", "is required", path)
    if isinstance(runner_path, str) and runner_path.startswith(PKG_PREFIX):
        if source != "installed":
            _fail(
                "runner.path",
                "the reserved 'pkg:<module>/<resource>' form requires runner.source 'installed'",
                path,
            )
        _check_pkg_path(runner_path, path)
    else:
        normalize_relative_path(runner_path, what="runner path", member="runner.path", path=path)
        first = _first_component(runner_path)
        if source == "payload" and (first == _PRIVATE_DIR or first.startswith(_ATTEMPT_PREFIX)):
            _fail(
                "runner.path",
                "a payload runner must not lie in .httk-job/ or .httk-attempt.*/, "
                "which no payload digest covers",
                path,
            )
    if "arguments" in runner:
        arguments = runner["arguments"]
        if not isinstance(arguments, list):
            _fail("runner.arguments", "must be an array of strings (an argument vector)", path)
        for index, argument in enumerate(arguments):
            if not isinstance(argument, str):
                _fail(f"runner.arguments[{index}]", "must be a string", path)
            if "\0" in argument:
                _fail(f"runner.arguments[{index}]", "must not contain NUL bytes", path)
    if source == "payload":
        if "sha256" in runner:
            _fail(
                "runner.sha256",
                "must be absent for source 'payload'; the payload itself pins the runner",
                path,
            )
    else:
        digest = runner.get("sha256", _MISSING)
        if digest is _MISSING:
            _fail("runner.sha256", f"is required for source {source!r}", path)
        if not isinstance(digest, str) or not _SHA256_RE.match(digest):
            _fail("runner.sha256", "must be 64 lowercase hexadecimal digits", path)


def _check_pkg_path(runner_path: str, path: Path | str | None) -> None:
    module, slash, resource = runner_path[len(PKG_PREFIX) :].partition("/")
    if not slash or not module:
        _fail("runner.path", "must be 'pkg:<module>/<resource>'", path)
    for part in module.split("."):
        if not _IDENTIFIER_RE.match(part) or keyword.iskeyword(part):
            _fail("runner.path", f"pkg: module {module!r} must be a dotted Python identifier", path)
    normalize_relative_path(resource, what="pkg: resource", member="runner.path", path=path)


def _check_workdir(workdir: dict[str, Any], path: Path | str | None) -> None:
    mode = workdir.get("mode", _MISSING)
    if mode is _MISSING:
        _fail("workdir.mode", "is required; the protocol has no implicit default", path)
    if mode == "persistent":
        if "path" not in workdir:
            _fail("workdir.path", "is required for mode 'persistent'", path)
        workdir_path = normalize_relative_path(
            workdir["path"], what="workdir path", member="workdir.path", path=path
        )
        first = _first_component(workdir_path)
        if first in _WORKDIR_RESERVED or first.startswith(_ATTEMPT_PREFIX):
            _fail(
                "workdir.path",
                f"must not lie in the reserved {first!r}: .httk-job, .httk-attempt.*, data and job.json "
                "belong to the protocol",
                path,
            )
    elif mode == "isolated":
        if "path" in workdir:
            _fail(
                "workdir.path",
                "is only allowed with mode 'persistent'; an isolated attempt runs in run.<attempt-id>/",
                path,
            )
    else:
        _fail("workdir.mode", "must be 'persistent' or 'isolated'", path)


def _check_claim(claim: dict[str, Any], path: Path | str | None) -> None:
    if "pool" not in claim:
        _fail("claim.pool", "is required ('default' for jobs that need no routing)", path)
    _check_name(validate_pool, claim["pool"], "claim.pool", path)
    capabilities = claim.get("required_capabilities", _MISSING)
    if capabilities is _MISSING:
        return
    if not isinstance(capabilities, list):
        _fail("claim.required_capabilities", "must be an array of capability labels", path)
    seen: set[str] = set()
    for index, capability in enumerate(capabilities):
        member = f"claim.required_capabilities[{index}]"
        _check_name(validate_capability, capability, member, path)
        if capability in seen:
            _fail(member, f"lists capability {capability!r} more than once", path)
        seen.add(capability)


def _check_retry_policy(policy: object, path: Path | str | None) -> None:
    if not isinstance(policy, dict):
        _fail("retry_policy", "must be a JSON object", path)
    for key in RETRY_LIMITS:
        if key in policy:
            limit = policy[key]
            if not _is_int(limit) or not 1 <= limit <= MAX_COUNT:
                _fail(f"retry_policy.{key}", "must be a positive integer (omit it for no limit)", path)
    if "retry_on" in policy:
        codes = policy["retry_on"]
        if not isinstance(codes, list):
            _fail("retry_policy.retry_on", "must be an array of failure codes", path)
        for index, code in enumerate(codes):
            problem = _code_problem(code)
            if problem is not None:
                _fail(f"retry_policy.retry_on[{index}]", f"failure code {problem}", path)


def check_resources(resources: object, path: Path | str | None) -> None:
    """Refuse a ``resources`` object that is not resource labels mapped to non-negative integers."""
    if not isinstance(resources, dict):
        _fail("resources", "must be a JSON object of non-negative integers", path)
    for label, amount in resources.items():
        try:
            validate_capability(label)
        except InvalidNameError as exc:
            _fail("resources", f"resource label {label!r} {exc.rule}", path)
        if not _is_int(amount) or not 0 <= amount <= MAX_COUNT:
            _fail(f"resources.{label}", "must be a non-negative integer", path)


def _check_parent(parent: object, job_id: str, path: Path | str | None) -> None:
    if not isinstance(parent, dict):
        _fail("parent", "must be null or a JSON object", path)
    for key in PARENT_MEMBERS:
        if key not in parent:
            _fail(f"parent.{key}", "is required in a parent reference", path)
    for key in ("workspace_id", "job_id", "activation_id"):
        _check_name(validate_uuid, parent[key], f"parent.{key}", path)
    try:
        parent_key = JobKey.parse(parent["job_key"])
    except InvalidNameError as exc:
        _fail("parent.job_key", exc.rule, path)
    if parent_key.job_id != parent["job_id"]:
        _fail("parent.job_key", "must end in parent.job_id", path)
    if parent["job_id"] == job_id:
        _fail("parent.job_id", "must differ from the job's own id", path)
    _check_name(validate_placement, parent["placement"], "parent.placement", path)
    spawn_id = parent["spawn_id"]
    if not isinstance(spawn_id, str) or not _COMPONENT_ID_RE.match(spawn_id):
        _fail("parent.spawn_id", "must match [A-Za-z0-9_][A-Za-z0-9._-]{0,63}", path)


def _serialized_size(value: object, member: str, path: Path | str | None) -> int:
    try:
        return len(dump_compact(value))
    except (TypeError, ValueError) as exc:
        _fail(member, f"is not representable as JSON: {exc}", path)


def _check_inputs(inputs: object, path: Path | str | None) -> None:
    if not isinstance(inputs, dict):
        _fail("inputs", "must be a JSON object", path)
    for key in inputs:
        if not isinstance(key, str):
            _fail("inputs", f"key {key!r} must be a string", path)
    if inputs:
        size = _serialized_size(inputs, "inputs", path)
        if size > MAX_INPUTS_BYTES:
            _fail("inputs", f"serializes to {size} bytes, over the limit of {MAX_INPUTS_BYTES}", path)


def _check_declarations(declarations: object, path: Path | str | None) -> None:
    if not isinstance(declarations, dict):
        _fail("declarations", "must be a JSON object mapping declaration names to objects", path)
    for name, document in declarations.items():
        try:
            validate_declaration_name(name)
        except InvalidNameError as exc:
            _fail("declarations", f"declaration name {name!r} {exc.rule}", path)
        if not isinstance(document, dict):
            _fail(f"declarations.{name}", "must be a JSON object", path)
    if declarations:
        size = _serialized_size(declarations, "declarations", path)
        if size > MAX_DECLARATIONS_BYTES:
            _fail(
                "declarations",
                f"serializes to {size} bytes, over the limit of {MAX_DECLARATIONS_BYTES}",
                path,
            )


def _code_problem(code: object) -> str | None:
    """Why ``code`` is not a failure code (one token, 1-128 UTF-8 bytes), or None when it is one."""
    if not isinstance(code, str):
        return "must be a string"
    if not code:
        return "must not be empty"
    if _CODE_FORBIDDEN_RE.search(code):
        return "must be one token without whitespace or control characters"
    if len(code) > MAX_FAILURE_CODE_BYTES // 4 and len(code.encode("utf-8")) > MAX_FAILURE_CODE_BYTES:
        return f"must be at most {MAX_FAILURE_CODE_BYTES} bytes of UTF-8"
    return None


def validate_failure(obj: object, *, path: Path | str | None = None) -> dict[str, Any]:
    """Accept the one failure object shape; return it unchanged.

    ``code`` is one token without whitespace of 1-128 UTF-8 bytes, ``message`` a nonempty string,
    ``details`` an optional JSON object, ``retryable`` an optional boolean; no other member is allowed.
    ``member`` in the error is the failure member's own name (``code``, ``message``, ...).

    Examples
    --------
    >>> validate_failure({"code": "vasp.nonconvergent", "message": "did not converge"})["code"]
    'vasp.nonconvergent'
    """

    def fail(member: str, rule: str) -> NoReturn:
        raise InvalidDocumentError(FAILURE_DOCUMENT, member, rule, path)

    if not isinstance(obj, dict):
        fail("", "must be a JSON object")
    for key in obj:
        if key not in FAILURE_MEMBERS:
            fail(str(key), "is not a failure member; only code, message, details and retryable are allowed")
    if "code" not in obj:
        fail("code", "is required")
    problem = _code_problem(obj["code"])
    if problem is not None:
        fail("code", problem)
    if "message" not in obj:
        fail("message", "is required")
    message = obj["message"]
    if not isinstance(message, str):
        fail("message", "must be a string")
    if not message.strip():
        fail("message", "must be a nonempty sentence")
    if _SURROGATE_RE.search(message):
        fail("message", "must not contain unpaired UTF-16 surrogates")
    if "details" in obj:
        details = obj["details"]
        if not isinstance(details, dict):
            fail("details", "must be a JSON object")
        try:
            dump_compact(details)
        except (TypeError, ValueError) as exc:
            fail("details", f"is not representable as JSON: {exc}")
    if "retryable" in obj and not isinstance(obj["retryable"], bool):
        fail("retryable", "must be true or false")
    return obj
