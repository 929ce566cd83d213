"""The public surface of ``httk.workflow.protocol``: exactly these names, sorted, and cheap to import."""

from __future__ import annotations

import os
import subprocess
import sys
import types

from httk.workflow import protocol
from httk.workflow.protocol import _base36, _errors, _hwref, _markers, _names

EXPECTED = [
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


def test_all_is_exactly_the_expected_names() -> None:
    assert protocol.__all__ == EXPECTED


def test_all_is_sorted_and_unique() -> None:
    assert protocol.__all__ == sorted(protocol.__all__)
    assert len(set(protocol.__all__)) == len(protocol.__all__)


def test_every_exported_name_exists() -> None:
    for name in protocol.__all__:
        assert getattr(protocol, name) is not None, name


def _defined_public_names(module: types.ModuleType) -> dict[str, object]:
    """Public names a module defines itself (not those it imports)."""
    names = {}
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType) or name == "annotations":
            continue
        if getattr(value, "__module__", module.__name__) != module.__name__:
            continue
        names[name] = value
    return names


def test_every_public_name_of_the_modules_is_exported_as_itself() -> None:
    # The two base-36 functions get a qualified name: a bare ``encode`` would say nothing at the package.
    renamed = {(_base36, "encode"): "encode_base36", (_base36, "decode"): "decode_base36"}
    seen = set()
    for module in (_base36, _errors, _hwref, _markers, _names):
        for name, value in _defined_public_names(module).items():
            exported = renamed.get((module, name), name)
            assert exported in protocol.__all__, f"{module.__name__}.{name}"
            assert getattr(protocol, exported) is value, f"{module.__name__}.{name}"
            seen.add(exported)
    assert seen == set(protocol.__all__)


def test_every_error_class_is_a_workflow_error() -> None:
    errors = [value for value in vars(_errors).values() if isinstance(value, type)]
    errors = [cls for cls in errors if issubclass(cls, Exception)]
    assert len(errors) == 21
    for cls in errors:
        assert issubclass(cls, protocol.WorkflowError)
        assert cls.__name__ in protocol.__all__
    assert issubclass(protocol.InvalidNameError, ValueError)


def test_import_is_cheap() -> None:
    code = (
        "import sys, httk.workflow.protocol\n"
        "heavy = sorted(m for m in ('pydantic', 'jsonschema', 'typer', 'rich') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, timeout=60
    )
    assert result.stdout.strip() == ""
