"""``workspace init --extension`` and ``workspace extension list|enable``, through the real executable."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.newkit import BIN, TRANSACTIONAL, httk, init
from tests.runners import wait_until


def document(root: Path) -> dict[str, object]:
    found: dict[str, object] = json.loads((root / ".httk-workflow" / "format.json").read_text())
    return found


def test_init_enables_every_extension_given_once_each(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    result = httk(
        "workflow", "workspace", "init", root, "--extension", TRANSACTIONAL, "--extension", TRANSACTIONAL
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"extensions {TRANSACTIONAL}"
    assert document(root)["extensions"] == [TRANSACTIONAL]


@pytest.mark.parametrize(
    ("extension", "why"),
    [
        ("relocation-v1", "it is reserved and not implemented by this version"),
        ("priority-bands-v1", "it is withdrawn and must never be enabled"),
        (
            "colour-v1",
            "it is unknown to this version, which implements detached-transfer-v1, transactional-data-v1",
        ),
    ],
)
def test_init_refuses_an_extension_this_version_does_not_implement(
    tmp_path: Path, extension: str, why: str
) -> None:
    root = tmp_path / "ws"
    result = httk("workflow", "workspace", "init", root, "--extension", extension)
    assert result.returncode == 3
    assert result.stderr == f"error: cannot enable extension {extension!r}: {why}\n"
    assert not root.exists()


def test_list_shows_what_is_enabled_and_what_is_implemented(tmp_path: Path) -> None:
    root = init(tmp_path / "ws", TRANSACTIONAL)
    result = httk("workflow", "workspace", "extension", "list", root)
    assert result.returncode == 0, result.stderr
    assert [line.split()[:3] for line in result.stdout.splitlines()[2:]] == [
        ["detached-transfer-v1", "no", "yes"],
        ["multiworkspace-v1", "no", "no"],
        ["relocation-v1", "no", "no"],
        [TRANSACTIONAL, "yes", "yes"],
    ]


def test_list_reads_a_workspace_this_version_may_not_change(tmp_path: Path) -> None:
    root = init(tmp_path / "ws")
    format_path = root / ".httk-workflow" / "format.json"
    changed = {**document(root), "extensions": ["colour-v1", TRANSACTIONAL]}
    format_path.write_text(json.dumps(changed))
    result = httk("workflow", "workspace", "extension", "list", root, "--json")
    assert result.returncode == 0, result.stderr
    listed = {view["name"]: view for view in json.loads(result.stdout)}
    assert listed["colour-v1"] == {
        "name": "colour-v1",
        "enabled": True,
        "implemented": False,
        "description": "unknown to this version",
    }
    assert listed[TRANSACTIONAL]["enabled"] and listed[TRANSACTIONAL]["implemented"]
    refused = httk("workflow", "workspace", "extension", "enable", root, "detached-transfer-v1")
    assert refused.returncode == 3 and "extension 'colour-v1' is unknown to this version" in refused.stderr
    assert json.loads(format_path.read_text()) == changed


def test_enable_adds_the_extension_and_keeps_every_other_member(tmp_path: Path) -> None:
    root = init(tmp_path / "ws")
    assert httk("workflow", "workspace", "settings", "set", root, "vasp.command", "vasp_std").returncode == 0
    before = document(root)

    result = httk("workflow", "workspace", "extension", "enable", "--workspace", root, TRANSACTIONAL)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"extension {TRANSACTIONAL} enabled\n" and result.stderr == ""
    assert document(root) == {**before, "extensions": [TRANSACTIONAL]}
    written = (root / ".httk-workflow" / "format.json").read_bytes()
    again = httk("workflow", "workspace", "extension", "enable", root, TRANSACTIONAL)
    assert again.returncode == 0
    assert again.stdout == "" and again.stderr == f"extension {TRANSACTIONAL} was already enabled\n"
    assert (root / ".httk-workflow" / "format.json").read_bytes() == written


@pytest.mark.parametrize(
    "extension",
    ["relocation-v1", "multiworkspace-v1", "priority-bands-v1", "Bad Name"],
)
def test_enable_refuses_what_this_version_does_not_implement(tmp_path: Path, extension: str) -> None:
    root = init(tmp_path / "ws")
    before = (root / ".httk-workflow" / "format.json").read_bytes()
    result = httk("workflow", "workspace", "extension", "enable", root, extension)
    assert result.returncode == 3
    assert result.stderr.startswith(f"error: {root}: cannot enable extension {extension!r}: it is ")
    assert (root / ".httk-workflow" / "format.json").read_bytes() == before


def test_enable_is_refused_while_a_manager_is_live(tmp_path: Path) -> None:
    root = init(tmp_path / "ws")
    manager = subprocess.Popen(
        [str(BIN / "httk"), "workflow", "run", str(root), "--idle"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        [manager_id] = wait_until(lambda: _live_managers(root), "the manager's first heartbeat")
        before = (root / ".httk-workflow" / "format.json").read_bytes()

        refused = httk("workflow", "workspace", "extension", "enable", root, TRANSACTIONAL)

        assert refused.returncode == 3
        [line] = refused.stderr.splitlines()
        assert line == (
            f"error: {root}: cannot enable extension {TRANSACTIONAL!r} while manager {manager_id} is live: a "
            "manager reads format.json only when it attaches; stop them first (httk workflow manager stop "
            f"{root} --all), then enable it"
        )
        assert (root / ".httk-workflow" / "format.json").read_bytes() == before
        assert httk("workflow", "manager", "stop", root, "--all").returncode == 0
        assert manager.wait(timeout=60) == 0
    finally:
        if manager.poll() is None:
            manager.kill()
            manager.wait()
    enabled = httk("workflow", "workspace", "extension", "enable", root, TRANSACTIONAL)
    assert enabled.returncode == 0, enabled.stderr
    assert document(root)["extensions"] == [TRANSACTIONAL]


def _live_managers(root: Path) -> list[str]:
    shown = httk("workflow", "workspace", "managers", root, "--json")
    return [view["manager_id"] for view in json.loads(shown.stdout) if view["state"] == "live"]
