from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, init
from httk.workflow.engine.manager._attempt import AttemptPlan, PreparedAttempt, prepare_attempt
from httk.workflow.engine.manager._gate import PROTOCOL_VARIABLES
from httk.workflow.engine.publish._runners import RunnerFailure, publish_runner
from httk.workflow.engine.publish._submit import Submitter, job_key_of
from httk.workflow.models import load_schema, validator
from httk.workflow.protocol._digest import tree_digest

from tests.conftest import minimal_job

SCRIPT = b"#!/bin/sh\necho ran > ran.txt\n"
SCRIPT_SHA = hashlib.sha256(SCRIPT).hexdigest()
ENV_VARIABLES = {
    "HTTK_WORKFLOW_CONTEXT",
    "HTTK_WORKFLOW_CONTROL_DIR",
    "HTTK_WORKFLOW_WORKSPACE_DIR",
    "HTTK_WORKFLOW_JOB_DIR",
    "HTTK_WORKFLOW_WORKDIR",
    "HTTK_WORKFLOW_IS_RESTART",
    "HTTK_WORKFLOW_UNCLEAN_RESTART",
    "HTTK_WORKFLOW_DURABLE",
    "HTTK_WORKFLOW_ATTEMPT_REASON",
    "HTTK_WORKFLOW_STEP",
    "HTTK_WORKFLOW_PYTHON",
}


def _workspace(tmp_path: Path) -> Workspace:
    return init(tmp_path / "ws", durable=False)


def _place(ws: Workspace, job: dict[str, Any], files: dict[str, bytes] | None = None) -> Path:
    """Submit ``job`` with executable ``files`` and return its payload directory."""
    payload = ws.root.parent / f"payload-{job['id']}"
    payload.mkdir()
    (payload / "job.json").write_text(json.dumps(job))
    for relative, content in (files or {}).items():
        (payload / relative).parent.mkdir(parents=True, exist_ok=True)
        (payload / relative).write_bytes(content)
        (payload / relative).chmod(0o755)
    Submitter(ws).submit_payload(payload, "project/a")
    return ws.payload_path("project/a", str(job_key_of(job)))


def _plan(ws: Workspace, job: dict[str, Any], job_dir: Path, **overrides: Any) -> AttemptPlan:
    values: dict[str, Any] = {
        "workspace": ws,
        "job": job,
        "job_dir": job_dir,
        "job_id": job["id"],
        "job_key": str(job_key_of(job)),
        "placement": "project/a",
        "step": "prepare",
        "activation_id": str(uuid.uuid4()),
        "activation_ordinal": 1,
        "activation_reason": "initial",
        "attempt_id": str(uuid.uuid4()),
        "attempt_ordinal": 1,
        "total_attempts": 1,
        "is_restart": False,
        "is_unclean_restart": False,
        "attempt_reason": "initial",
        "previous_attempt_id": None,
        "data_generation": None,
        "priority": 500,
    }
    values.update(overrides)
    return AttemptPlan(**values)


def _payload_job(ws: Workspace, **overrides: Any) -> tuple[dict[str, Any], Path]:
    job = minimal_job(**overrides)
    return job, _place(ws, job, {"files/runner": SCRIPT})


def _shared_job(
    ws: Workspace, source: str, path: str, sha256: str, **overrides: Any
) -> tuple[dict[str, Any], Path]:
    job = minimal_job(
        runner={"source": source, "path": path, "sha256": sha256, "arguments": ["-v"]}, **overrides
    )
    return job, _place(ws, job)


def _failure(excinfo: pytest.ExceptionInfo[RunnerFailure]) -> dict[str, Any]:
    return excinfo.value.failure


# -- context.json and environment ------------------------------------------------------------------
def test_context_json_has_every_schema_member_and_validates(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    previous = str(uuid.uuid4())
    plan = _plan(
        ws,
        job,
        job_dir,
        attempt_ordinal=2,
        total_attempts=3,
        is_restart=True,
        is_unclean_restart=True,
        attempt_reason="lease_lost",
        previous_attempt_id=previous,
        resources={"procs": 4},
        settings={"vasp.command": "srun vasp_std"},
    )
    prepared = prepare_attempt(plan)

    control = job_dir / f".httk-attempt.{plan.attempt_id}"
    on_disk = json.loads((control / "context.json").read_text())
    assert on_disk == prepared.context
    assert set(on_disk) == set(load_schema("attempt-context")["properties"])
    validator("attempt-context").validate(on_disk)
    assert on_disk["format"] == "httk-workflow-attempt-context"
    assert on_disk["workspace_id"] == ws.workspace_id
    assert (on_disk["is_restart"], on_disk["is_unclean_restart"]) == (True, True)
    assert on_disk["previous_attempt_id"] == previous
    assert on_disk["durable"] is False
    assert on_disk["settings"] == {"vasp.command": "srun vasp_std"}
    assert on_disk["resources"] == {"procs": 4}
    assert on_disk["data_dir"] is None
    assert on_disk["control_dir"] == str(control) == str(prepared.control_dir)
    assert on_disk["workdir"] == str(job_dir / "run") == str(prepared.workdir)
    assert on_disk["job_dir"] == str(job_dir)
    assert on_disk["workspace_dir"] == str(ws.root)
    assert all(Path(on_disk[k]).is_absolute() for k in ("workspace_dir", "job_dir", "control_dir", "workdir"))
    assert prepared.stdout_path == control / "stdout.log"
    assert prepared.stderr_path == control / "stderr.log"


def test_environment_has_every_protocol_variable(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    plan = _plan(ws, job, job_dir, is_restart=True, attempt_reason="timeout", step="relax")
    bash_apis = {"HTTK_WORKFLOW_BASH_API": str(tmp_path / "api.bash")}
    prepared = prepare_attempt(plan, bash_apis=bash_apis, python="/opt/py/bin/python3")

    env = prepared.env
    assert ENV_VARIABLES | {"HTTK_WORKFLOW_BASH_API"} == set(env)
    assert env["HTTK_WORKFLOW_CONTEXT"] == str(prepared.control_dir / "context.json")
    assert env["HTTK_WORKFLOW_CONTROL_DIR"] == str(prepared.control_dir)
    assert env["HTTK_WORKFLOW_WORKSPACE_DIR"] == str(ws.root)
    assert env["HTTK_WORKFLOW_JOB_DIR"] == str(job_dir)
    assert env["HTTK_WORKFLOW_WORKDIR"] == str(job_dir / "run")
    assert (env["HTTK_WORKFLOW_IS_RESTART"], env["HTTK_WORKFLOW_UNCLEAN_RESTART"]) == ("1", "0")
    assert env["HTTK_WORKFLOW_DURABLE"] == "0"
    assert env["HTTK_WORKFLOW_ATTEMPT_REASON"] == "timeout"
    assert env["HTTK_WORKFLOW_STEP"] == "relax"
    assert env["HTTK_WORKFLOW_PYTHON"] == "/opt/py/bin/python3"
    assert env["HTTK_WORKFLOW_BASH_API"] == str(tmp_path / "api.bash")
    assert set(env) <= set(PROTOCOL_VARIABLES)
    assert prepared.argv == [str(job_dir / "files/runner")]


def test_python_defaults_to_the_managers_interpreter_and_bash_api_is_optional(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    env = prepare_attempt(_plan(ws, job, job_dir)).env
    assert env["HTTK_WORKFLOW_PYTHON"] == sys.executable
    assert "HTTK_WORKFLOW_BASH_API" not in env


def test_a_transactional_isolated_job_gets_its_data_dir(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws, workdir={"mode": "isolated"}, data={"mode": "transactional"})
    plan = _plan(ws, job, job_dir, data_generation=3)
    prepared = prepare_attempt(plan)
    assert prepared.context["data_dir"] == str(job_dir / "data")
    assert prepared.context["data_generation"] == 3
    assert prepared.env["HTTK_WORKFLOW_DATA_DIR"] == str(job_dir / "data")
    validator("attempt-context").validate(prepared.context)


def test_a_durable_workspace_says_so_to_the_runner(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=True)
    job, job_dir = _payload_job(ws)
    prepared = prepare_attempt(_plan(ws, job, job_dir))
    assert prepared.context["durable"] is True
    assert prepared.env["HTTK_WORKFLOW_DURABLE"] == "1"


def test_scalar_settings_are_exported_but_never_override_the_managers_environment(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    settings = {
        "vasp.command": "srun -n 32 vasp_std",
        "manager.workers": 4,
        "slurm.exclusive": True,
        "x.ratio": 0.5,
        "pseudo.library": "/site/potpaw",
        "x.list": [1, 2],
        "x.object": {"a": 1},
        "x.none": None,
        "workflow.step": "hijacked",
    }
    environ = {"HTTK_PSEUDO_LIBRARY": "/deployment/potpaw", "PATH": "/bin"}
    prepared = prepare_attempt(_plan(ws, job, job_dir, settings=settings), environ=environ)

    env = prepared.env
    assert env["HTTK_VASP_COMMAND"] == "srun -n 32 vasp_std"
    assert env["HTTK_MANAGER_WORKERS"] == "4"
    assert env["HTTK_SLURM_EXCLUSIVE"] == "true"
    assert env["HTTK_X_RATIO"] == "0.5"
    assert "HTTK_PSEUDO_LIBRARY" not in env  # the deployment override stays what the runner sees
    assert not {"HTTK_X_LIST", "HTTK_X_OBJECT", "HTTK_X_NONE"} & set(env)
    assert env["HTTK_WORKFLOW_STEP"] == "prepare"  # the protocol namespace is not a settings target
    assert prepared.context["settings"] == settings  # the snapshot keeps everything


# -- workdirs --------------------------------------------------------------------------------------
def test_a_persistent_workdir_is_created_once_and_reused(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws, workdir={"mode": "persistent", "path": "calc/run"})
    first = prepare_attempt(_plan(ws, job, job_dir))
    assert first.workdir == job_dir / "calc/run"
    assert first.context["workdir_reused"] is False
    (first.workdir / "WAVECAR").write_text("big")

    second = prepare_attempt(_plan(ws, job, job_dir, attempt_ordinal=2, is_restart=True))
    assert second.workdir == first.workdir
    assert second.context["workdir_reused"] is True
    assert (second.workdir / "WAVECAR").read_text() == "big"
    assert second.control_dir != first.control_dir


def test_a_symlinked_persistent_workdir_is_refused(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    (tmp_path / "elsewhere").mkdir()
    (job_dir / "run").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "protocol_error"
    assert excinfo.value.details["reason"] == "workdir_unavailable"


def test_an_isolated_workdir_is_new_for_every_attempt(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws, workdir={"mode": "isolated"})
    first_plan = _plan(ws, job, job_dir)
    first = prepare_attempt(first_plan)
    assert first.workdir == job_dir / f"run.{first_plan.attempt_id}"
    assert first.workdir.is_dir() and not list(first.workdir.iterdir())
    assert first.context["workdir_reused"] is False
    assert first.context["workdir_mode"] == "isolated"

    second = prepare_attempt(_plan(ws, job, job_dir))
    assert second.workdir != first.workdir and second.workdir.is_dir()


def test_an_existing_control_directory_is_an_error(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    plan = _plan(ws, job, job_dir)
    prepare_attempt(plan)
    with pytest.raises(FileExistsError):
        prepare_attempt(plan)


def test_another_backend_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    job["runner"] = {**job["runner"], "backend": "slurm"}
    with pytest.raises(ValueError, match="slurm"):
        prepare_attempt(_plan(ws, job, job_dir))
    assert sorted(p.name for p in job_dir.iterdir()) == ["files", "job.json"]


# -- payload runners -------------------------------------------------------------------------------
def test_a_payload_runner_runs_in_place_with_its_arguments(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job = minimal_job(runner={"path": "files/runner", "arguments": ["--step", "a b"]})
    job_dir = _place(ws, job, {"files/runner": SCRIPT})
    prepared = prepare_attempt(_plan(ws, job, job_dir))
    assert prepared.argv == [str(job_dir / "files/runner"), "--step", "a b"]
    assert not (prepared.control_dir / "runner").exists()


@pytest.mark.parametrize(
    "path", ["../escape", "files/../../escape", "/bin/sh", "files//runner", "./files/runner"]
)
def test_a_payload_runner_path_that_could_escape_is_refused(tmp_path: Path, path: str) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    (ws.root / "project" / "escape").write_bytes(SCRIPT)
    job["runner"] = {"path": path}  # past validation: the manager checks again
    plan = _plan(ws, job, job_dir)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(plan)
    assert excinfo.value.code == "runner_unavailable"
    control = job_dir / f".httk-attempt.{plan.attempt_id}"
    assert control.is_dir() and not (control / "context.json").exists()  # evidence, never prepared


def test_a_symlinked_payload_runner_is_refused(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    target = tmp_path / "outside"
    target.write_bytes(SCRIPT)
    target.chmod(0o755)
    (job_dir / "files/runner").unlink()
    (job_dir / "files/runner").symlink_to(target)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert _failure(excinfo)["code"] == "runner_unavailable"
    assert "symbolic link" in excinfo.value.message


def test_a_payload_runner_below_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    shutil.move(job_dir / "files", tmp_path / "files-elsewhere")
    (job_dir / "files").symlink_to(tmp_path / "files-elsewhere")
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "runner_unavailable"


@pytest.mark.parametrize("defect", ["missing", "directory", "not_executable"])
def test_an_unusable_payload_runner_is_unavailable(tmp_path: Path, defect: str) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    runner = job_dir / "files/runner"
    if defect == "missing":
        runner.unlink()
    elif defect == "directory":
        runner.unlink()
        runner.mkdir()
    else:
        runner.chmod(0o644)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "runner_unavailable"
    assert excinfo.value.details == {"path": "files/runner"}


# -- workspace runners -----------------------------------------------------------------------------
def _publish_file(ws: Workspace, tmp_path: Path, name: str = "relax", content: bytes = SCRIPT) -> str:
    source = tmp_path / f"src-{name}"
    source.write_bytes(content)
    return publish_runner(ws, name, source).sha256


def test_a_workspace_runner_is_staged_verified_and_executed_from_the_copy(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    digest = _publish_file(ws, tmp_path)
    job, job_dir = _shared_job(ws, "workspace", "relax", digest)
    prepared = prepare_attempt(_plan(ws, job, job_dir))

    staged = prepared.control_dir / "runner"
    assert prepared.argv == [str(staged), "-v"]
    assert staged.read_bytes() == SCRIPT
    assert os.access(staged, os.X_OK)
    assert not staged.is_symlink()
    assert (ws.runners_dir / "relax").read_bytes() == SCRIPT  # the store is untouched


def test_a_tampered_store_copy_fails_with_runner_mismatch(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    digest = _publish_file(ws, tmp_path)
    stored = ws.runners_dir / "relax"
    stored.chmod(0o755)
    stored.write_bytes(b"#!/bin/sh\nrm -rf ~\n")
    job, job_dir = _shared_job(ws, "workspace", "relax", digest)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    failure = _failure(excinfo)
    assert failure["code"] == "runner_mismatch"
    assert failure["details"]["expected_sha256"] == digest
    assert failure["details"]["actual_sha256"] == hashlib.sha256(b"#!/bin/sh\nrm -rf ~\n").hexdigest()
    validator("failure").validate(failure)


def test_a_missing_workspace_runner_is_unavailable(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _shared_job(ws, "workspace", "absent", SCRIPT_SHA)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "runner_unavailable"
    validator("failure").validate(excinfo.value.failure)


def test_a_symlink_in_the_store_is_unavailable(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (tmp_path / "target").write_bytes(SCRIPT)
    (ws.runners_dir / "linked").symlink_to(tmp_path / "target")
    job, job_dir = _shared_job(ws, "workspace", "linked", SCRIPT_SHA)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "runner_unavailable"


def _tree(root: Path, with_run: bool = True) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "lib/helper.sh").write_text("helper() { :; }\n")
    if with_run:
        (root / "run").write_bytes(SCRIPT)
        (root / "run").chmod(0o644)  # staging makes the entry point executable
    return root


def test_a_tree_runner_is_entered_at_its_run_file(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    published = publish_runner(ws, "suite", _tree(tmp_path / "suite"))
    job, job_dir = _shared_job(ws, "workspace", "suite", published.sha256)
    prepared = prepare_attempt(_plan(ws, job, job_dir))

    staged = prepared.control_dir / "runner"
    assert prepared.argv[0] == str(staged / "run")
    assert os.access(staged / "run", os.X_OK)
    assert (staged / "lib/helper.sh").read_text() == "helper() { :; }\n"
    assert tree_digest(staged) == published.sha256


def test_a_tree_without_run_is_unavailable(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    shutil.copytree(_tree(tmp_path / "norun", with_run=False), ws.runners_dir / "norun")
    digest = tree_digest(ws.runners_dir / "norun")
    job, job_dir = _shared_job(ws, "workspace", "norun", digest)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "runner_unavailable"
    assert "'run'" in excinfo.value.message


def test_a_tampered_tree_is_a_mismatch(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    published = publish_runner(ws, "suite", _tree(tmp_path / "suite"))
    (ws.runners_dir / "suite/lib/extra").write_text("new file\n")
    job, job_dir = _shared_job(ws, "workspace", "suite", published.sha256)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "runner_mismatch"
    assert excinfo.value.details["actual_sha256"] == tree_digest(ws.runners_dir / "suite")


# -- installed runners -----------------------------------------------------------------------------
def test_an_installed_runner_comes_from_the_first_search_root_that_has_it(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    empty, first, second = tmp_path / "empty", tmp_path / "first", tmp_path / "second"
    for root, content in ((first, SCRIPT), (second, b"#!/bin/sh\nexit 3\n")):
        (root / "bin").mkdir(parents=True)
        (root / "bin/relax").write_bytes(content)
    empty.mkdir()
    job, job_dir = _shared_job(ws, "installed", "bin/relax", SCRIPT_SHA)
    search = [tmp_path / "absent", empty, first, second]
    prepared = prepare_attempt(_plan(ws, job, job_dir), runner_search_path=search)
    assert (prepared.control_dir / "runner").read_bytes() == SCRIPT
    assert prepared.argv == [str(prepared.control_dir / "runner"), "-v"]


def test_an_installed_runner_without_a_search_path_is_unavailable(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _shared_job(ws, "installed", "bin/relax", SCRIPT_SHA)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "runner_unavailable"


@pytest.fixture
def runner_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An importable package whose body fails: resolving a pkg: runner must not execute it."""
    name = f"httk_test_runners_{uuid.uuid4().hex[:8]}"
    package = tmp_path / "site" / name
    (package / "runners").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (package / "runners/relax").write_bytes(SCRIPT)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return name


def test_a_pkg_runner_of_an_allowed_module_is_staged_without_importing_it(
    tmp_path: Path, runner_package: str
) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _shared_job(ws, "installed", f"pkg:{runner_package}/runners/relax", SCRIPT_SHA)
    prepared = prepare_attempt(_plan(ws, job, job_dir), pkg_modules=frozenset({runner_package}))
    assert (prepared.control_dir / "runner").read_bytes() == SCRIPT
    assert runner_package not in sys.modules


def test_a_pkg_runner_of_a_module_outside_the_allowlist_is_unavailable(
    tmp_path: Path, runner_package: str
) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _shared_job(ws, "installed", f"pkg:{runner_package}/runners/relax", SCRIPT_SHA)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "runner_unavailable"
    assert "allowlist" in excinfo.value.message
    assert runner_package not in sys.modules


def test_the_default_allowlist_is_the_httk_workflow_namespace(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    from httk.workflow import protocol

    resource = Path(protocol.__file__)
    digest = hashlib.sha256(resource.read_bytes()).hexdigest()
    job, job_dir = _shared_job(ws, "installed", "pkg:httk.workflow/protocol/__init__.py", digest)
    prepared = prepare_attempt(_plan(ws, job, job_dir))
    assert (prepared.control_dir / "runner").read_bytes() == resource.read_bytes()


def test_the_default_allowlist_admits_the_namespace_s_subpackages(tmp_path: Path) -> None:
    """``httk.workflow`` admits ``httk.workflow.vasp`` and the like: the same files either way."""
    ws = _workspace(tmp_path)
    from httk.workflow import protocol

    resource = Path(protocol.__file__)
    digest = hashlib.sha256(resource.read_bytes()).hexdigest()
    job, job_dir = _shared_job(ws, "installed", "pkg:httk.workflow.protocol/__init__.py", digest)
    prepared = prepare_attempt(_plan(ws, job, job_dir))
    assert (prepared.control_dir / "runner").read_bytes() == resource.read_bytes()


def test_a_subpackage_of_an_allowed_module_is_staged_importing_neither(
    tmp_path: Path, runner_package: str
) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _shared_job(ws, "installed", f"pkg:{runner_package}.runners/relax", SCRIPT_SHA)
    prepared = prepare_attempt(_plan(ws, job, job_dir), pkg_modules=frozenset({runner_package}))
    assert (prepared.control_dir / "runner").read_bytes() == SCRIPT
    assert runner_package not in sys.modules


@pytest.mark.parametrize(
    ("path", "allowed", "wanted"),
    [
        ("pkg:{package}x/runners/relax", "{package}", "allowlist"),  # a sibling name, not a subpackage
        ("pkg:{package}.absent/relax", "{package}", "not an installed package"),
        ("pkg:{package}/runners/relax", "{package}.runners", "allowlist"),  # the parent of an entry
    ],
)
def test_a_pkg_module_is_allowed_by_whole_components_only(
    tmp_path: Path, runner_package: str, path: str, allowed: str, wanted: str
) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _shared_job(ws, "installed", path.format(package=runner_package), SCRIPT_SHA)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(
            _plan(ws, job, job_dir), pkg_modules=frozenset({allowed.format(package=runner_package)})
        )
    assert excinfo.value.code == "runner_unavailable"
    assert wanted in excinfo.value.message
    assert runner_package not in sys.modules


def test_a_pkg_resource_that_escapes_its_package_is_refused(tmp_path: Path, runner_package: str) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _shared_job(ws, "installed", f"pkg:{runner_package}/runners/relax", SCRIPT_SHA)
    job["runner"]["path"] = f"pkg:{runner_package}/../{runner_package}/runners/relax"  # past validation
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir), pkg_modules=frozenset({runner_package}))
    assert excinfo.value.code == "runner_unavailable"


def test_prepared_attempt_is_plain_data(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    prepared = prepare_attempt(_plan(ws, job, job_dir))
    rebuilt = PreparedAttempt(**{**prepared.__dict__})
    assert rebuilt == prepared
    json.dumps(prepared.context)


def test_a_symlink_inside_a_stored_tree_is_unavailable(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    published = publish_runner(ws, "suite", _tree(tmp_path / "suite"))
    (ws.runners_dir / "suite/lib/link").symlink_to("/etc/passwd")
    job, job_dir = _shared_job(ws, "workspace", "suite", published.sha256)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "runner_unavailable"
    assert "lib/link" in excinfo.value.message


def test_a_fifo_in_the_search_path_is_unavailable_and_never_blocks(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (tmp_path / "root").mkdir()
    os.mkfifo(tmp_path / "root/relax")
    job, job_dir = _shared_job(ws, "installed", "relax", SCRIPT_SHA)
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir), runner_search_path=[tmp_path / "root"])
    assert excinfo.value.code == "runner_unavailable"


def test_a_persistent_workdir_path_that_could_escape_is_refused(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    job, job_dir = _payload_job(ws)
    job["workdir"] = {"mode": "persistent", "path": "../../outside"}  # past validation
    with pytest.raises(RunnerFailure) as excinfo:
        prepare_attempt(_plan(ws, job, job_dir))
    assert excinfo.value.code == "protocol_error"
    assert excinfo.value.details["reason"] == "workdir_unavailable"
    assert not (ws.root / "outside").exists()
