"""The scene of a filesystem-hostile case: a workspace, a good job, a target job, a directory outside.

Every row of ``docs/hostile-input.md`` plays in a :class:`Scene`: a fresh non-durable workspace holding a
*good* job (placement ``good``, the scripted runner, one ``succeed``) and, usually, a *target* job
(placement ``p``) whose runner first performs a Bash snippet — the hostile act of a runner — and then
publishes ``succeed`` unless the snippet published something itself. Beside the workspace lies
``outside/`` with a file ``secret``: what a link planted in the workspace points at, and what must never
change.

:func:`run_manager` runs one real manager process (two workers) until it is idle, bounded by a deadline
so that a hang fails the row instead of the suite; it must exit 0 without a traceback and without the
"stopped by an unexpected error" line. The row then asserts where the jobs ended, what the manager
logged, and that nothing it was not entitled to touch changed (:func:`~tests.hostile.fuzzkit.unchanged`).

The snippet sees ``OUT`` (the outside directory), ``CTL`` (the attempt's control directory), ``JOB``
(the payload) and the manager's ``HTTK_WORKFLOW_*`` variables; ``publish JSON-MEMBERS`` writes an
outcome the way the specification says (a draft directory renamed onto ``outcome.ready``), and setting
``EXIT_STATUS`` ends the attempt with that status instead (after the test has looked).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import Workspace, attach, init, probe_marker
from httk.workflow.engine.publish._runners import publish_runner
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.crash._scenarios import manager_code, manager_environment
from tests.hostile.fuzzkit import changes, snapshot
from tests.runners import job_key, publish_scripted_runner, scripted_job, wait_until

MANAGER_DEADLINE = 90.0
"""Seconds a manager may take on a row before the row fails as a hang (generous: the machine is shared)."""

HOSTILE_RUNNER = r"""#!/bin/bash
# Arguments: OUTSIDE SNIPPET SCENE. In step prepare, once per scene, performs SNIPPET in the workdir,
# says so (SCENE/planted) and waits until the test has looked (SCENE/go); then publishes succeed unless
# SNIPPET published something itself.
OUT=$1
SCENE=$3
CTL=$HTTK_WORKFLOW_CONTROL_DIR
JOB=$HTTK_WORKFLOW_JOB_DIR
attempt=${CTL##*/.httk-attempt.}
activation=
job=
while IFS= read -r line; do
  case $line in
    '  "activation_id": "'*) activation=${line#*'"activation_id": "'}; activation=${activation%%'"'*} ;;
    '  "job_id": "'*) job=${line#*'"job_id": "'}; job=${job%%'"'*} ;;
  esac
done < "$HTTK_WORKFLOW_CONTEXT"
publish() {
  local draft=$CTL/outcome.tmp.$$
  mkdir "$draft" &&
    printf '{"format":"httk-workflow-outcome","format_version":1,"job_id":"%s","activation_id":"%s",%s}\n' \
      "$job" "$activation" "\"attempt_id\":\"$attempt\",$1" >"$draft/outcome.json" &&
    mv -T "$draft" "$CTL/outcome.ready"
}
export OUT CTL JOB
if [[ $HTTK_WORKFLOW_STEP == prepare && ! -e $SCENE/planted ]]; then
  eval "$2"
  : >"$SCENE/planted"
  for ((i = 0; i < 6000; i++)); do
    [[ -e $SCENE/go ]] && break
    sleep 0.01
  done
  [[ -z ${EXIT_STATUS-} ]] || exit "$EXIT_STATUS"  # set by SNIPPET: end this attempt without an outcome
fi
if [[ ! -e $CTL/outcome.ready && ! -L $CTL/outcome.ready ]]; then
  publish '"action":"succeed"'
fi
"""


@dataclass
class Scene:
    """One row's workspace, its jobs and the directory outside it."""

    base: Path
    workspace: Workspace
    good: dict[str, Any]
    target: dict[str, Any] | None = None
    snippet: str | None = None  # the target's runner plants it, then waits for the test to look
    runs: list[subprocess.CompletedProcess[str]] = field(default_factory=list)

    @property
    def root(self) -> Path:
        return self.workspace.root

    @property
    def outside(self) -> Path:
        return self.base / "outside"

    @property
    def control(self) -> Path:
        return self.root / ".httk-workflow"

    @property
    def payload(self) -> Path:
        assert self.target is not None
        return self.workspace.payload_path("p", job_key(self.target))

    def kind(self, job: dict[str, Any] | None = None) -> Kind | None:
        """Where ``job`` (default the target) is now, as a fresh reader finds it."""
        job = job if job is not None else self.target
        assert job is not None
        placement = "good" if job is self.good else "p"
        marker = probe_marker(attach(self.root, writable=False), placement, job_key(job))
        return None if marker is None else marker.kind

    def frame(self, job: dict[str, Any] | None = None) -> dict[str, Any]:
        """The state frame the job's marker names now."""
        job = job if job is not None else self.target
        assert job is not None
        reader = attach(self.root, writable=False)
        marker = probe_marker(reader, "good" if job is self.good else "p", job_key(job))
        assert marker is not None and marker.name.ref is not None, marker
        return reader.reader.read(marker.name.ref)

    def failure(self) -> str:
        """The target's failure message (it must have failed)."""
        assert self.kind() is Kind.FAILED, self.kind()
        return str(self.frame()["failure"]["message"])

    def log(self) -> str:
        """Everything the managers logged (their warnings reach standard error)."""
        logs = sorted(self.control.glob("managers/*/log"))
        return "".join(path.read_text(errors="replace") for path in logs) + "".join(
            r.stderr for r in self.runs
        )

    def served(self) -> None:
        """The manager served the good job to its end."""
        assert self.kind(self.good) is Kind.SUCCEEDED, (self.kind(self.good), self.log()[-2000:])


def scene(
    base: Path,
    snippet: str | None = None,
    *,
    target: bool = True,
    extensions: tuple[str, ...] = (),
    **job: Any,
) -> Scene:
    """A workspace at ``base/ws`` with the good job and (``target``) a target job performing ``snippet``."""
    outside = base / "outside"
    outside.mkdir(parents=True)
    (outside / "secret").write_text("what a link must never reach\n")
    workspace = init(base / "ws", durable=False, extensions=extensions)
    good = scripted_job({"prepare": {"action": "succeed"}}, publish_scripted_runner(workspace, base))
    specs = [JobSpec(good, "good")]
    found = Scene(base, workspace, good, snippet=snippet)
    if target:
        runner_source = base / "hostile-runner"
        runner_source.write_text(HOSTILE_RUNNER)
        stored = publish_runner(workspace, "hostile", runner_source)
        arguments = [str(outside), snippet or ":", str(base)]
        reference = {"backend": "path", **stored.reference(), "arguments": arguments}
        found.target = scripted_job({}, reference, **job)
        specs.append(JobSpec(found.target, "p"))
    submit_jobs(workspace, specs)
    workspace.close()
    return found


def run_manager(
    found: Scene, *, watch: Sequence[Path] = (), expect_exit: int = 0
) -> subprocess.CompletedProcess[str]:
    """One manager process with two workers until idle; a hang, a traceback or another exit fails.

    ``outside/`` and every path in ``watch`` must be the same afterwards as when the hostile entry was in
    place: before the manager starts, or — when the target's runner plants it — at the moment the runner
    says it has planted (it waits for the test to have looked before it goes on).
    """
    process = subprocess.Popen(
        # Unconfined: these rows test the manager's own defences, which must hold where the kernel has no
        # Landlock; a confined runner could not plant several of them (a hard link to outside/) nor say
        # so in the scene directory outside its payload.
        [sys.executable, "-c", manager_code(found.root, workers=2, confine=False)],
        env=manager_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if found.snippet is not None:
            planted = found.base / "planted"
            wait_until(
                lambda: planted.exists() or process.poll() is not None,
                "the runner to plant",
                timeout=MANAGER_DEADLINE,
            )
            assert planted.exists(), f"the target never ran: {process.communicate()}"
        before = [snapshot(path) for path in (found.outside, *watch)]
        (found.base / "go").touch()
        out, err = process.communicate(timeout=MANAGER_DEADLINE)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"the manager hung for {MANAGER_DEADLINE} s: {process.communicate()}") from None
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    result = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    found.runs.append(result)
    assert result.returncode == expect_exit, (result.returncode, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    assert "stopped by an unexpected error" not in found.log()
    for path, old in zip((found.outside, *watch), before, strict=True):
        diff = changes(old, snapshot(path))
        assert not diff, f"{path} changed:\n" + "\n".join(diff[:20])
    return result


def summary(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The manager's last stdout line, its run summary."""
    loaded: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


def outside_copy(found: Scene, name: str, data: bytes) -> Path:
    """A file outside the workspace holding ``data`` (what a planted link or hard link reaches)."""
    path = found.outside / name
    path.write_bytes(data)
    return path


def replace_with(path: Path, hostile: str, found: Scene) -> None:
    """Replace the file or directory at ``path`` with a hostile entry of the same name.

    ``symlink`` points at a copy outside holding the same bytes (what following it would read; for a
    directory, the directory itself, moved outside),
    ``hardlink`` is a link to that copy, ``fifo``/``socket``/``device`` (``/dev/zero``'s numbers) are
    special files, ``directory`` an empty directory, ``file`` a regular file where a directory was,
    ``sparse`` a 10 GB file with no blocks.
    """
    data = path.read_bytes() if path.is_file() and not path.is_symlink() else b"{}"
    moved = None
    if path.is_dir() and not path.is_symlink():
        moved = found.outside / f"moved-{path.name}"
        os.rename(path, moved)
    elif os.path.lexists(path):
        os.unlink(path)
    if hostile == "symlink" and moved is not None:
        os.symlink(moved, path)  # what following it would reach: the directory as it was
    elif hostile in ("symlink", "hardlink"):
        copy = outside_copy(found, f"copy-{path.name}", data)
        (os.symlink if hostile == "symlink" else os.link)(copy, path)
    elif hostile == "fifo":
        os.mkfifo(path)
    elif hostile == "socket":
        make_socket(path)
    elif hostile == "device":
        os.mknod(path, 0o600 | 0o020000, os.makedev(1, 5))
    elif hostile == "directory":
        path.mkdir()
    elif hostile == "file":
        path.write_bytes(data)
    elif hostile == "sparse":
        with path.open("wb") as stream:
            stream.truncate(10 << 30)
    else:
        raise ValueError(hostile)


def make_socket(path: Path) -> None:
    """A listening-less Unix socket at ``path`` (bound from its directory: socket paths are short)."""
    import socket

    here = os.getcwd()
    os.chdir(path.parent)
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path.name)
        sock.close()
    finally:
        os.chdir(here)


def deep_tree(base: Path, depth: int) -> Path:
    """``depth`` nested directories ``d`` below ``base`` (which must exist); the deepest one.

    Made one level at a time: pathlib's and ``os.makedirs``'s recursion stop near 1,000 levels.
    """
    path = base
    for _ in range(depth):
        path = path / "d"
        os.mkdir(path)
    return path
