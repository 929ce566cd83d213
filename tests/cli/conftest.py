"""Fixtures of the command-line tests: a CliRunner bound to ``httk``, workspaces and job payloads."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.cli._app import app
from typer.testing import CliRunner, Result

from tests.cli.remotekit import Far, configure_remote
from tests.conftest import minimal_job
from tests.sshkit import SshServer

Invoke = Callable[..., Result]
MakePayload = Callable[..., Path]


def spec_job(**overrides: Any) -> dict[str, Any]:
    """The specification's minimal job.json with a fresh UUID and a payload runner ``run.sh``."""
    job = minimal_job(runner={"backend": "path", "source": "payload", "path": "run.sh", "arguments": []})
    job.update(overrides)
    return job


def write_payload(directory: Path, job: dict[str, Any]) -> Path:
    directory.mkdir(parents=True)
    (directory / "job.json").write_text(json.dumps(job, indent=2) + "\n")
    runner = directory / "run.sh"
    runner.write_text("#!/bin/sh\nexit 0\n")
    runner.chmod(0o755)
    return directory


@pytest.fixture
def invoke() -> Invoke:
    """Run ``httk ARGS...`` in-process; stdout and stderr stay separate."""
    runner = CliRunner()

    def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
        return runner.invoke(app, [str(arg) for arg in args], env=env)

    return run


@pytest.fixture
def workspace(tmp_path: Path, invoke: Invoke) -> Path:
    """A fresh non-durable workspace made by ``httk workspace init``."""
    root = tmp_path / "ws"
    result = invoke("workspace", "init", root, "--no-durable")
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def make_payload(tmp_path: Path) -> MakePayload:
    """``make_payload(label, **job_overrides)``: a payload directory ``tmp_path/payloads/<label>``."""

    def make(label: str, /, **overrides: Any) -> Path:
        return write_payload(tmp_path / "payloads" / label, spec_job(**overrides))

    return make


def format_document(root: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((root / ".httk-workflow" / "format.json").read_text())
    return document


def error_lines(result: Result) -> Sequence[str]:
    return result.stderr.splitlines()


@pytest.fixture
def kappa(invoke: Invoke, sshd: SshServer, tmp_path: Path) -> Far:
    """The remote ``kappa``, configured to reach this test's own real sshd (``tests/cli/remotekit.py``)."""
    return configure_remote(invoke, sshd, tmp_path / "far")
