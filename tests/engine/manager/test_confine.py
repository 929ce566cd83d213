"""Runner confinement with Landlock, through a real manager, real runner processes and the real kernel.

The runner is a Python ``@step`` that tries each *probe* its job lists — append to, create, make a
directory in, truncate, remove, rename or hard-link a path — and records the outcome of each (``ok`` or
the errno's name) in its workdir before it succeeds through the SDK (so publishing the outcome into its
attempt-control directory, confined, is exercised every time). A denied probe changes nothing, and an
allowed one is harmless: appends add nothing, truncation keeps the size, a rename is undone.

What must be denied: job.json, the state tree (a marker of its own), the journal, the runner store,
format.json, committed ``data/`` of a transactional job, the payload outside its own directories, and
another job's payload. What must be allowed: its workdir, attempt control, ``.httk-job/``, ``logs/``,
``$TMPDIR``, the home directory, ``/dev/null``, what lies beside the workspace in ``/tmp``, and what
``runner.writable_paths`` and a packaged runner's declaration name. Turned off (``--no-confine``,
``runner.confine: false``) or unavailable, nothing is denied, and the running frame says which.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, init, probe_marker
from httk.workflow.engine.manager._confine import BROAD_REFRESH_SECONDS, Confiner
from httk.workflow.engine.manager._gate import spawn_gated
from httk.workflow.engine.manager._landlock import Confinement, ConfinementError, Landlock, landlock
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.manager._writable import Attempt
from httk.workflow.engine.publish._runners import RunnerFailure, publish_runner
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.conftest import minimal_job
from tests.engine.manager.test_attempt_executor import _prepare
from tests.runners import frame_chain

ABI = landlock().abi
needs_landlock = pytest.mark.skipif(ABI is None, reason=f"the kernel has no Landlock: {landlock().reason}")

PROBE_RUNNER = f"""#!{sys.executable}
import errno, json, os
from httk.workflow.sdk import Attempt, dispatch, step


def attempt(op, path):
    try:
        if op == "append":
            open(path, "ab").close()
        elif op == "create":
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        elif op == "mkdir":
            os.mkdir(path)
        elif op == "truncate":
            os.truncate(path, os.stat(path).st_size)
        elif op == "unlink":
            os.unlink(path)
        elif op == "rename":
            os.rename(path, path + ".moved")
            os.rename(path + ".moved", path)
        elif op == "link":
            os.link(path, os.path.join(os.getcwd(), "linked"))
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))


@step
def probe(a: Attempt) -> None:
    where = {{
        "workdir": str(a.workdir),
        "control": str(a.control_dir),
        "job": os.environ["HTTK_WORKFLOW_JOB_DIR"],
        "workspace": os.environ["HTTK_WORKFLOW_WORKSPACE_DIR"],
        "tmpdir": os.environ.get("TMPDIR", ""),
    }}
    results = {{name: attempt(op, path.format(**where)) for name, (op, path) in a.inputs["probes"].items()}}
    (a.workdir / "probes.json").write_text(json.dumps(results))
    a.succeed()


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""

DENIED = {
    "job.json append": ("append", "{job}/job.json"),
    "job.json unlink": ("unlink", "{job}/job.json"),
    "job.json rename": ("rename", "{job}/job.json"),
    "job.json link": ("link", "{job}/job.json"),
    "payload create": ("create", "{job}/planted"),
    "state create": ("create", "{workspace}/.httk-workflow/state/running/p/planted"),
    "state mkdir": ("mkdir", "{workspace}/.httk-workflow/state/planted"),
    "journal create": ("create", "{workspace}/.httk-workflow/journal/planted"),
    "runner store append": ("append", "{workspace}/.httk-workflow/runners/probe.py"),
    "runner store create": ("create", "{workspace}/.httk-workflow/runners/planted"),
    "format.json append": ("append", "{workspace}/.httk-workflow/format.json"),
    "requests create": ("create", "{workspace}/.httk-workflow/requests/ready/planted.json"),
    "another job's payload": ("create", "{workspace}/q/planted"),
}
DENIED_FROM_ABI_3 = {"job.json truncate": ("truncate", "{job}/job.json")}
ALLOWED = {
    "workdir create": ("create", "{workdir}/new"),
    "workdir mkdir": ("mkdir", "{workdir}/sub"),
    "control create": ("create", "{control}/note"),
    ".httk-job create": ("create", "{job}/.httk-job/state.note"),
    "logs create": ("create", "{job}/logs/runner.log"),
    "/dev/null append": ("append", "/dev/null"),
}


def probes_job(probes: Mapping[str, tuple[str, str]], **members: Any) -> dict[str, Any]:
    inputs = {"probes": {name: list(probe) for name, probe in probes.items()}, **members.pop("inputs", {})}
    return minimal_job(
        runner={"backend": "path", "source": "payload", "path": "runner", "arguments": []},
        initial_step="probe",
        inputs=inputs,
        **members,
    )


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A workspace below /tmp, a sibling job at placement ``q``, a stored runner, TMPDIR and HOME aside."""
    for name in ("tmpdir", "home", "beside"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmpdir"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    workspace = init(tmp_path / "ws", durable=False, extensions=("transactional-data-v1",))
    (tmp_path / "probe.py").write_text(PROBE_RUNNER)
    publish_runner(workspace, "probe.py", tmp_path / "probe.py")
    other = minimal_job(claim={"pool": "elsewhere", "required_capabilities": []})  # never claimed here
    submit_jobs(workspace, [JobSpec(other, "q", files={"shared/.keep": b""})])
    return workspace


def sibling(ws: Workspace) -> Path:
    """The payload of the job at placement ``q`` that no manager here claims."""
    (payload,) = (ws.root / "q").iterdir()
    return payload


def run_probes(
    ws: Workspace,
    probes: Mapping[str, tuple[str, str]],
    *,
    config: ManagerConfig | None = None,
    files: Mapping[str, bytes] | None = None,
    manager: Manager | None = None,
    **members: Any,
) -> tuple[dict[str, str], dict[str, Any]]:
    """Run one probing job to success; what each probe found, and its running frame."""
    job = probes_job(probes, **members)
    payload = {"runner": PROBE_RUNNER.encode(), **(files or {})}
    submit_jobs(ws, [JobSpec(job, "p", files=payload, executables=frozenset({"runner"}))])
    (manager or Manager(ws, config or ManagerConfig())).run()
    marker = probe_marker(ws, "p", f"{job['tag']}--{job['id']}")
    assert marker is not None and marker.kind.value == "succeeded", marker
    frames = frame_chain(ws, marker)
    [running] = [frame for frame in frames if frame["kind"] == "running"]
    results = json.loads(Path(running["workdir"], "probes.json").read_text())
    return results, running


@needs_landlock
def test_a_confined_runner_writes_only_where_the_protocol_lets_it(ws: Workspace, tmp_path: Path) -> None:
    allowed = {
        **ALLOWED,
        "$TMPDIR create": ("create", str(tmp_path / "tmpdir" / "new")),
        "home create": ("create", str(tmp_path / "home" / ".cache-entry")),
        "beside the workspace in /tmp": ("create", str(tmp_path / "beside" / "new")),
    }
    denied = {**DENIED, **(DENIED_FROM_ABI_3 if (ABI or 0) >= 3 else {})}
    denied["the directory holding the workspace"] = ("create", str(tmp_path / "planted"))
    results, running = run_probes(ws, {**denied, **allowed})
    assert {name: results[name] for name in allowed} == dict.fromkeys(allowed, "ok")
    link = results.pop("job.json link")
    assert link in ("EXDEV", "EACCES"), link  # a link out of a directory without the refer right
    assert {name: results[name] for name in denied if name in results} == {
        name: "EACCES" for name in denied if name != "job.json link"
    }
    record = running["confinement"]
    assert (record["enforced"], record["mechanism"], record["abi"]) == (True, "landlock", ABI)
    assert str(tmp_path / "tmpdir") in record["writable"] and running["workdir"] in record["writable"]
    assert "refused" not in record


@needs_landlock
def test_committed_data_of_a_transactional_job_is_never_written(ws: Workspace) -> None:
    probes = {
        "data append": ("append", "{job}/data/committed.txt"),
        "data create": ("create", "{job}/data/planted"),
        "data unlink": ("unlink", "{job}/data/committed.txt"),
    }
    results, _ = run_probes(ws, probes, data={"mode": "transactional"}, files={"data/committed.txt": b"c"})
    assert results == dict.fromkeys(probes, "EACCES")
    untransacted, _ = run_probes(ws, {"data create": ("create", "{job}/data/new")}, files={"data/x": b"x"})
    assert untransacted == {"data create": "ok"}  # the data/ of a job without transactions is its own


@needs_landlock
def test_an_isolated_workdir_is_writable_and_the_others_are_not(ws: Workspace) -> None:
    probes = {"workdir create": ("create", "{workdir}/new"), "run/ create": ("create", "{job}/run/new")}
    results, running = run_probes(ws, probes, workdir={"mode": "isolated"})
    assert results == {"workdir create": "ok", "run/ create": "ENOENT"}  # no such directory, and no right
    assert Path(running["workdir"]).name.startswith("run.")


@needs_landlock
def test_declared_writable_paths_are_granted_and_forbidden_ones_refused(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="httk.workflow.manager")
    ws.update_document({"settings": {"runner.writable_paths": ["shared"]}})
    probes = {
        "declared by the workspace": ("create", "{job}/shared/new"),
        "declared by the job": ("append", "{job}/progress.log"),
        "refused: job.json": ("append", "{job}/job.json"),
    }
    declared = ["progress.log", "job.json", "../../.httk-workflow/journal", "../../q", "missing"]
    files = {"shared/.keep": b"", "progress.log": b""}
    results, running = run_probes(ws, probes, files=files, inputs={"runner.writable_paths": declared})
    assert results == {
        "declared by the workspace": "ok",
        "declared by the job": "ok",
        "refused: job.json": "EACCES",
    }
    reasons = {Path(r["path"]).name: r["reason"] for r in running["confinement"]["refused"]}
    assert reasons == {
        "job.json": "lies in job.json, which no runner may write",
        "journal": "lies in the workspace's control directory, which no runner may write",
        "q": "holds the payloads of other jobs (their job.json)",
        "missing": "does not exist",
    }
    origins = {r["origin"] for r in running["confinement"]["refused"]}
    assert origins == {"runner.writable_paths (job input)"}
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not writable for runners")]
    assert len(logged) == 4 and any(
        "job.json (runner.writable_paths (job input)) lies in job.json" in m for m in logged
    )


@needs_landlock
def test_a_declared_path_may_lie_in_another_jobs_payload_but_never_its_job_json(ws: Workspace) -> None:
    """A v1 subtask works in its parent's tree: a declared path below another job's payload is granted;
    that payload itself, its job.json and a placement directory (which holds payloads) are not."""
    other = sibling(ws)
    declared = [str(other / "shared"), str(other), str(other / "job.json"), str(ws.root / "q")]
    probes = {
        "declared, in another payload": ("create", f"{other}/shared/new"),
        "that payload's job.json": ("append", f"{other}/job.json"),
        "that payload": ("create", f"{other}/planted"),
    }
    results, running = run_probes(ws, probes, inputs={"runner.writable_paths": declared})
    assert results == {
        "declared, in another payload": "ok",
        "that payload's job.json": "EACCES",
        "that payload": "EACCES",
    }
    assert str(other / "shared") in running["confinement"]["writable"]
    reasons = {r["path"]: r["reason"] for r in running["confinement"]["refused"]}
    assert reasons == {
        str(other): "is another job's payload directory, which holds its job.json",
        str(other / "job.json"): "lies in another job's job.json, which no runner may write",
        str(ws.root / "q"): "holds the payloads of other jobs (their job.json)",
    }


@needs_landlock
def test_a_workspace_in_the_temporary_directory_gives_the_runner_a_private_one(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TMPDIR holds the workspace, so it is granted only around it and ``mktemp`` could make nothing
    there: the attempt gets ``TMPDIR`` in its control directory instead, and the frame says so."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    probes = {"$TMPDIR create": ("create", "{tmpdir}/scratch"), "the old TMPDIR": ("create", f"{tmp_path}/x")}
    results, running = run_probes(ws, probes)
    assert results == {"$TMPDIR create": "ok", "the old TMPDIR": "EACCES"}
    private = running["confinement"]["tmpdir"]
    assert Path(private).parent.name.startswith(".httk-attempt.") and Path(private).name == "tmp"


@needs_landlock
def test_a_temporary_directory_beside_the_workspace_is_left_as_it_is(ws: Workspace, tmp_path: Path) -> None:
    results, running = run_probes(ws, {"$TMPDIR create": ("create", "{tmpdir}/scratch")})
    assert results == {"$TMPDIR create": "ok"} and "tmpdir" not in running["confinement"]
    assert (tmp_path / "tmpdir" / "scratch").exists()


def packaged_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declaration: str, entry: str) -> str:
    """Install ``probepkg`` (its ``run`` the probe runner) with ``declaration`` as its module and an entry
    point named ``entry`` in ``httk.workflow.writable_paths``; the runner member of a job naming it."""
    site = tmp_path / "site"
    package = site / "probepkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(declaration))
    (package / "run").write_text(PROBE_RUNNER)
    (package / "run").chmod(0o755)
    info = site / "probepkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probepkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[httk.workflow.writable_paths]\n{entry} = probepkg:writable_paths\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "probepkg", raising=False)  # each test's own declaration
    return hashlib.sha256(PROBE_RUNNER.encode()).hexdigest()


def run_packaged(
    ws: Workspace, digest: str, probes: Mapping[str, tuple[str, str]], **inputs: Any
) -> list[dict[str, Any]]:
    """Run one probing job of ``pkg:probepkg/run`` to its end; its frames, oldest first."""
    job = probes_job(probes, inputs=inputs)
    job["runner"] = {
        "backend": "path",
        "source": "installed",
        "path": "pkg:probepkg/run",
        "sha256": digest,
        "arguments": [],
    }
    submit_jobs(ws, [JobSpec(job, "p", files={"task-dir/.keep": b""})])
    Manager(ws, ManagerConfig(runner_modules=("probepkg",))).run()
    marker = probe_marker(ws, "p", f"{job['tag']}--{job['id']}")
    assert marker is not None
    return frame_chain(ws, marker)


@needs_landlock
@pytest.mark.parametrize("entry", ["probepkg/run", "probepkg"])
def test_a_packaged_runner_declares_its_own_paths(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    """The entry named after the runner (``<module>/<resource>``), or after its module for all of them,
    is called with the job, its payload and the workspace; what it declares is writable, and a
    forbidden write is still EACCES."""
    declaration = """
        def writable_paths(job, payload, workspace):
            assert (workspace / ".httk-workflow").is_dir()
            return [payload / "task-dir", job["inputs"]["elsewhere"]]
    """
    digest = packaged_probe(tmp_path, monkeypatch, declaration, entry)
    elsewhere = tmp_path / "beside" / "declared.txt"
    elsewhere.write_bytes(b"")
    probes = {
        "declared task dir": ("create", "{job}/task-dir/new"),
        "declared file": ("append", str(elsewhere)),
        "job.json": ("append", "{job}/job.json"),
        "the payload": ("create", "{job}/planted"),
    }
    frames = run_packaged(ws, digest, probes, elsewhere=str(elsewhere))
    assert frames[-1]["kind"] == "succeeded", frames[-1]
    [running] = [frame for frame in frames if frame["kind"] == "running"]
    results = json.loads(Path(running["workdir"], "probes.json").read_text())
    assert results == {
        "declared task dir": "ok",
        "declared file": "ok",
        "job.json": "EACCES",
        "the payload": "EACCES",
    }
    assert str(elsewhere) in running["confinement"]["writable"]


@needs_landlock
@pytest.mark.parametrize(
    ("returned", "refused"),
    [
        ('[payload / "job.json"]', "job.json lies in job.json, which no runner may write"),
        ('[workspace / ".httk-workflow" / "journal"]', "lies in the workspace's control directory"),
        ('[workspace / ".httk-workflow" / "runners"]', "lies in the workspace's control directory"),
        ('[workspace / "q"]', "holds the payloads of other jobs (their job.json)"),
        ("[42]", "42 is not a path"),
    ],
)
def test_a_packaged_runner_that_declares_a_forbidden_path_never_starts(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, returned: str, refused: str
) -> None:
    declaration = f"""
        def writable_paths(job, payload, workspace):
            return {returned}
    """
    digest = packaged_probe(tmp_path, monkeypatch, declaration, "probepkg/run")
    last = run_packaged(ws, digest, {"job.json": ("append", "{job}/job.json")})[-1]
    assert last["kind"] == "failed" and last["reason"] == "prepare_failure", last
    failure = last["failure"]
    assert failure["code"] == "protocol_error" and failure["details"]["reason"] == "writable_path_refused"
    assert failure["message"].startswith("the packaged runner pkg:probepkg/run declares paths no runner may")
    assert refused in failure["message"], failure
    assert not list(ws.root.glob("p/*/run/probes.json"))  # the runner never ran


DECLARE = "def writable_paths(job, payload, workspace):\n"


@needs_landlock
@pytest.mark.parametrize(
    ("declaration", "said"),
    [
        (
            "def writable_paths(job, payload, workspace):\n    raise OSError('no such table')\n",
            "no such table",
        ),
        ("def writable_paths(job, payload, workspace):\n    return '/scratch'\n", "returned str, not"),
        ("writable_paths = 42\n", "is a int, not a callable"),
    ],
)
def test_a_declaration_that_cannot_be_made_fails_the_attempt_saying_why(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declaration: str, said: str
) -> None:
    digest = packaged_probe(tmp_path, monkeypatch, declaration, "probepkg")
    failure = run_packaged(ws, digest, {})[-1]["failure"]
    assert (failure["code"], failure["details"]["reason"]) == ("protocol_error", "writable_paths_failed")
    assert "pkg:probepkg/run could not declare its writable paths" in failure["message"]
    assert said in failure["message"], failure


OFF = {"job.json append": ("append", "{job}/job.json"), "payload create": ("create", "{job}/planted")}


def test_no_confine_turns_it_off_for_a_manager(ws: Workspace) -> None:
    results, running = run_probes(ws, OFF, config=ManagerConfig(confine=False))
    assert results == dict.fromkeys(OFF, "ok")
    assert running["confinement"] == {"enforced": False, "reason": "manager", "detail": "--no-confine"}


@pytest.mark.parametrize("where", ["job input", "workspace setting"])
def test_runner_confine_false_turns_it_off_for_jobs(ws: Workspace, where: str) -> None:
    if where == "job input":
        results, running = run_probes(ws, OFF, inputs={"runner.confine": False})
    else:
        ws.update_document({"settings": {"runner.confine": False}})
        results, running = run_probes(ws, OFF)
    assert results == dict.fromkeys(OFF, "ok")
    assert running["confinement"] == {"enforced": False, "reason": "job", "detail": "runner.confine: false"}


@needs_landlock
def test_only_json_false_turns_it_off(ws: Workspace) -> None:
    results, running = run_probes(ws, OFF, inputs={"runner.confine": "false"})
    assert results == dict.fromkeys(OFF, "EACCES") and running["confinement"]["enforced"] is True


def test_without_landlock_the_manager_says_so_once_and_runs_unconfined(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    manager = Manager(ws, ManagerConfig(workers=2))
    manager.state.confiner = Confiner(True, kernel=lambda: Landlock(None, "the kernel has no Landlock"))
    caplog.set_level(logging.WARNING, logger="httk.workflow.manager")
    results, running = run_probes(ws, OFF, manager=manager)
    assert results == dict.fromkeys(OFF, "ok")
    assert running["confinement"] == {
        "enforced": False,
        "reason": "unavailable",
        "detail": "the kernel has no Landlock",
    }
    notices = [r.getMessage() for r in caplog.records if "confinement is unavailable" in r.getMessage()]
    assert notices == [
        "runner confinement is unavailable (the kernel has no Landlock): runners run unconfined"
    ]


def test_a_runner_that_cannot_be_confined_is_never_started(tmp_path: Path) -> None:
    """The hook fails in the child before the gate's exec: nothing runs and the attempt cannot start."""
    prepared = _prepare(tmp_path, b"#!/bin/sh\ntouch ran\n")

    class Refused(Confinement):
        def within(self, start: Callable[[], Any]) -> Any:
            raise ConfinementError(errno.EPERM, "landlock_restrict_self: Operation not permitted")

    with pytest.raises(RunnerFailure) as excinfo:
        spawn_gated(prepared, confinement=Refused({"enforced": True}))
    assert excinfo.value.code == "process_failure"
    assert "could not be confined" in excinfo.value.message
    assert not (prepared.workdir / "ran").exists()


@needs_landlock
def test_the_entries_beside_a_workspace_are_listed_again_once_the_listing_is_old(tmp_path: Path) -> None:
    """Around a workspace below /tmp every existing entry is writable; one made later only once the
    manager lists the broad paths again (:data:`BROAD_REFRESH_SECONDS`), never the workspace's own."""
    workspace = init(tmp_path / "ws", durable=False)
    payload = workspace.root / "p" / "job"
    for directory in ("run", ".httk-attempt.x"):
        (payload / directory).mkdir(parents=True)
    (payload / "job.json").write_text("{}")
    (tmp_path / "early").mkdir()
    now = [0.0]
    confiner = Confiner(True, monotonic=lambda: now[0])
    attempt = Attempt(
        workspace, {"data": {"mode": "none"}}, payload, payload / ".httk-attempt.x", payload / "run", {}
    )

    def touch(path: Path) -> str:
        confinement = confiner.confine(attempt)
        try:
            done = confinement.within(lambda: subprocess.run(["touch", str(path)], check=False))
        finally:
            confinement.close()
        return "ok" if done.returncode == 0 else "denied"

    assert touch(tmp_path / "early" / "a") == "ok"
    (tmp_path / "later").mkdir()
    assert touch(tmp_path / "later" / "a") == "denied"  # listed before it existed
    now[0] += BROAD_REFRESH_SECONDS
    assert touch(tmp_path / "later" / "a") == "ok"
    assert touch(workspace.root / ".httk-workflow" / "planted") == "denied"
    confiner.close()
    assert touch(tmp_path / "later" / "b") == "ok"  # closed, it lists again on the next attempt
