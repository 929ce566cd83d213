from __future__ import annotations

import hashlib
import json
from pathlib import Path

from httk.workflow.protocol._digest import tree_digest

from tests.cli.conftest import Invoke


def runner_file(tmp_path: Path, text: str = "#!/bin/sh\necho relax\n") -> Path:
    path = tmp_path / "relax.sh"
    path.write_text(text)
    path.chmod(0o755)
    return path


def runner_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "relax-runner"
    (tree / "lib").mkdir(parents=True)
    (tree / "run").write_text("#!/bin/sh\n. ./lib/common.sh\n")
    (tree / "run").chmod(0o755)
    (tree / "lib" / "common.sh").write_text("true\n")
    return tree


def test_publish_a_file_prints_the_runner_reference(workspace: Path, invoke: Invoke, tmp_path: Path) -> None:
    source = runner_file(tmp_path)
    result = invoke("workflow", "runner", "publish", workspace, "--name", "relax.sh", source)
    assert result.exit_code == 0, result.output
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert json.loads(result.stdout) == {"source": "workspace", "path": "relax.sh", "sha256": digest}
    assert result.stdout == f'{{"path": "relax.sh", "sha256": "{digest}", "source": "workspace"}}\n'
    assert result.stderr == f"published runner 'relax.sh' (file, sha256 {digest})\n"
    assert (workspace / ".httk-workflow/runners/relax.sh").read_bytes() == source.read_bytes()


def test_publish_a_tree_pins_its_tree_digest(workspace: Path, invoke: Invoke, tmp_path: Path) -> None:
    tree = runner_tree(tmp_path)
    result = invoke("workflow", "runner", "publish", "--workspace", workspace, "--name", "relax-runner", tree)
    assert result.exit_code == 0, result.output
    reference = json.loads(result.stdout)
    assert reference == {"source": "workspace", "path": "relax-runner", "sha256": tree_digest(tree)}
    assert (workspace / ".httk-workflow/runners/relax-runner/lib/common.sh").is_file()


def test_republishing_identical_content_changes_nothing(
    workspace: Path, invoke: Invoke, tmp_path: Path
) -> None:
    source = runner_file(tmp_path)
    first = invoke("workflow", "runner", "publish", workspace, "--name", "relax.sh", source)
    again = invoke("workflow", "runner", "publish", workspace, "--name", "relax.sh", source, "--json")
    assert again.exit_code == 0, again.output
    shown = json.loads(again.stdout)
    assert shown["changed"] is False
    assert shown["kind"] == "file"
    assert shown["runner"] == json.loads(first.stdout)
    plain = invoke("workflow", "runner", "publish", workspace, "--name", "relax.sh", source)
    assert plain.stderr.startswith("unchanged: runner 'relax.sh'")


def test_different_content_needs_replace(workspace: Path, invoke: Invoke, tmp_path: Path) -> None:
    source = runner_file(tmp_path)
    first = json.loads(invoke("workflow", "runner", "publish", workspace, "--name", "r", source).stdout)
    source.write_text("#!/bin/sh\necho changed\n")

    refused = invoke("workflow", "runner", "publish", workspace, "--name", "r", source)
    assert refused.exit_code == 2
    [line] = refused.stderr.splitlines()
    assert "needs --replace" in line
    assert first["sha256"] in line

    replaced = invoke(
        "workflow", "runner", "publish", workspace, "--name", "r", source, "--replace", "--json"
    )
    assert replaced.exit_code == 0, replaced.output
    shown = json.loads(replaced.stdout)
    assert shown["changed"] is True
    assert shown["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest() != first["sha256"]


def test_a_tree_without_run_exits_2(workspace: Path, invoke: Invoke, tmp_path: Path) -> None:
    tree = runner_tree(tmp_path)
    (tree / "run").unlink()
    result = invoke("workflow", "runner", "publish", workspace, "--name", "r", tree)
    assert result.exit_code == 2
    assert "'run' file" in result.stderr


def test_an_invalid_name_exits_2(workspace: Path, invoke: Invoke, tmp_path: Path) -> None:
    result = invoke("workflow", "runner", "publish", workspace, "--name", "../up", runner_file(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid runner name '../up'")


def test_publish_needs_a_path(workspace: Path, invoke: Invoke) -> None:
    result = invoke("workflow", "runner", "publish", "--workspace", workspace, "--name", "r")
    assert result.exit_code == 2
    assert "missing PATH" in result.stderr
