from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from httk.workflow.engine.core import _workspace
from httk.workflow.engine.core._workspace import attach, init, is_marker_name, marker_stem
from httk.workflow.protocol import (
    InvalidNameError,
    JobKey,
    MarkerName,
    RecordRef,
    WorkspaceError,
    WorkspaceFormatError,
)


def _rewrite_format(root: Path, **changes: object) -> None:
    path = root / ".httk-workflow" / "format.json"
    document = json.loads(path.read_text())
    document.update(changes)
    path.write_text(json.dumps(document))


def test_init_writes_a_complete_format_document(workspace_path: Path) -> None:
    ws = init(workspace_path, name="demo")
    document = json.loads((workspace_path / ".httk-workflow" / "format.json").read_text())
    assert document["format"] == "httk-workflow-filesystem"
    assert document["format_version"] == 1
    assert document["core_profile"] == "core-v2"
    assert document["record_ref_encoding"] == "hwref-v1"
    assert str(uuid.UUID(document["workspace_id"])) == document["workspace_id"] == ws.workspace_id
    assert document["policy"] == {
        "visibility_deadline_seconds": 5.0,
        "lease_seconds": 900.0,
        "journal_segment_bytes": 67108864,
        "retention": {},
    }
    assert document["name"] == "demo"
    assert document["durable"] is True and ws.durable
    for sub in ("tmp", "state", "journal", "requests/ready", "quarantine"):
        assert (workspace_path / ".httk-workflow" / sub).is_dir()
    assert not list(workspace_path.glob(".httk-workflow.init.*"))


def test_no_durable_is_recorded_and_followed(workspace_path: Path) -> None:
    init(workspace_path, durable=False)
    assert attach(workspace_path).durable is False
    assert attach(workspace_path, durable=True).durable is True


def test_two_workspaces_get_different_ids(tmp_path: Path) -> None:
    assert init(tmp_path / "a").workspace_id != init(tmp_path / "b").workspace_id


def test_init_refuses_an_existing_workspace(workspace_path: Path) -> None:
    init(workspace_path)
    with pytest.raises(WorkspaceError, match="already a workspace"):
        init(workspace_path)


def test_init_checks_the_filename_limit(workspace_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_workspace, "MAX_MARKER_BYTES", 300)  # beyond every common filesystem's 255
    with pytest.raises(WorkspaceError, match="300-byte file names"):
        init(workspace_path)
    assert not (workspace_path / ".httk-workflow").exists()


def test_attach_refuses_a_directory_that_is_no_workspace(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceFormatError, match="not a workspace"):
        attach(tmp_path)


def test_attach_refuses_an_unknown_policy_member(workspace_path: Path) -> None:
    init(workspace_path)
    _rewrite_format(workspace_path, policy={"lease_seconds": 60, "shard_depth": 2})
    with pytest.raises(WorkspaceFormatError, match="unknown policy member 'shard_depth'"):
        attach(workspace_path, writable=False)


def test_attach_reads_an_absent_policy_as_defaults(workspace_path: Path) -> None:
    init(workspace_path)
    path = workspace_path / ".httk-workflow" / "format.json"
    document = json.loads(path.read_text())
    del document["policy"]
    path.write_text(json.dumps(document))
    assert attach(workspace_path).policy.lease_seconds == 900.0


def test_priority_bands_are_refused_even_read_only(workspace_path: Path) -> None:
    init(workspace_path)
    _rewrite_format(workspace_path, extensions=["priority-bands-v1"])
    for writable in (True, False):
        with pytest.raises(WorkspaceFormatError, match="re-initialized"):
            attach(workspace_path, writable=writable)


@pytest.mark.parametrize(
    ("extension", "why"),
    [
        ("relocation-v1", "reserved and not implemented"),
        ("multiworkspace-v1", "reserved and not implemented"),
        ("future-thing-v9", "unknown to this version"),
    ],
)
def test_unsupported_extensions_attach_read_only(workspace_path: Path, extension: str, why: str) -> None:
    init(workspace_path)
    _rewrite_format(workspace_path, extensions=["transactional-data-v1", extension])
    with pytest.raises(WorkspaceFormatError, match=f"extension '{extension}' is {why}"):
        attach(workspace_path)
    ws = attach(workspace_path, writable=False)
    assert not ws.writable
    with pytest.raises(WorkspaceError, match="read-only"):
        ws.journal()


def test_only_implemented_extensions_are_listed_as_supported(workspace_path: Path) -> None:
    assert frozenset({"transactional-data-v1", "detached-transfer-v1"}) == _workspace.SUPPORTED_EXTENSIONS
    with pytest.raises(WorkspaceError, match="cannot enable extension 'relocation-v1'"):
        init(workspace_path, extensions=("relocation-v1",))
    assert not workspace_path.joinpath(".httk-workflow").exists()
    both = ("transactional-data-v1", "detached-transfer-v1")
    assert attach(init(workspace_path, extensions=both).root).writable


def test_core_v1_is_readable_not_mutable(workspace_path: Path) -> None:
    init(workspace_path)
    _rewrite_format(workspace_path, core_profile="core-v1")
    assert not attach(workspace_path, writable=False).writable
    with pytest.raises(WorkspaceFormatError, match="core-v1"):
        attach(workspace_path)


def test_update_preserves_unknown_top_level_members(workspace_path: Path) -> None:
    init(workspace_path)
    _rewrite_format(workspace_path, site_note={"owner": "rar"})
    ws = attach(workspace_path)
    ws.update_document({"settings": {"vasp.command": "srun vasp_std"}})
    document = json.loads(ws.format_path.read_text())
    assert document["site_note"] == {"owner": "rar"}
    assert document["settings"] == {"vasp.command": "srun vasp_std"}
    assert not [p for p in ws.format_path.parent.iterdir() if p.name.startswith(".format.json.tmp")]


def test_update_refuses_an_invalid_policy_and_changes_nothing(workspace_path: Path) -> None:
    ws = init(workspace_path)
    before = ws.format_path.read_bytes()
    with pytest.raises(WorkspaceFormatError, match="lease_seconds"):
        ws.update_document({"policy": {"lease_seconds": 0.5}})
    assert ws.format_path.read_bytes() == before


# -- the fast marker check ---------------------------------------------------------------------------
def _uuid(number: int) -> str:
    return str(uuid.UUID(int=number * 0x1234567890ABCDEF))  # fixed: xdist workers must collect alike


def _names() -> list[str]:
    ref = RecordRef(_uuid(1), 0, 12, 300, "0" * 32)
    big = RecordRef(_uuid(2), 2**32 - 1, 2**64 - 1, 2**64 - 1, "a" * 32)
    key = JobKey(_uuid(3), "tag")
    valid = [
        str(MarkerName.initial(key, 500)),
        str(MarkerName(key, 7, 1, ref)),
        str(MarkerName(JobKey(_uuid(4)), 999, 35**5, big)),
        str(MarkerName(JobKey(_uuid(5), "a-"), 0, 2**64 - 1, ref)),
        str(MarkerName(JobKey(_uuid(6), "x.p500.g1"), 0, 3, ref)),
    ]
    stem = str(key)
    invalid = [
        f"{stem}.p500.g1.init",
        f"{stem}.p500.g0.{ref}",
        f"{stem}.p50.g0.init",
        f"{stem}.p500.g01.{ref}",
        f"{stem}.p500.gzzzzzzzzzzzzz.{ref}",
        f"bad--tag--{key.job_id}.p500.g0.init",
        f"-x--{key.job_id}.p500.g0.init",
        f"{key.job_id.upper()}.p500.g0.init",
        f"{stem}.p500.g0.init.extra",
        "x" * 300,
        f"{'t' * 49}--{key.job_id}.p500.g0.init",
    ]
    return valid + invalid


@pytest.mark.parametrize("name", _names(), ids=range(len(_names())))
def test_fast_marker_check_agrees_with_the_parser(name: str) -> None:
    try:
        MarkerName.parse(name)
        expected = True
    except InvalidNameError:
        expected = False
    assert is_marker_name(name) is expected


def test_the_stem_is_the_job_key_even_when_a_tag_holds_dots() -> None:
    key = f"x.p500.g1--{uuid.uuid4()}"
    assert marker_stem(f"{key}.p500.g0.init") == key
