"""Filesystem hostiles in a job's payload: job.json, the runner, the workdir, data/, what a runner publishes.

One test per row of ``docs/hostile-input.md`` (``test_hostile_table.py`` keeps them in step). Each plants
the hostile entry — before the manager starts, or from the target job's own runner — runs a real manager,
and asserts the row's response: the good job served, the target where the row says with an error naming
the path, and nothing outside the workspace or under the hostile name changed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from httk.workflow.engine.core._states import Kind

from tests.hostile.hostilekit import replace_with, run_manager, scene

SPECIAL = ["symlink", "fifo", "socket", "device", "directory", "sparse"]


# -- job.json and the payload directory ----------------------------------------------------------------
@pytest.mark.parametrize("hostile", SPECIAL)
def test_job_json(tmp_path: Path, hostile: str) -> None:
    found = scene(tmp_path)
    job_json = found.payload / "job.json"
    replace_with(job_json, hostile, found)
    run_manager(found, watch=[job_json])
    found.served()
    assert "job.json" in found.failure() and found.frame()["failure"]["code"] == "protocol_error"


def test_job_json_hard_link_to_outside(tmp_path: Path) -> None:
    """A hard link is a regular file: its bytes are the job's, and nothing is ever written through it."""
    found = scene(tmp_path)
    replace_with(found.payload / "job.json", "hardlink", found)
    run_manager(found)
    found.served()
    assert found.kind() is Kind.SUCCEEDED


@pytest.mark.parametrize("hostile", ["symlink", "file"])
def test_payload_directory(tmp_path: Path, hostile: str) -> None:
    found = scene(tmp_path)
    replace_with(found.payload, hostile, found)
    run_manager(found)
    found.served()
    assert "payload" in found.failure()


# -- the runner ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hostile", ["symlink", "fifo", "device", "directory"])
def test_stored_runner(tmp_path: Path, hostile: str) -> None:
    found = scene(tmp_path)
    stored = found.control / "runners" / "hostile"
    replace_with(stored, hostile, found)
    run_manager(found, watch=[found.control / "runners"])
    found.served()
    failure = found.frame()["failure"]
    # A directory is a tree runner whose digest is not the file's; anything else cannot be staged.
    assert failure["code"] == ("runner_mismatch" if hostile == "directory" else "runner_unavailable")
    assert "hostile" in failure["message"], failure


# -- the workdir ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("hostile", ["symlink", "file"])
def test_persistent_workdir(tmp_path: Path, hostile: str) -> None:
    found = scene(tmp_path)
    workdir = found.payload / "run"
    workdir.mkdir()
    replace_with(workdir, hostile, found)
    run_manager(found)
    found.served()
    what = "a symbolic link" if hostile == "symlink" else "not a directory"
    assert "the persistent workdir 'run' cannot be used" in found.failure() and what in found.failure()


# -- what a runner publishes -----------------------------------------------------------------------------
@pytest.mark.parametrize("hostile", ["symlink", "file"])
def test_outcome_ready(tmp_path: Path, hostile: str) -> None:
    plant = {
        "symlink": 'mkdir "$OUT/o" && publish \'"action":"succeed"\' && mv "$CTL/outcome.ready" "$OUT/o/r" '
        '&& ln -s "$OUT/o/r" "$CTL/outcome.ready"',
        "file": 'echo not-a-directory >"$CTL/outcome.ready"',
    }[hostile]
    found = scene(tmp_path, plant)
    run_manager(found)
    found.served()
    assert "outcome.ready" in found.failure() and found.frame()["failure"]["code"] == "protocol_error"


OUTCOME_PLANTS = {
    "symlink": 'ln -s "$OUT/secret" "$CTL/outcome.ready/outcome.json"',
    "fifo": 'mkfifo "$CTL/outcome.ready/outcome.json"',
    "device": 'mknod "$CTL/outcome.ready/outcome.json" c 1 5',
    "directory": 'mkdir "$CTL/outcome.ready/outcome.json"',
    "sparse": 'truncate -s 10G "$CTL/outcome.ready/outcome.json"',
}


@pytest.mark.parametrize("hostile", sorted(OUTCOME_PLANTS))
def test_outcome_json(tmp_path: Path, hostile: str) -> None:
    found = scene(tmp_path, f'mkdir "$CTL/outcome.ready" && {OUTCOME_PLANTS[hostile]}')
    run_manager(found)
    found.served()
    assert "outcome.json" in found.failure() and found.frame()["failure"]["code"] == "protocol_error"


STREAM_PLANTS = {
    "symlink": 'ln -s "$OUT/secret" "$CTL/{stream}"',
    "fifo": 'mkfifo "$CTL/{stream}"',
    "device": 'mknod "$CTL/{stream}" c 1 5',
    "directory": 'mkdir "$CTL/{stream}"',
    "sparse": 'truncate -s 10G "$CTL/{stream}"',
    "hardlink": 'ln "$OUT/secret" "$CTL/{stream}"',
}


@pytest.mark.parametrize("hostile", sorted(STREAM_PLANTS))
@pytest.mark.parametrize("stream", ["stdout.log", "stderr.log"])
def test_captured_output(tmp_path: Path, stream: str, hostile: str) -> None:
    """The manager copies what an attempt printed into logs/stdio.log: never through a link, never from
    a special file, never gigabytes of nothing; the output it cannot keep stays where the runner left it."""
    plant = f'rm "$CTL/{stream}" && {STREAM_PLANTS[hostile].format(stream=stream)}'
    found = scene(tmp_path, plant)
    run_manager(found)
    found.served()
    assert found.kind() is Kind.SUCCEEDED
    kept = found.payload / "logs" / "stdio.log"
    assert b"what a link must never reach" not in (kept.read_bytes() if kept.exists() else b"")
    assert (kept.stat().st_size if kept.exists() else 0) < 1 << 20
    assert f"{stream} is" in found.log(), found.log()[-2000:]


def test_control_directory_deep_tree(tmp_path: Path) -> None:
    """A runner leaves 1,200 nested directories in its control directory: the attempt is retired
    (output kept, directory removed) without recursion."""
    found = scene(tmp_path, 'echo printed; mkdir -p "$CTL/$(printf "d/%.0s" $(seq 1200))"')
    run_manager(found)
    found.served()
    assert found.kind() is Kind.SUCCEEDED
    assert not list(found.payload.glob(".httk-attempt.*"))
    assert "printed" in (found.payload / "logs" / "stdio.log").read_text()


JOB_LOG_PLANTS = {
    "logs-symlink": 'ln -s "$OUT" "$JOB/logs"',
    "logs-file": 'echo x >"$JOB/logs"',
    "stdio-symlink": 'mkdir "$JOB/logs" && ln -s "$OUT/secret" "$JOB/logs/stdio.log"',
    "stdio-fifo": 'mkdir "$JOB/logs" && mkfifo "$JOB/logs/stdio.log"',
    "stdio-hardlink": 'mkdir "$JOB/logs" && ln "$OUT/secret" "$JOB/logs/stdio.log"',
    "stdio-directory": 'mkdir -p "$JOB/logs/stdio.log"',
    "stdio-device": 'mkdir "$JOB/logs" && mknod "$JOB/logs/stdio.log" c 1 3',
}


@pytest.mark.parametrize("hostile", sorted(JOB_LOG_PLANTS))
def test_job_log(tmp_path: Path, hostile: str) -> None:
    """logs/stdio.log is the one payload file the manager appends to: never through a link, a hard link
    or a special file. The output then stays in the attempt's control directory."""
    found = scene(tmp_path, f"echo printed-by-the-runner; {JOB_LOG_PLANTS[hostile]}")
    run_manager(found)
    found.served()
    assert found.kind() is Kind.SUCCEEDED
    kept = list(found.payload.glob(".httk-attempt.*/stdout.log"))
    assert [path.read_text() for path in kept] == ["printed-by-the-runner\n"], kept
    assert "output not kept" in found.log()


# -- children and transactions -------------------------------------------------------------------------
SPAWN = (
    'source "$HTTK_WORKFLOW_BASH_API" && httk_workflow_spawn kid child && httk_workflow_wait collect && '
    'children="$CTL/outcome.ready/children" && bundle=$(echo "$children"/jobs/*) && '
)
BUNDLE_PLANTS = {
    "children-symlink": 'mv "$children" "$OUT/c" && ln -s "$OUT/c" "$children"',
    "spawn-fifo": 'rm "$children/spawn.json" && mkfifo "$children/spawn.json"',
    "bundle-symlink": 'mv "$bundle" "$OUT/b" && ln -s "$OUT/b" "$bundle"',
    "bundle-job-symlink": 'mv "$bundle/job.json" "$OUT/j" && ln -s "$OUT/j" "$bundle/job.json"',
    "bundle-fifo": 'mkfifo "$bundle/fifo"',
    "bundle-device": 'mknod "$bundle/zero" c 1 5',
}


@pytest.mark.parametrize("hostile", sorted(BUNDLE_PLANTS))
def test_child_bundle(tmp_path: Path, hostile: str) -> None:
    found = scene(tmp_path, SPAWN + BUNDLE_PLANTS[hostile])
    run_manager(found)
    found.served()
    assert "child" in found.failure() and found.frame()["failure"]["code"] == "protocol_error"
    assert not list(found.root.glob("p/*.children/*/*")), "no child of a refused set is registered"


ACCEPTED_BUNDLE_PLANTS = {
    "bundle-hardlink": 'ln "$OUT/secret" "$bundle/secret"',
    "bundle-deep": 'mkdir -p "$bundle/$(printf "d/%.0s" $(seq 1200))"',
}


@pytest.mark.parametrize("hostile", sorted(ACCEPTED_BUNDLE_PLANTS))
def test_child_bundle_accepted(tmp_path: Path, hostile: str) -> None:
    """A hard link is a regular file and a deep tree only a tree: the child is registered and runs, and
    walking its bundle needs no recursion."""
    found = scene(tmp_path, SPAWN + ACCEPTED_BUNDLE_PLANTS[hostile])
    run_manager(found)
    found.served()
    assert found.kind() is Kind.SUCCEEDED, found.frame().get("failure")
    [child] = found.root.glob("p/*.children/*/kid--*")
    assert (child / ("secret" if hostile == "bundle-hardlink" else "d")).exists()


TRANSACTION = (
    'source "$HTTK_WORKFLOW_BASH_API" && httk_workflow_transaction_begin && '
    "httk_workflow_make_dir results && "
    'httk_workflow_put_file results/energy.json --content "-5.4" && httk_workflow_advance collect && '
    'payload="$CTL/outcome.ready/transaction/payload" && energy="$payload/results/energy.json" && '
)
TRANSACTION_PLANTS = {
    "payload-symlink": 'rm "$energy" && ln -s "$OUT/secret" "$energy"',
    "payload-fifo": 'rm "$energy" && mkfifo "$energy"',
    "payload-device": 'rm "$energy" && mknod "$energy" c 1 5',
    "payload-hardlink": 'rm "$energy" && ln "$OUT/secret" "$energy"',
    "manifest-fifo": 'rm "$CTL/outcome.ready/transaction/manifest.json" && '
    'mkfifo "$CTL/outcome.ready/transaction/manifest.json"',
    "manifest-sparse": 'truncate -s 10G "$CTL/outcome.ready/transaction/manifest.json"',
    "data-symlink": 'mkdir "$OUT/data" && ln -s "$OUT/data" "$JOB/data"',
}


TRANSACTION_REFUSALS = {
    "payload-symlink": "is a symbolic link; a staged payload holds only files and directories",
    "payload-fifo": "is a device, socket or FIFO",
    "payload-device": "is a device, socket or FIFO",
    "payload-hardlink": "has 2 hard links; a staged file must be a private copy",
    "manifest-fifo": "is a FIFO, not a regular file",
    "manifest-sparse": "is 10737418240 bytes, over the limit",
    "data-symlink": "data/ must be a directory",
}


@pytest.mark.parametrize("hostile", sorted(TRANSACTION_PLANTS))
def test_transaction(tmp_path: Path, hostile: str) -> None:
    found = scene(
        tmp_path,
        TRANSACTION + TRANSACTION_PLANTS[hostile],
        extensions=("transactional-data-v1",),
        data={"mode": "transactional"},
    )
    run_manager(found)
    found.served()
    failure = found.frame()["failure"]
    assert failure["code"] == "protocol_error" and TRANSACTION_REFUSALS[hostile] in failure["message"], (
        failure
    )
    assert not os.path.lexists(found.payload / "data" / "results"), "data/ is untouched"


def test_transaction_deep_payload(tmp_path: Path) -> None:
    """A staged payload holding, beside what the operations name, 1,200 nested directories: walked
    without recursion; what no operation names is not committed."""
    found = scene(
        tmp_path,
        TRANSACTION + 'mkdir -p "$payload/$(printf "d/%.0s" $(seq 1200))"',
        extensions=("transactional-data-v1",),
        data={"mode": "transactional"},
    )
    run_manager(found)
    found.served()
    assert found.kind() is Kind.SUCCEEDED, found.frame().get("failure")
    assert (found.payload / "data" / "results" / "energy.json").read_text() == "-5.4"
    assert not os.path.lexists(found.payload / "data" / "d")
