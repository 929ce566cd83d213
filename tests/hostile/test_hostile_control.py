"""Filesystem hostiles in the control directory: format.json, the state tree, the journal, requests,
the managers' records, and what collection walks.

One test per row of ``docs/hostile-input.md`` (``test_hostile_table.py`` keeps them in step); each plants
the hostile entry before a real manager (or command) runs and asserts the row's response.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, attach, probe_marker
from httk.workflow.engine.manager import _launch
from httk.workflow.engine.manager._state import REPORTED_ANOMALIES
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import WorkflowError

from tests.hostile.hostilekit import (
    MANAGER_DEADLINE,
    Scene,
    deep_tree,
    outside_copy,
    replace_with,
    run_manager,
    scene,
)
from tests.jobkinds import job_in, new_state
from tests.runners import job_key, scripted_job

SPECIAL = ["symlink", "fifo", "socket", "device", "directory", "sparse"]


def httk(found: Scene, *arguments: str) -> subprocess.CompletedProcess[str]:
    """One ``httk workflow`` command as its own process, bounded so that a hang fails the row."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "httk.workflow.cli", "workflow", *arguments],
            capture_output=True,
            text=True,
            timeout=MANAGER_DEADLINE,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"httk {' '.join(arguments)} hung: {exc}") from None


# -- format.json -------------------------------------------------------------------------------------
@pytest.mark.parametrize("hostile", SPECIAL)
def test_format_json(tmp_path: Path, hostile: str) -> None:
    found = scene(tmp_path, target=False)
    format_json = found.control / "format.json"
    replace_with(format_json, hostile, found)
    for command in (
        ["workspace", "status", str(found.root)],
        ["manager", "run", "--inline", str(found.root)],
    ):
        result = httk(found, *command)
        assert result.returncode == 3, (command, result.returncode, result.stderr)
        assert "format.json" in result.stderr and "Traceback" not in result.stderr, result.stderr
    [marker] = found.workspace.marker_dir("submitted", "good").iterdir()  # nothing moved
    assert marker.name.endswith(".g0.init")


def test_format_json_hard_link_to_outside(tmp_path: Path) -> None:
    """Read as it is; changed only by replacing it (a rename), never by writing through the link."""
    found = scene(tmp_path, target=False)
    replace_with(found.control / "format.json", "hardlink", found)
    copy = found.outside / "copy-format.json"
    before = copy.read_bytes()
    result = httk(found, "workspace", "settings", "set", str(found.root), "vasp.command", "vasp_std")
    assert result.returncode == 0, result.stderr
    assert copy.read_bytes() == before
    assert attach(found.root, writable=False).settings == {"vasp.command": "vasp_std"}
    run_manager(found)
    found.served()


# -- the state tree ----------------------------------------------------------------------------------
def _foreign_marker(found: Scene) -> Path:
    """A path in submitted/ named like a marker of a job nobody submitted."""
    directory = found.workspace.marker_dir("submitted", "p")
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{scripted_job({}, {})['id']}.p500.g0.init"


@pytest.mark.parametrize("hostile", ["symlink", "fifo", "socket", "device"])
def test_marker_entry(tmp_path: Path, hostile: str) -> None:
    found = scene(tmp_path, target=False)
    marker = _foreign_marker(found)
    marker.touch()
    replace_with(marker, hostile, found)
    run_manager(found, watch=[marker])
    found.served()
    assert "not a job marker" in found.log() and marker.name in found.log()


def test_marker_directory(tmp_path: Path) -> None:
    """A directory is a placement, whatever its name: walked, holding nothing."""
    found = scene(tmp_path, target=False)
    marker = _foreign_marker(found)
    marker.mkdir()
    run_manager(found, watch=[marker])
    found.served()


@pytest.mark.parametrize("hostile", ["hardlink", "sparse"])
def test_marker_contents(tmp_path: Path, hostile: str) -> None:
    """A marker's name is the state and its contents are never read or written: the job is served."""
    found = scene(tmp_path)
    marker = probe_marker(attach(found.root, writable=False), "p", job_key(found.target or {}))
    assert marker is not None
    path = marker.path(found.workspace)
    if hostile == "hardlink":
        os.unlink(path)
        os.link(outside_copy(found, "marker", b""), path)
    else:
        with path.open("wb") as stream:
            stream.truncate(10 << 30)
    run_manager(found)
    found.served()
    assert found.kind() is Kind.SUCCEEDED


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(b"bad\nname.p500.g0.init", id="newline"),
        pytest.param(b"\xff\xfe.p500.g0.init", id="not-utf8"),
        pytest.param(b"x" * 250, id="too-long"),
    ],
)
def test_marker_name(tmp_path: Path, name: bytes) -> None:
    found = scene(tmp_path, target=False)
    directory = found.workspace.marker_dir("submitted", "p")
    directory.mkdir(parents=True)
    entry = os.path.join(os.fsencode(directory), name)
    open(entry, "xb").close()
    run_manager(found, watch=[Path(os.fsdecode(entry))])
    found.served()
    assert "not a job marker" in found.log()


def test_placement_name_with_a_newline(tmp_path: Path) -> None:
    """A placement is any relative UTF-8 path: a job there is served like any other."""
    found = scene(tmp_path, target=False)
    job = scripted_job({"prepare": {"action": "succeed"}}, found.good["runner"])
    submit_jobs(attach(found.root), [JobSpec(job, "line\nbreak")])
    run_manager(found)
    found.served()
    marker = probe_marker(attach(found.root, writable=False), "line\nbreak", job_key(job))
    assert marker is not None and marker.kind is Kind.SUCCEEDED


def test_placement_name_not_utf8(tmp_path: Path) -> None:
    """No frame can name a placement holding an undecodable byte: submission refuses it, and such a
    directory planted in the state tree is reported, never entered."""
    found = scene(tmp_path, target=False)
    placement = os.fsdecode(b"not-utf8-\xff")
    job = scripted_job({"prepare": {"action": "succeed"}}, found.good["runner"])
    with pytest.raises(WorkflowError, match="not UTF-8"):
        submit_jobs(attach(found.root), [JobSpec(job, placement)])
    planted = found.workspace.marker_dir("submitted", placement)
    planted.mkdir(parents=True)
    (planted / f"{job_key(job)}.p500.g0.init").touch()
    run_manager(found, watch=[planted])
    found.served()
    assert "not a job marker" in found.log() and "unparseable_name" in found.log()


def test_state_deep_nesting(tmp_path: Path) -> None:
    """Placements 1,200 directories deep: walked without recursion, one listing open per level."""
    found = scene(tmp_path, target=False)
    deep = deep_tree(found.workspace.state_dir("submitted"), 1200)
    (deep / "junk").touch()
    run_manager(found, watch=[found.workspace.state_dir("submitted") / "d"])
    found.served()
    assert "not a job marker" in found.log()


def test_state_many_entries(tmp_path: Path) -> None:
    """100,000 entries that are not markers beside the good job's placement: the good job is still
    served (each root gets its share of every pass), none is touched, and the log names the first 100
    and then says there are more, once (fsck lists them all).

    On a memory filesystem where there is one: creating 100,000 files is the slow part on a busy disk.
    """
    memory = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=memory)) if memory.is_dir() and os.access(memory, os.W_OK) else tmp_path
    try:
        found = scene(base / "scene", target=False)
        crowded = found.workspace.marker_dir("submitted", "crowded")
        crowded.mkdir(parents=True)
        for index in range(100_000):
            os.close(os.open(crowded / f"junk-{index}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        run_manager(found)
        found.served()
        assert len(os.listdir(crowded)) == 100_000
        assert found.log().count("not a job marker, never scheduled") == REPORTED_ANOMALIES
        assert found.log().count(f"more than {REPORTED_ANOMALIES} entries") == 1
    finally:
        if base != tmp_path:
            subprocess.run(["rm", "-rf", "--", str(base)], check=False)


@pytest.mark.parametrize("hostile", ["symlink", "file"])
def test_state_kind_directory(tmp_path: Path, hostile: str) -> None:
    """state/submitted/ itself is a link (to the markers, moved outside) or a file: that kind is never
    streamed through it, the manager says so, and serves the jobs of the other kinds."""
    found = scene(tmp_path)
    state = new_state(found.root)
    good = probe_marker(state.workspace, "good", job_key(found.good))
    assert good is not None
    _launch.register(state, good)  # ready: served whatever submitted/ is
    state.workspace.close()
    kind_dir = found.workspace.state_dir("submitted")
    replace_with(kind_dir, hostile, found)
    run_manager(found, watch=[kind_dir])
    found.served()
    assert "not a job marker" in found.log() and "state/submitted" in found.log()


# -- the journal -------------------------------------------------------------------------------------
def _registered(found: Scene) -> Path:
    """Register the target (a ready frame in a segment of its own); return that segment."""
    state = new_state(found.root)
    marker = probe_marker(state.workspace, "p", job_key(found.target or {}))
    assert marker is not None
    _launch.register(state, marker)
    segment = state.workspace.journal().directory / "0.hwj"
    state.workspace.close()
    return segment


@pytest.mark.parametrize("hostile", ["symlink", "fifo", "device", "directory"])
def test_journal_segment(tmp_path: Path, hostile: str) -> None:
    found = scene(tmp_path)
    segment = _registered(found)
    replace_with(segment, hostile, found)
    run_manager(found, watch=[segment])
    found.served()
    assert found.kind() is Kind.READY
    assert "unreadable frame" in found.log() and "missing_segment" in found.log()


def test_journal_segment_sparse(tmp_path: Path) -> None:
    """A segment with 10 GB of nothing after its frames: the frames read as they are; the forward scan
    of ``fsck --repair`` stops at the first length no writer writes."""
    found = scene(tmp_path)
    segment = _registered(found)
    with segment.open("r+b") as stream:
        stream.truncate(10 << 30)
    run_manager(found)
    found.served()
    assert found.kind() is Kind.SUCCEEDED
    result = httk(found, "workspace", "fsck", str(found.root), "--repair")
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr


def test_journal_writer_directory_is_a_file(tmp_path: Path) -> None:
    found = scene(tmp_path)
    writer = _registered(found).parent
    replace_with(writer, "file", found)
    run_manager(found, watch=[writer])
    found.served()
    assert found.kind() is Kind.READY and "unreadable frame" in found.log()


# -- requests ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("hostile", ["symlink", "fifo", "socket", "device", "directory", "sparse"])
def test_request_file(tmp_path: Path, hostile: str) -> None:
    """A request entry that is no regular file is quarantined whole, never read through."""
    found = scene(tmp_path, target=False)
    entry = found.control / "requests" / "ready" / "3f2b0a1c-6c2e-4a2a-9a94-1b7c3e5f0d21.json"
    entry.write_bytes(b"{}")
    replace_with(entry, hostile, found)
    run_manager(found)
    found.served()
    assert not os.path.lexists(entry)
    [record] = found.control.glob("quarantine/request-*.quarantine")
    assert entry.name in record.read_text()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(b"line\nbreak.json", id="newline"),
        pytest.param(b"\xff\xfe.json", id="not-utf8"),
        pytest.param(b"no-suffix", id="no-suffix"),
    ],
)
def test_request_name(tmp_path: Path, name: bytes) -> None:
    found = scene(tmp_path, target=False)
    entry = os.path.join(os.fsencode(found.control / "requests" / "ready"), name)
    with open(entry, "xb") as stream:
        stream.write(b"{}")
    run_manager(found)
    found.served()
    assert not os.path.lexists(entry)
    assert list(found.control.glob("quarantine/request-*.quarantine"))


# -- the managers' records ---------------------------------------------------------------------------
def _owned_attempt(found: Scene, record: str, document: dict[str, str]) -> tuple[MarkerLocation, Path]:
    """A job running at placement ``q`` under a manager that is not running, and that manager's
    ``record`` (heartbeat.json, manager.json) holding ``document``."""
    state = new_state(found.root)
    running = job_in(state, Kind.RUNNING, job=scripted_job({}, found.good["runner"]), placement="q")
    owner = found.control / "managers" / str(state.manager_id)
    owner.mkdir(parents=True)
    path = owner / record
    path.write_text(json.dumps(document))
    return running, path


@pytest.mark.parametrize("hostile", SPECIAL)
def test_heartbeat(tmp_path: Path, hostile: str) -> None:
    """The owner of a running attempt has a hostile heartbeat: no evidence of its silence, so the
    attempt stays with it until its claim's own lease runs out; nothing blocks on reading it."""
    found = scene(tmp_path, target=False)
    running, heartbeat = _owned_attempt(found, "heartbeat.json", {"updated_at": "2000-01-01T00:00:00Z"})
    replace_with(heartbeat, hostile, found)
    run_manager(found, watch=[heartbeat])
    found.served()
    marker = probe_marker(attach(found.root, writable=False), "q", running.job_key)
    assert marker is not None and marker.kind is Kind.RUNNING


@pytest.mark.parametrize("hostile", SPECIAL)
def test_manager_manifest(tmp_path: Path, hostile: str) -> None:
    """A manager's manifest is evidence for diagnosis: ``job why`` and ``workspace managers`` answer."""
    found = scene(tmp_path, target=False)
    running, manifest = _owned_attempt(found, "manager.json", {})
    replace_with(manifest, hostile, found)
    for command in (
        ["job", "why", str(found.root), running.job_key],
        ["workspace", "managers", str(found.root)],
    ):
        result = httk(found, *command)
        assert result.returncode in (0, 1) and "Traceback" not in result.stderr, (command, result.stderr)


# -- what collection walks ---------------------------------------------------------------------------
def test_collection_of_a_deep_tree(tmp_path: Path) -> None:
    """A staging entry left in tmp/ a day ago, 1,200 directories deep: collected without recursion."""
    found = scene(tmp_path, target=False)
    stale = found.control / "tmp" / "stale-staging"
    stale.mkdir()
    deep_tree(stale, 1200)
    a_day_ago = time.time() - 2 * 86400
    os.utime(stale, (a_day_ago, a_day_ago))
    result = httk(found, "workspace", "gc", str(found.root))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert not os.path.lexists(stale), result.stdout


def test_deleting_a_job_with_a_deep_workdir(tmp_path: Path) -> None:
    """``job delete`` removes a payload whose workdir is 1,200 directories deep, without recursion."""
    found = scene(tmp_path, 'mkdir -p "$HTTK_WORKFLOW_WORKDIR/$(printf "d/%.0s" $(seq 1200))"')
    run_manager(found)
    found.served()
    assert found.kind() is Kind.SUCCEEDED
    result = httk(found, "job", "delete", str(found.root), job_key(found.target or {}))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert not os.path.lexists(found.payload) and found.kind() is None
