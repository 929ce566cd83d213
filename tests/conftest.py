"""Shared fixtures: real workspaces in temporary directories, and valid job documents."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.slurmkit import SHARED_VARIABLE, SlurmCluster, own_session, shared_cluster, stop_shared
from tests.sshkit import SshServer, running_server

# Hypothesis: ``./dev test`` runs the derandomized ``ci`` profile, the same examples on every run;
# ``./dev fuzz`` selects ``fuzz`` (``--hypothesis-profile fuzz``) with a printed ``--hypothesis-seed``.
_SLOW_IS_FINE = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, suppress_health_check=_SLOW_IS_FINE
)
settings.register_profile(
    "fuzz", max_examples=10_000, database=None, deadline=None, suppress_health_check=_SLOW_IS_FINE
)
settings.load_profile("ci")


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


@pytest.fixture(autouse=True)
def user_homes(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Every test gets its own per-user configuration and data directories, so none can touch the real
    user's registry, global launchers or default workspace (the processes a test starts inherit them)."""
    home = tmp_path_factory.mktemp("user-home")
    homes = {"HTTK_CONFIG_HOME": home / "config", "HTTK_DATA_HOME": home / "data"}
    for variable, path in homes.items():
        monkeypatch.setenv(variable, str(path))
    return homes


def pytest_configure(config: pytest.Config) -> None:
    """The controller (or a run without xdist) makes the directory its workers share the cluster in."""
    if not hasattr(config, "workerinput") and SHARED_VARIABLE not in os.environ:
        os.environ[SHARED_VARIABLE] = tempfile.mkdtemp(prefix="httk-slurm-session-")
        own_session(Path(os.environ[SHARED_VARIABLE]))
        config.stash[_OWNS_CLUSTER] = True


def pytest_unconfigure(config: pytest.Config) -> None:
    """Whoever made the directory stops the cluster at the very end, after every worker is done."""
    if config.stash.get(_OWNS_CLUSTER, False):
        directory = Path(os.environ.pop(SHARED_VARIABLE))
        stop_shared(directory)
        shutil.rmtree(directory, ignore_errors=True)


_OWNS_CLUSTER = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    """The session's real one-node Slurm cluster (``tests/slurmkit.py``), shared by every worker."""
    return shared_cluster(Path(os.environ[SHARED_VARIABLE]))


@pytest.fixture
def slurm(
    slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[SlurmCluster]:
    """The cluster with ``SLURM_CONF`` set for this test; the jobs it started are gone afterwards."""
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    yield slurm_cluster
    slurm_cluster.cancel_below(tmp_path)


@pytest.fixture
def sshd() -> Iterator[SshServer]:
    """A real sshd on 127.0.0.1 of this test's own (``tests/sshkit.py``), stopped when the test ends."""
    with running_server() as server:
        yield server
