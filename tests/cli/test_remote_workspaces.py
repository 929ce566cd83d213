"""``NAME:PATH`` and ``NAME:WSNAME`` as the workspace of a command: it runs on the remote, over a real sshd.

The commands run as the real ``httk`` executable (the command line is what is forwarded); the far side
is this machine with its own httk configuration (``tests/cli/remotekit.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.cli.remotekit import HTTK, Far
from tests.runners import PAYLOAD_RUNNER, scripted_job, wait_until, write_runner


def httk(*words: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HTTK, *map(str, words)], capture_output=True, text=True, timeout=120, check=False)


def ok(*words: str | Path) -> str:
    result = httk(*words)
    assert result.returncode == 0, f"{words} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def payload(directory: Path, steps: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    job = scripted_job(steps, PAYLOAD_RUNNER, retry_on=[])
    directory.mkdir(parents=True)
    (directory / "job.json").write_text(json.dumps(job))
    write_runner(directory / "files" / "runner")
    return directory, job


def far_workspace(kappa: Far, tmp_path: Path) -> Path:
    root = tmp_path / "far-disk" / "runs"
    root.parent.mkdir()
    text = ok("workspace", "init", "--no-durable", f"kappa:{root}")
    assert f"initialized workspace {root}" in text and "registered as runs" in text
    return root


def test_init_creates_the_workspace_there_and_registers_it_in_the_remote_registry(
    kappa: Far, tmp_path: Path
) -> None:
    root = far_workspace(kappa, tmp_path)

    assert (root / ".httk-workflow" / "format.json").is_file()
    entry = json.loads((kappa.config / "workspaces" / "runs.json").read_text())
    assert entry["path"] == str(root)
    assert not (Path(os.environ["HTTK_CONFIG_HOME"]) / "workspaces" / "runs.json").exists()  # not here


def test_status_list_show_log_why_and_request_read_and_act_there_by_name(kappa: Far, tmp_path: Path) -> None:
    root = far_workspace(kappa, tmp_path)
    source, job = payload(tmp_path / "payloads" / "a", {"prepare": {"action": "succeed"}})
    key = f"{job['tag']}--{job['id']}"
    ok("job", "submit", "kappa:runs", source, "--placement", "p")

    status = json.loads(ok("workspace", "status", "--json", "kappa:runs"))
    assert status["workspace"] == str(root) and status["kinds"]["submitted"] == 1
    listed = json.loads(ok("job", "list", "--workspace", "kappa:runs", "--json"))
    assert [row["job_key"] for row in listed["jobs"]] == [key]
    shown = json.loads(ok("job", "show", "--json", "kappa:runs", key))
    assert shown["job_key"] == key and shown["kind"] == "submitted"
    log = httk("job", "log", "kappa:runs", key)
    assert log.returncode == 0 and f"job {key} is submitted and has no transition yet" in log.stderr
    assert key in ok("job", "why", "--workspace=kappa:runs", key)
    ok("job", "request", "kappa:runs", key, "pause", "--operator", "tester")
    requests = list((root / ".httk-workflow" / "requests").rglob("*.json"))
    assert len(requests) == 1 and json.loads(requests[0].read_text())["action"] == "pause"


def test_the_remote_commands_errors_and_exit_status_pass_through(kappa: Far, tmp_path: Path) -> None:
    far_workspace(kappa, tmp_path)

    missing = httk("job", "show", "kappa:runs", "no-such-job")
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: ") and "no-such-job" in missing.stderr
    unnamed = httk("workspace", "status", "kappa:nothing-here")
    assert unnamed.returncode != 0 and "nothing-here" in unnamed.stderr


def test_run_starts_detached_managers_there_that_run_the_jobs(kappa: Far, tmp_path: Path) -> None:
    root = far_workspace(kappa, tmp_path)
    for index in range(4):
        source, _job = payload(tmp_path / "payloads" / str(index), {"prepare": {"action": "succeed"}})
        ok("job", "submit", "kappa:runs", source, "--placement", "p")

    text = ok("workflow", "run", "--workspace", "kappa:runs", "--count", "2")  # returns: --detach there

    started = [line.split() for line in text.splitlines()]
    assert [(words[0], words[2], words[4]) for words in started] == [("pid", "manager", "output")] * 2
    assert all(Path(words[5]).is_relative_to(root / ".httk-workflow" / "managers") for words in started)

    def finished() -> dict[str, Any] | None:
        status: dict[str, Any] = json.loads(ok("workspace", "status", "--json", "kappa:runs"))
        done = status["kinds"]["succeeded"] == 4 and status["managers"]["live"] == 0
        return status if done else None

    wait_until(finished, "the remote managers to finish the four jobs and exit")


def test_an_unconfigured_name_with_a_colon_is_an_ordinary_word(kappa: Far, tmp_path: Path) -> None:
    result = httk("workspace", "status", "sigma:runs")

    assert result.returncode != 0 and "ssh" not in result.stderr
