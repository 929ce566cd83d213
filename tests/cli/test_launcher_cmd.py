"""``httk workflow launcher add|list|show|remove`` in-process: bundles in a workspace and per user."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An environment whose per-user configuration directory is a fresh temporary one."""
    return {"HTTK_CONFIG_HOME": str(tmp_path / "config")}


def test_a_workspace_launcher_is_added_listed_shown_and_removed(
    invoke: Invoke, workspace: Path, home: dict[str, str]
) -> None:
    added = invoke(
        "workflow", "launcher", "add", "--template", "slurm", "--workspace", workspace, "cluster", env=home
    )
    assert added.exit_code == 0, added.output
    bundle = workspace / ".httk-workflow" / "launchers" / "cluster.json"
    assert json.loads(bundle.read_text()) == {
        "format": "httk-workflow-launcher",
        "format_version": 1,
        "name": "cluster",
        "template": "slurm",
    }

    listed = invoke("workflow", "launcher", "list", "--workspace", workspace, "--json", env=home)
    assert [(b["name"], b["template"], b["scope"]) for b in json.loads(listed.stdout)] == [
        ("process", "process", "built-in"),
        ("cluster", "slurm", "workspace"),
    ]
    shown = invoke("workflow", "launcher", "show", "--workspace", workspace, "cluster", "--json", env=home)
    settings = json.loads(shown.stdout)["settings"]
    assert "slurm.partition" in settings and "environment.prelude" in settings

    removed = invoke("workflow", "launcher", "remove", "--workspace", workspace, "cluster", env=home)
    assert removed.exit_code == 0, removed.output
    assert not bundle.exists()


def test_a_global_launcher_serves_every_workspace_and_a_workspace_one_wins(
    invoke: Invoke, workspace: Path, home: dict[str, str]
) -> None:
    assert (
        invoke(
            "workflow", "launcher", "add", "--template", "slurm", "--global", "cluster", env=home
        ).exit_code
        == 0
    )
    assert (Path(home["HTTK_CONFIG_HOME"]) / "launchers" / "cluster.json").is_file()
    invoke(
        "workflow", "launcher", "add", "--template", "process", "--workspace", workspace, "cluster", env=home
    )

    shown = invoke("workflow", "launcher", "show", "--workspace", workspace, "cluster", "--json", env=home)

    assert (json.loads(shown.stdout)["template"], json.loads(shown.stdout)["scope"]) == (
        "process",
        "workspace",
    )
    alone = invoke("workflow", "launcher", "show", "cluster", "--json", env=home)
    assert json.loads(alone.stdout)["scope"] == "global"


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (
            ["add", "--template", "pbs", "--global", "cluster"],
            "unknown launcher template 'pbs'; known: process, slurm",
        ),
        (["add", "--template", "slurm", "--global", "Bad Name"], "invalid launcher name 'Bad Name'"),
        (["add", "--template", "slurm", "--global", "process"], "'process' is the built-in launcher"),
        (["show", "nowhere"], "no launcher named 'nowhere'"),
        (["remove", "--global", "nowhere"], "no launcher 'nowhere'"),
    ],
)
def test_bad_launcher_commands_are_refused_with_a_reason(
    invoke: Invoke, home: dict[str, str], words: list[str], message: str
) -> None:
    result = invoke("workflow", "launcher", *words, env=home)

    assert result.exit_code == 2
    assert message in result.stderr


def test_adding_a_name_twice_is_refused(invoke: Invoke, home: dict[str, str]) -> None:
    assert (
        invoke("workflow", "launcher", "add", "--template", "slurm", "--global", "c", env=home).exit_code == 0
    )

    again = invoke("workflow", "launcher", "add", "--template", "slurm", "--global", "c", env=home)

    assert again.exit_code == 2
    assert "launcher 'c' already exists" in again.stderr
