"""The public names of ``httk.workflow.models``, and what importing the package costs."""

from __future__ import annotations

import subprocess
import sys

from httk.workflow import models
from pydantic import BaseModel

MODELS = [
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
]


def test_all_is_exactly_the_document_models_and_the_schema_helpers() -> None:
    assert models.__all__ == [*MODELS, "load_schema", "schema_path", "validator"]
    assert models.__all__ == sorted(models.__all__)


def test_every_exported_model_is_a_pydantic_model_named_as_exported() -> None:
    for name in MODELS:
        model = getattr(models, name)
        assert issubclass(model, BaseModel)
        assert model.__name__ == name
    assert set(MODELS) <= set(dir(models))


def _importtime(statement: str) -> list[str]:
    """Run ``statement`` under ``-X importtime``; return the modules it reports, then sys.modules."""
    probe = f"{statement}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", probe],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [line for line in completed.stderr.splitlines() if line.startswith("import time:")]
    return [line.rsplit("|", 1)[-1].strip() for line in lines] + completed.stdout.split()


def _top_level(names: list[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


def test_importing_the_package_imports_neither_jsonschema_nor_pydantic() -> None:
    imported = _importtime("import httk.workflow.models")
    assert "httk.workflow.models" in imported
    assert not _top_level(imported) & {"jsonschema", "referencing"}
    # The models themselves are imported on first use of their name.
    assert "pydantic" not in _top_level(imported)


def test_using_a_model_imports_pydantic_but_not_jsonschema() -> None:
    imported = _importtime("from httk.workflow.models import StateFrame, load_schema")
    assert "httk.workflow.models._generated" in imported
    assert "pydantic" in _top_level(imported)
    assert not _top_level(imported) & {"jsonschema", "referencing"}
