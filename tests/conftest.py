"""Shared fixtures: real workspaces in temporary directories, and valid job documents."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest


def minimal_job(**overrides: Any) -> dict[str, Any]:
    """The specification's minimal job.json with a fresh UUID; ``overrides`` replace top-level members."""
    job: dict[str, Any] = {
        "format": "httk-workflow-job",
        "format_version": 1,
        "id": str(uuid.uuid4()),
        "tag": "silicon-relax",
        "name": "Silicon relaxation",
        "workflow": "example.vasp-relax",
        "runner": {"backend": "path", "path": "files/runner", "arguments": []},
        "workdir": {"mode": "persistent", "path": "run"},
        "data": {"mode": "none"},
        "initial_step": "prepare",
        "priority": 500,
        "claim": {"pool": "default", "required_capabilities": []},
        "retry_policy": {
            "maximum_attempts_per_activation": 10,
            "maximum_total_attempts": 100,
            "maximum_activations": 50,
            "retry_on": ["lease_lost", "timeout", "process_failure"],
        },
        "resources": {},
        "parent": None,
    }
    job.update(overrides)
    return job


@pytest.fixture
def workspace_path(tmp_path: Path) -> Path:
    return tmp_path / "ws"
