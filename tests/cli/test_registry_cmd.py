"""The workspace registry and WORKSPACE resolution, through the real ``httk`` in real processes.

Every rule that can choose a workspace (the argument as a name or a path, --workspace, the enclosing
workspace, the project default, the registry default, the per-user default workspace) and every registry
error (a name taken, a corrupt entry or default, a name not registered, a registered directory gone, an
ambiguous word). The conftest points ``HTTK_CONFIG_HOME`` and ``HTTK_DATA_HOME`` at a fresh directory for
each test, and the processes inherit them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.newkit import BIN, httk
from tests.runners import wait_until


def config() -> Path:
    return Path(os.environ["HTTK_CONFIG_HOME"])


def data() -> Path:
    return Path(os.environ["HTTK_DATA_HOME"])


def init(path: Path, *extra: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    result = httk("workflow", "workspace", "init", path, *extra, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result


def shown(*args: str | Path, cwd: Path) -> dict[str, object]:
    result = httk("workflow", "workspace", "show", *args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def listed() -> list[dict[str, object]]:
    result = httk("workflow", "workspace", "list", "--json")
    assert result.returncode == 0, result.stderr
    workspaces = json.loads(result.stdout)["workspaces"]
    assert isinstance(workspaces, list)
    return workspaces


# -- registration -----------------------------------------------------------------------------------


def test_init_registers_the_basename_and_list_shows_it(tmp_path: Path) -> None:
    result = init(tmp_path / "silicon")
    assert result.stdout.splitlines()[-1] == "registered as silicon"
    [entry] = listed()
    workspace_id = json.loads((tmp_path / "silicon" / ".httk-workflow" / "format.json").read_text())[
        "workspace_id"
    ]
    assert {k: entry[k] for k in ("name", "path", "workspace_id", "present")} == {
        "name": "silicon",
        "path": str(tmp_path / "silicon"),
        "workspace_id": workspace_id,
        "present": True,
    }
    assert json.loads((config() / "workspaces" / "silicon.json").read_text())["path"] == str(
        tmp_path / "silicon"
    )


def test_init_registers_the_name_given(tmp_path: Path) -> None:
    init(tmp_path / "runs" / "a", "--name", "campaign")
    assert [entry["name"] for entry in listed()] == ["campaign"]


def test_a_name_taken_by_another_directory_warns_and_still_creates_the_workspace(tmp_path: Path) -> None:
    init(tmp_path / "one" / "ws")
    second = httk("workflow", "workspace", "init", tmp_path / "two" / "ws")
    assert second.returncode == 0
    assert second.stderr == (
        f"warning: not registered: the name 'ws' is already registered for {tmp_path / 'one' / 'ws'} "
        "(choose another with --name, or: workspace forget ws)\n"
    )
    assert "registered as" not in second.stdout
    assert (tmp_path / "two" / "ws" / ".httk-workflow" / "format.json").is_file()
    assert [entry["path"] for entry in listed()] == [str(tmp_path / "one" / "ws")]


def test_an_invalid_name_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    result = httk("workflow", "workspace", "init", tmp_path / "ws", "--name", "has space")
    assert result.returncode == 2
    assert "invalid workspace name 'has space'" in result.stderr
    assert not (tmp_path / "ws").exists()
    assert not (config() / "workspaces").exists()


def test_a_basename_that_cannot_be_a_name_is_created_and_not_registered(tmp_path: Path) -> None:
    result = httk("workflow", "workspace", "init", tmp_path / "my ws")
    assert result.returncode == 0
    assert result.stderr.startswith("warning: not registered: invalid workspace name 'my ws'")
    assert listed() == []


def test_forget_deregisters_and_leaves_the_directory(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    assert httk("workflow", "workspace", "forget", "ws").stdout == "forgot ws\n"
    assert listed() == []
    assert (tmp_path / "ws" / ".httk-workflow").is_dir()
    again = httk("workflow", "workspace", "forget", "ws")
    assert again.returncode == 3
    assert "no workspace named 'ws' is registered" in again.stderr


def test_a_corrupt_entry_is_an_error_naming_its_file_and_forget_clears_it(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    entry = config() / "workspaces" / "ws.json"
    entry.write_text("{not json")
    for args in (("workspace", "list"), ("workspace", "status", "ws")):
        result = httk("workflow", *args)
        assert result.returncode == 3, args
        assert result.stderr == f"error: {entry}: corrupt workspace registry file: not JSON\n"
    entry.write_text(
        json.dumps({"format": "httk-workflow-registry-entry", "format_version": 1, "name": "other"})
    )
    result = httk("workflow", "workspace", "list")
    assert result.returncode == 3
    assert f"{entry}: corrupt workspace registry entry: it names 'other', not 'ws'" in result.stderr
    assert httk("workflow", "workspace", "forget", "ws").returncode == 0
    assert listed() == []


def test_a_corrupt_default_is_an_error_naming_its_file(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    assert httk("workflow", "workspace", "default", "--user", "ws").returncode == 0
    default = config() / "defaults" / "user.json"
    default.write_text("[]")
    result = httk("workflow", "workspace", "status", cwd=tmp_path)
    assert result.returncode == 3
    assert result.stderr == f"error: {default}: corrupt workspace registry file: not a JSON object\n"


def test_a_name_whose_directory_is_gone_is_an_error(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    (tmp_path / "ws" / ".httk-workflow").rename(tmp_path / "ws" / "moved")
    result = httk("workflow", "workspace", "status", "ws", cwd=tmp_path)
    assert result.returncode == 3
    assert "workspace 'ws' is registered for" in result.stderr
    assert "which is no longer a workspace (deregister it with: workspace forget ws)" in result.stderr


def test_default_refuses_a_name_that_is_not_registered(tmp_path: Path) -> None:
    for args in (("default", "nope"), ("default", "--user", "nope")):
        result = httk("workflow", "workspace", *args, cwd=tmp_path)
        assert result.returncode == 3
        assert "no workspace named 'nope' is registered" in result.stderr
    assert not (config() / "defaults").exists()


# -- racing writers ---------------------------------------------------------------------------------


RACERS = 8


def _init_all(paths: list[tuple[Path, str]]) -> list[subprocess.CompletedProcess[str]]:
    processes = [
        subprocess.Popen(
            [str(BIN / "httk"), "workflow", "workspace", "init", str(path), "--name", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path, name in paths
    ]
    done = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr))
    return done


def test_processes_registering_distinct_names_at_once_all_land(tmp_path: Path) -> None:
    done = _init_all([(tmp_path / f"ws{i}", f"name{i}") for i in range(RACERS)])
    assert [result.returncode for result in done] == [0] * RACERS
    assert {(entry["name"], entry["path"]) for entry in listed()} == {
        (f"name{i}", str(tmp_path / f"ws{i}")) for i in range(RACERS)
    }


def test_processes_registering_one_name_at_once_leave_exactly_one_winner(tmp_path: Path) -> None:
    done = _init_all([(tmp_path / f"ws{i}", "shared") for i in range(RACERS)])
    assert [result.returncode for result in done] == [0] * RACERS
    winners = [i for i, result in enumerate(done) if "registered as shared" in result.stdout]
    assert len(winners) == 1
    [entry] = listed()
    assert entry["path"] == str(tmp_path / f"ws{winners[0]}")
    for i, result in enumerate(done):
        if i != winners[0]:
            assert result.stderr.startswith(
                "warning: not registered: the name 'shared' is already registered"
            )
    assert sorted(os.listdir(config() / "workspaces")) == ["shared.json"]  # no temporary file left behind


# -- resolution rules -------------------------------------------------------------------------------


def test_the_argument_may_be_a_name_or_a_path(tmp_path: Path) -> None:
    init(tmp_path / "ws", "--name", "alpha")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_name = shown("alpha", cwd=elsewhere)
    assert (by_name["workspace"], by_name["rule"], by_name["names"]) == (
        str(tmp_path / "ws"),
        "argument",
        ["alpha"],
    )
    by_path = shown(tmp_path / "ws", cwd=elsewhere)
    assert (by_path["workspace"], by_path["rule"]) == (str(tmp_path / "ws"), "argument")
    by_option = shown("--workspace", "alpha", cwd=elsewhere)
    assert (by_option["workspace"], by_option["rule"]) == (str(tmp_path / "ws"), "option")
    status = httk("workflow", "workspace", "status", "alpha", cwd=elsewhere)
    assert status.returncode == 0 and str(tmp_path / "ws") in status.stdout


def test_the_enclosing_workspace_comes_first(tmp_path: Path) -> None:
    init(tmp_path / "outer")
    init(tmp_path / "other")
    inside = tmp_path / "outer" / "deep" / "er"
    inside.mkdir(parents=True)
    assert httk("workflow", "workspace", "default", "other", cwd=inside).returncode == 0
    assert httk("workflow", "workspace", "default", "--user", "other").returncode == 0
    chosen = shown(cwd=inside)
    assert (chosen["workspace"], chosen["rule"]) == (str(tmp_path / "outer"), "enclosing")
    text = httk("workflow", "workspace", "show", cwd=inside).stdout
    assert text.splitlines()[-1] == (
        f"chosen by the closest enclosing workspace: {tmp_path / 'outer'} holds .httk-workflow/"
    )


def test_the_project_default_is_found_below_the_project(tmp_path: Path) -> None:
    init(tmp_path / "runs" / "ws", "--name", "proj")
    init(tmp_path / "runs" / "mine", "--name", "mine")
    project = tmp_path / "project"
    below = project / "src" / "deep"
    below.mkdir(parents=True)
    recorded = httk("workflow", "workspace", "default", "proj", cwd=project)
    assert recorded.stdout == f"the default workspace of {project} and below is proj\n"
    assert httk("workflow", "workspace", "default", "--user", "mine").returncode == 0
    for where in (project, below):
        chosen = shown(cwd=where)
        assert (chosen["workspace"], chosen["rule"]) == (str(tmp_path / "runs" / "ws"), "project")
        assert chosen["reason"] == f"the project's recorded default: 'proj', recorded for {project}"
    outside = shown(cwd=tmp_path)
    assert (outside["workspace"], outside["rule"]) == (str(tmp_path / "runs" / "mine"), "user")


def test_a_project_default_whose_name_was_forgotten_is_an_error_not_a_fallthrough(tmp_path: Path) -> None:
    init(tmp_path / "ws", "--name", "gone")
    project = tmp_path / "project"
    project.mkdir()
    assert httk("workflow", "workspace", "default", "gone", cwd=project).returncode == 0
    assert httk("workflow", "workspace", "forget", "gone").returncode == 0
    result = httk("workflow", "job", "list", cwd=project)
    assert result.returncode == 3
    assert "no workspace named 'gone' is registered" in result.stderr
    assert not (data() / "default-workspace").exists()


def test_the_registry_default_applies_anywhere(tmp_path: Path) -> None:
    init(tmp_path / "ws", "--name", "everywhere")
    recorded = httk("workflow", "workspace", "default", "--user", "everywhere")
    assert recorded.stdout == "the registry default workspace is everywhere\n"
    chosen = shown(cwd=tmp_path)
    assert (chosen["workspace"], chosen["rule"], chosen["name"]) == (
        str(tmp_path / "ws"),
        "user",
        "everywhere",
    )
    assert [row["name"] for row in listed()] == ["everywhere"]
    table = httk("workflow", "workspace", "list").stdout.splitlines()
    assert table[2].split() == ["everywhere", str(tmp_path / "ws"), "yes", "user"]


def test_a_read_command_finding_no_workspace_says_so_and_creates_none(tmp_path: Path) -> None:
    for args in (("workspace", "status"), ("job", "list"), ("workspace", "show")):
        result = httk("workflow", *args, cwd=tmp_path)
        assert result.returncode == 2, args
        assert f"no workspace: {tmp_path} is not inside one" in result.stderr
        assert str(data() / "default-workspace") in result.stderr
    assert not data().exists()


def test_a_writing_command_creates_the_per_user_default_workspace_once(tmp_path: Path) -> None:
    default = data() / "default-workspace"
    first = httk("workflow", "workspace", "settings", "set", "vasp.command", "vasp_std", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (
        first.stderr == f"note: created the per-user default workspace {default}, registered as 'default'\n"
    )
    second = httk("workflow", "workspace", "settings", "set", "vasp.ncore", "4", cwd=tmp_path)
    assert (second.returncode, second.stderr) == (0, "")
    chosen = shown(cwd=tmp_path)
    assert (chosen["workspace"], chosen["rule"], chosen["names"]) == (str(default), "per-user", ["default"])
    settings = httk("workflow", "workspace", "settings", "show", "--json", cwd=tmp_path)
    assert json.loads(settings.stdout) == {"vasp.command": "vasp_std", "vasp.ncore": 4}


def test_a_mistyped_workspace_path_creates_no_default_workspace(tmp_path: Path) -> None:
    (tmp_path / "payload").mkdir()
    for args in (("job", "submit", "/typo/ws", "payload", "--placement", "p"), ("v1", "import", "typo/root")):
        result = httk("workflow", *args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert f"{args[2]!r} is neither a workspace nor an existing path" in result.stderr
        assert "nothing was created" in result.stderr
    assert not data().exists()
    init(tmp_path / "ws")
    httk("workflow", "workspace", "default", "--user", "ws", cwd=tmp_path)
    chosen = httk(
        "workflow", "job", "submit", "/typo/ws", "--placement", "p", cwd=tmp_path
    )  # a workspace is chosen: its error
    assert chosen.returncode == 2 and "neither a workspace" not in chosen.stderr, chosen.stderr
    assert "/typo/ws" in chosen.stderr


# -- the first word: the workspace or the command's next argument -----------------------------------


def test_a_first_word_that_is_no_workspace_is_the_next_argument(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    result = httk("workflow", "job", "show", "no-such-job", cwd=tmp_path / "ws")
    assert result.returncode != 0
    assert "no-such-job" in result.stderr
    assert "ambiguous" not in result.stderr and "no workspace" not in result.stderr


def test_a_registered_name_where_the_next_argument_belongs_is_ambiguous(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    init(tmp_path / "relax")
    result = httk("workflow", "job", "show", "relax", cwd=tmp_path / "ws")
    assert result.returncode == 2
    assert (
        f"'relax' is ambiguous: it is the registered name of the workspace {tmp_path / 'relax'}, and it "
        "could be the JOB" in result.stderr
    )
    for args in (("job", "why", "relax"), ("job", "submit", "relax", "--placement", "p")):
        many = httk("workflow", *args, cwd=tmp_path / "ws")
        assert many.returncode == 2 and "'relax' is ambiguous" in many.stderr, args
    with_option = httk("workflow", "job", "show", "--workspace", "ws", "relax", cwd=tmp_path)
    assert "ambiguous" not in with_option.stderr  # --workspace makes 'relax' the JOB


def test_a_name_and_a_directory_naming_different_workspaces_is_ambiguous(tmp_path: Path) -> None:
    init(tmp_path / "far" / "twin")
    here = tmp_path / "here"
    here.mkdir()
    httk("workflow", "workspace", "init", here / "twin")  # a name already taken: not registered
    result = httk("workflow", "workspace", "status", "twin", cwd=here)
    assert result.returncode == 2
    assert (
        f"'twin' is ambiguous: it is the workspace directory {here / 'twin'} and the name registered for "
        f"{tmp_path / 'far' / 'twin'}" in result.stderr
    )
    plain = httk("workflow", "workspace", "status", "./twin", cwd=here)
    assert plain.returncode == 0 and str(here / "twin") in plain.stdout


def test_a_word_the_count_makes_the_workspace_must_be_one(tmp_path: Path) -> None:
    result = httk("workflow", "workspace", "status", "nowhere", cwd=tmp_path)
    assert result.returncode == 3
    assert "not a workspace" in result.stderr


# -- delete -----------------------------------------------------------------------------------------


def test_delete_needs_force(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    result = httk("workflow", "workspace", "delete", "ws")
    assert result.returncode == 2
    assert "pass --force" in result.stderr
    assert (tmp_path / "ws" / ".httk-workflow").is_dir()


def test_delete_destroys_the_workspace_and_deregisters_it(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    (tmp_path / "ws" / "results.txt").write_text("precious\n")
    result = httk("workflow", "workspace", "delete", "ws", "--force")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"deleted workspace ws ({tmp_path / 'ws'})\n"
    assert sorted(os.listdir(tmp_path)) == []
    assert listed() == []


def test_delete_refuses_a_directory_that_is_no_longer_the_registered_workspace(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    subprocess.run(["rm", "-r", str(tmp_path / "ws" / ".httk-workflow")], check=True)
    init(tmp_path / "ws", "--name", "new")  # another workspace in the same directory
    result = httk("workflow", "workspace", "delete", "ws", "--force")
    assert result.returncode == 3
    assert "refusing to delete" in result.stderr and "that was registered as 'ws'" in result.stderr
    assert (tmp_path / "ws" / ".httk-workflow").is_dir()
    assert {entry["name"] for entry in listed()} == {"ws", "new"}


def test_delete_is_refused_while_a_manager_is_live(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    manager = subprocess.Popen(
        [str(BIN / "httk"), "workflow", "run", "ws", "--idle"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        [manager_id] = wait_until(lambda: _live_managers(tmp_path / "ws"), "the manager's first heartbeat")
        refused = httk("workflow", "workspace", "delete", "ws", "--force")
        assert refused.returncode == 3
        assert f"refusing to delete workspace 'ws' while manager {manager_id} is live" in refused.stderr
        assert (tmp_path / "ws" / ".httk-workflow").is_dir()
        assert [entry["name"] for entry in listed()] == ["ws"]
        assert httk("workflow", "manager", "stop", "ws", "--all").returncode == 0
        assert manager.wait(timeout=60) == 0
    finally:
        if manager.poll() is None:
            manager.kill()
            manager.wait()
    assert httk("workflow", "workspace", "delete", "ws", "--force").returncode == 0
    assert not (tmp_path / "ws").exists()


def test_delete_of_a_name_whose_directory_is_gone_only_deregisters(tmp_path: Path) -> None:
    init(tmp_path / "ws")
    subprocess.run(["rm", "-r", str(tmp_path / "ws")], check=True)
    result = httk("workflow", "workspace", "delete", "ws", "--force")
    assert result.returncode == 0
    assert result.stdout == f"forgot ws: its directory {tmp_path / 'ws'} was already gone\n"
    assert listed() == []


def _live_managers(root: Path) -> list[str]:
    shown_managers = httk("workflow", "workspace", "managers", root, "--json")
    return [view["manager_id"] for view in json.loads(shown_managers.stdout) if view["state"] == "live"]


@pytest.mark.parametrize("variable", ["HTTK_CONFIG_HOME", "XDG_CONFIG_HOME"])
def test_the_registry_lives_in_the_configuration_directory(tmp_path: Path, variable: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HTTK_CONFIG_HOME"}
    env[variable] = str(tmp_path / "cfg")
    assert httk("workflow", "workspace", "init", tmp_path / "ws", env=env).returncode == 0
    below = tmp_path / "cfg" if variable == "HTTK_CONFIG_HOME" else tmp_path / "cfg" / "httk"
    assert (below / "workspaces" / "ws.json").is_file()
