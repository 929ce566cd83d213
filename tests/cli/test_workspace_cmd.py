from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke, format_document

KEEP_ALL = {"attempt_control_days": None, "journal_days": None, "trash_days": None}
DEFAULT_POLICY = {
    "visibility_deadline_seconds": 5.0,
    "lease_seconds": 900.0,
    "journal_segment_bytes": 67108864,
    "retention": KEEP_ALL,
}
KNOWN_KEYS = "visibility_deadline_seconds, lease_seconds, journal_segment_bytes, retention"


def policy(invoke: Invoke, root: Path) -> dict[str, object]:
    result = invoke("workspace", "policy", "show", root, "--json")
    assert result.exit_code == 0, result.output
    shown: dict[str, object] = json.loads(result.stdout)
    return shown


def settings(invoke: Invoke, root: Path) -> dict[str, object]:
    result = invoke("workspace", "settings", "show", root, "--json")
    assert result.exit_code == 0, result.output
    shown: dict[str, object] = json.loads(result.stdout)
    return shown


def write_bands_workspace(root: Path) -> None:
    """A workspace of the withdrawn priority-bands-v1 extension, written by hand."""
    (root / ".httk-workflow").mkdir(parents=True)
    document = {
        "format": "httk-workflow-filesystem",
        "format_version": 1,
        "core_profile": "core-v2",
        "extensions": ["priority-bands-v1"],
        "record_ref_encoding": "hwref-v1",
        "workspace_id": str(uuid.uuid4()),
        "created_at": "2026-07-24T12:00:00Z",
        "policy": {},
    }
    (root / ".httk-workflow" / "format.json").write_text(json.dumps(document))


# -- init -------------------------------------------------------------------------------------------


def test_init_prints_the_path_and_the_workspace_id(tmp_path: Path, invoke: Invoke) -> None:
    result = invoke("workflow", "workspace", "init", tmp_path / "ws", "--name", "demo")
    assert result.exit_code == 0, result.output
    document = format_document(tmp_path / "ws")
    assert result.stdout.splitlines() == [
        f"initialized workspace {tmp_path / 'ws'}",
        f"workspace_id {document['workspace_id']}",
        "registered as demo",
    ]
    assert document["name"] == "demo"
    assert document["durable"] is True


def test_init_json_prints_the_format_document(tmp_path: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "init", tmp_path / "ws", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == format_document(tmp_path / "ws")


def test_init_no_durable_is_recorded(tmp_path: Path, invoke: Invoke) -> None:
    assert invoke("workspace", "init", tmp_path / "ws", "--no-durable").exit_code == 0
    assert format_document(tmp_path / "ws")["durable"] is False


def test_init_spec03_spelling(tmp_path: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "init", "--name", "runs", tmp_path / "runs")
    assert result.exit_code == 0, result.output
    assert format_document(tmp_path / "runs")["name"] == "runs"


def test_init_refuses_an_existing_workspace_with_exit_3(workspace: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "init", workspace)
    assert result.exit_code == 3
    assert result.stderr.splitlines() == [f"error: {workspace}: already a workspace (.httk-workflow/ exists)"]


# -- policy -----------------------------------------------------------------------------------------


def test_policy_show_after_init_is_the_default(workspace: Path, invoke: Invoke) -> None:
    assert policy(invoke, workspace) == DEFAULT_POLICY


def test_policy_show_table(workspace: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "policy", "show", workspace)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["key", "value", "default"] in rows
    assert ["lease_seconds", "900.0", "900.0"] in rows
    assert ["retention.journal_days", "keep", "keep"] in rows


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("lease_seconds", "60", {"lease_seconds": 60.0}),
        ("visibility_deadline_seconds", "30", {"visibility_deadline_seconds": 30.0}),
        ("journal_segment_bytes", "4096", {"journal_segment_bytes": 4096}),
        ("retention.journal_days", "90", {"retention": {**KEEP_ALL, "journal_days": 90.0}}),
        ("retention.trash_days", "keep", {"retention": KEEP_ALL}),
        ("retention.trash_days", "null", {"retention": KEEP_ALL}),
        (
            "retention",
            '{"attempt_control_days": 14}',
            {"retention": {**KEEP_ALL, "attempt_control_days": 14.0}},
        ),
    ],
)
def test_policy_set_valid_values(
    workspace: Path, invoke: Invoke, key: str, value: str, expected: dict[str, object]
) -> None:
    result = invoke("workflow", "workspace", "policy", "set", workspace, key, value)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"policy {key} = ")
    assert policy(invoke, workspace) == {**DEFAULT_POLICY, **expected}


def test_policy_set_spec03_spelling(workspace: Path, invoke: Invoke) -> None:
    result = invoke(
        "workspace", "policy", "set", "--key", "retention.journal_days", "--value", "90", workspace
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "policy retention.journal_days = 90.0\n"
    result = invoke("workspace", "policy", "set", "--workspace", workspace, "lease_seconds", "120")
    assert result.exit_code == 0, result.output
    assert policy(invoke, workspace)["lease_seconds"] == 120.0


def test_policy_set_json_prints_the_effective_policy(workspace: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "policy", "set", workspace, "lease_seconds", "60", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {**DEFAULT_POLICY, "lease_seconds": 60.0}


def test_policy_set_refuses_an_unknown_key_listing_the_known_ones(workspace: Path, invoke: Invoke) -> None:
    before = format_document(workspace)
    result = invoke("workspace", "policy", "set", workspace, "shard_depth", "2")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: unknown policy member 'shard_depth'; known members are {KNOWN_KEYS}"
    ]
    assert format_document(workspace) == before


def test_policy_set_refuses_an_unknown_retention_key(workspace: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "policy", "set", workspace, "retention.log_days", "1")
    assert result.exit_code == 2
    assert "known members are attempt_control_days, journal_days, trash_days" in result.stderr


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("lease_seconds", "0.5", "at least one second"),
        ("lease_seconds", "keep", "must be a finite number"),
        ("visibility_deadline_seconds", "100000", "at most one day"),
        ("journal_segment_bytes", "100", "at least 4096"),
        ("journal_segment_bytes", "4096.5", "integer"),
        ("retention.journal_days", "-1", "must not be negative"),
        ("retention", "[]", "must be an object"),
    ],
)
def test_policy_set_refuses_invalid_values(
    workspace: Path, invoke: Invoke, key: str, value: str, message: str
) -> None:
    before = format_document(workspace)
    result = invoke("workspace", "policy", "set", workspace, key, "--", value)
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert format_document(workspace) == before


def test_policy_set_needs_a_value(workspace: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "policy", "set", workspace, "lease_seconds")
    assert result.exit_code == 2
    assert "missing VALUE" in result.stderr


def test_policy_set_keeps_other_members(workspace: Path, invoke: Invoke) -> None:
    document = format_document(workspace)
    document["x-site"] = {"owner": "rar"}
    (workspace / ".httk-workflow" / "format.json").write_text(json.dumps(document))
    assert invoke("workspace", "settings", "set", workspace, "vasp.command", "vasp_std").exit_code == 0
    assert invoke("workspace", "policy", "set", workspace, "lease_seconds", "60").exit_code == 0
    after = format_document(workspace)
    assert after["x-site"] == {"owner": "rar"}
    assert after["settings"] == {"vasp.command": "vasp_std"}
    assert after["workspace_id"] == document["workspace_id"]


# -- settings ---------------------------------------------------------------------------------------


def test_settings_set_show_unset(workspace: Path, invoke: Invoke) -> None:
    assert settings(invoke, workspace) == {}
    assert invoke("workspace", "settings", "show", workspace).stderr == "no settings\n"

    result = invoke("workspace", "settings", "set", workspace, "vasp.command", '"srun -n 32 vasp_std"')
    assert result.exit_code == 0, result.output
    assert result.stdout == 'setting vasp.command = "srun -n 32 vasp_std"\n'
    assert invoke("workspace", "settings", "set", workspace, "slurm.partition", "batch").exit_code == 0
    assert invoke("workspace", "settings", "set", workspace, "manager.workers", "8").exit_code == 0
    assert settings(invoke, workspace) == {
        "manager.workers": 8,
        "slurm.partition": "batch",
        "vasp.command": "srun -n 32 vasp_std",
    }
    table = invoke("workflow", "workspace", "settings", "show", workspace).stdout
    assert [line.split(maxsplit=1) for line in table.splitlines()][-3:] == [
        ["manager.workers", "8"],
        ["slurm.partition", '"batch"'],
        ["vasp.command", '"srun -n 32 vasp_std"'],
    ]

    result = invoke("workspace", "settings", "unset", workspace, "slurm.partition")
    assert result.exit_code == 0, result.output
    assert result.stdout == "setting slurm.partition removed\n"
    assert "slurm.partition" not in settings(invoke, workspace)

    again = invoke("workspace", "settings", "unset", workspace, "slurm.partition")
    assert again.exit_code == 0
    assert again.stderr == "setting slurm.partition was not set\n"


def test_settings_spec03_spelling(workspace: Path, invoke: Invoke) -> None:
    result = invoke(
        "workspace", "settings", "set", "--key", "vasp.command", "--value", '"srun -n 32 vasp_std"', workspace
    )
    assert result.exit_code == 0, result.output
    assert (
        invoke("workspace", "settings", "unset", "--workspace", workspace, "--key", "vasp.command").exit_code
        == 0
    )
    assert settings(invoke, workspace) == {}


def test_settings_set_refuses_an_invalid_name(workspace: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "settings", "set", workspace, "VASP command", "x")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid setting name 'VASP command'")


def test_settings_keep_unknown_format_members(workspace: Path, invoke: Invoke) -> None:
    document = format_document(workspace)
    document["x-site"] = [1, 2]
    (workspace / ".httk-workflow" / "format.json").write_text(json.dumps(document))
    assert invoke("workspace", "settings", "set", workspace, "a.b", "1").exit_code == 0
    assert invoke("workspace", "settings", "unset", workspace, "a.b").exit_code == 0
    assert format_document(workspace)["x-site"] == [1, 2]


# -- workspaces that cannot be attached -------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("workspace", "policy", "show"),
        ("workspace", "settings", "show"),
        ("workspace", "settings", "set", "{ws}", "a.b", "1"),
        ("workspace", "policy", "set", "{ws}", "lease_seconds", "60"),
    ],
)
def test_a_priority_bands_workspace_exits_3_asking_for_reinitialization(
    tmp_path: Path, invoke: Invoke, command: tuple[str, ...]
) -> None:
    root = tmp_path / "bands"
    write_bands_workspace(root)
    args = [part.format(ws=root) for part in command]
    if "{ws}" not in command:
        args.append(str(root))
    result = invoke(*args)
    assert result.exit_code == 3
    [line] = result.stderr.splitlines()
    assert "priority-bands-v1" in line
    assert "must be re-initialized" in line


def test_not_a_workspace_exits_3(tmp_path: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "policy", "show", tmp_path)
    assert result.exit_code == 3
    assert result.stderr == f"error: {tmp_path}: not a workspace: no .httk-workflow/format.json\n"


def test_an_unsupported_extension_can_be_shown_but_not_changed(workspace: Path, invoke: Invoke) -> None:
    document = format_document(workspace)
    document["extensions"] = ["relocation-v1"]
    (workspace / ".httk-workflow" / "format.json").write_text(json.dumps(document))
    assert policy(invoke, workspace) == DEFAULT_POLICY
    result = invoke("workspace", "policy", "set", workspace, "lease_seconds", "60")
    assert result.exit_code == 3
    assert "relocation-v1" in result.stderr


# -- the workspace argument -------------------------------------------------------------------------


def test_no_workspace_is_a_usage_error(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("workspace", "policy", "show")
    assert result.exit_code == 2
    assert "pass WORKSPACE or --workspace WS" in result.stderr


def test_two_different_workspaces_are_a_usage_error(workspace: Path, tmp_path: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "policy", "show", workspace, "--workspace", tmp_path)
    assert result.exit_code == 2
    assert "differ" in result.stderr


def test_the_same_workspace_twice_is_accepted(workspace: Path, invoke: Invoke) -> None:
    result = invoke("workspace", "settings", "set", workspace, "a.b", "1", "--workspace", workspace)
    assert result.exit_code == 0, result.output
    assert settings(invoke, workspace) == {"a.b": 1}
