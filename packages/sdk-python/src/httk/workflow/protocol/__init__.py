"""The protocol vocabulary shared by the SDK and the engine: pure values, no I/O.

Everything here is what the workflow filesystem protocol (``spec/01``) puts into names and paths, with
the rules that make a name valid:

* job UUIDs, tags, job keys (``[<tag>--]<uuid>``), placements, pool, capability, child, step,
  declaration and operation names (``_names``);
* lowercase base 36 without leading zeroes, the number encoding of markers and references (``_base36``);
* ``hwref-v1`` record references naming a journal frame (``_hwref``);
* state-marker basenames ``<job-key>.p<priority>.g<generation>.<record-ref|init>`` (``_markers``);
* the one exception hierarchy of httk-workflow (``_errors``).

Nothing in this package touches the filesystem, the clock or the environment, and importing it costs
only the standard library (no pydantic, no jsonschema), so a runner or a shell completion can use it
cheaply. Every parser refuses every form the grammar does not produce with :class:`InvalidNameError`;
for every accepted text ``str(parse(text)) == text``.

Examples
--------
>>> from httk.workflow.protocol import JobKey, MarkerName
>>> key = JobKey.parse("silicon-relax--01234567-89ab-cdef-0123-456789abcdef")
>>> str(MarkerName.initial(key, 500))
'silicon-relax--01234567-89ab-cdef-0123-456789abcdef.p500.g0.init'
"""

from __future__ import annotations

from ._base36 import decode as decode_base36
from ._base36 import encode as encode_base36
from ._errors import (
    ForeignOwnerError,
    IdentityError,
    InvalidDocumentError,
    InvalidNameError,
    JournalDamageError,
    JournalError,
    LauncherError,
    LaunchError,
    PolicyError,
    RegistryError,
    RemoteError,
    RemoteUnreachableError,
    RunnerStoreError,
    SubmissionError,
    TransferError,
    TransitionError,
    UnsafePathError,
    WorkflowError,
    WorkspaceError,
    WorkspaceFormatError,
    WorkspaceUnavailableError,
)
from ._hwref import (
    FRAME_OVERHEAD,
    MAX_REF_BYTES,
    OFFSET_BITS,
    SEGMENT_BITS,
    SEGMENT_MAX_DIGITS,
    RecordRef,
)
from ._markers import (
    GENERATION_BITS,
    INIT_REF,
    MAX_MARKER_BYTES,
    PRIORITY_MAX,
    PRIORITY_MIN,
    MarkerName,
    fast_match,
    validate_priority,
)
from ._names import (
    DEFAULT_POOL,
    JOB_KEY_MAX_BYTES,
    RESERVED_COMPONENT,
    STEP_MAX_BYTES,
    TAG_MAX_BYTES,
    UUID_LENGTH,
    JobKey,
    placement_prefix_matches,
    validate_capability,
    validate_child_label,
    validate_declaration_name,
    validate_operation_id,
    validate_placement,
    validate_pool,
    validate_step,
    validate_tag,
    validate_uuid,
)

__all__ = [
    "DEFAULT_POOL",
    "FRAME_OVERHEAD",
    "ForeignOwnerError",
    "GENERATION_BITS",
    "INIT_REF",
    "IdentityError",
    "InvalidDocumentError",
    "InvalidNameError",
    "JOB_KEY_MAX_BYTES",
    "JobKey",
    "JournalDamageError",
    "JournalError",
    "LaunchError",
    "LauncherError",
    "MAX_MARKER_BYTES",
    "MAX_REF_BYTES",
    "MarkerName",
    "OFFSET_BITS",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "PolicyError",
    "RESERVED_COMPONENT",
    "RecordRef",
    "RegistryError",
    "RemoteError",
    "RemoteUnreachableError",
    "RunnerStoreError",
    "SEGMENT_BITS",
    "SEGMENT_MAX_DIGITS",
    "STEP_MAX_BYTES",
    "SubmissionError",
    "TAG_MAX_BYTES",
    "TransferError",
    "TransitionError",
    "UUID_LENGTH",
    "UnsafePathError",
    "WorkflowError",
    "WorkspaceError",
    "WorkspaceFormatError",
    "WorkspaceUnavailableError",
    "decode_base36",
    "encode_base36",
    "fast_match",
    "placement_prefix_matches",
    "validate_capability",
    "validate_child_label",
    "validate_declaration_name",
    "validate_operation_id",
    "validate_placement",
    "validate_pool",
    "validate_priority",
    "validate_step",
    "validate_tag",
    "validate_uuid",
]
