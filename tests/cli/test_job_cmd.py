from __future__ import annotations

import json
from pathlib import Path

import pytest
from httk.workflow.cli import _job_cmd

from tests.cli.conftest import Invoke, MakePayload, format_document

MARKERS = ".httk-workflow/state/submitted"


def submitted_markers(root: Path) -> list[str]:
    return sorted(path.name for path in (root / MARKERS).rglob("*.init"))


def job_key(payload: Path) -> str:
    job = json.loads((payload / "job.json").read_text())
    return f"{job['tag']}--{job['id']}"


def test_submit_one_payload(workspace: Path, invoke: Invoke, make_payload: MakePayload) -> None:
    payload = make_payload("one")
    result = invoke("workflow", "job", "submit", workspace, payload, "--placement", "project-a/00/17")
    assert result.exit_code == 0, result.output
    key = job_key(payload)
    assert result.stdout == f"{key}\tproject-a/00/17\tsubmitted\n"
    assert (workspace / "project-a/00/17" / key / "job.json").read_bytes() == (
        payload / "job.json"
    ).read_bytes()
    assert (workspace / "project-a/00/17" / key / "run.sh").stat().st_mode & 0o111
    assert submitted_markers(workspace) == [f"{key}.p500.g0.init"]
    assert payload.is_dir()  # copied, not moved


def test_submit_many_payloads_json(workspace: Path, invoke: Invoke, make_payload: MakePayload) -> None:
    payloads = [make_payload(f"p{index}", priority=100 + index) for index in range(3)]
    result = invoke("job", "submit", workspace, *payloads, "--placement", "flat", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert [entry["job_key"] for entry in shown] == [job_key(p) for p in payloads]
    for index, entry in enumerate(shown):
        assert entry["status"] == "submitted"
        assert entry["state"] == "submitted"
        assert entry["placement"] == "flat"
        assert entry["job_key"].endswith(entry["job_id"])
        assert entry["marker"] == f"{MARKERS}/flat/{entry['job_key']}.p{100 + index}.g0.init"
        assert (workspace / entry["marker"]).is_file()


def test_resubmitting_an_identical_payload_is_already_submitted(
    workspace: Path, invoke: Invoke, make_payload: MakePayload
) -> None:
    payload = make_payload("same")
    assert invoke("job", "submit", workspace, payload, "--placement", "p").exit_code == 0
    result = invoke("job", "submit", workspace, payload, "--placement", "p", "--json")
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.stdout)
    assert entry["status"] == "already_submitted"
    assert len(submitted_markers(workspace)) == 1


def test_a_different_definition_under_the_same_uuid_exits_2(
    workspace: Path, invoke: Invoke, make_payload: MakePayload
) -> None:
    first = make_payload("first")
    assert invoke("job", "submit", workspace, first, "--placement", "p").exit_code == 0
    job = json.loads((first / "job.json").read_text())
    changed = make_payload("changed", id=job["id"], name="Another relaxation")
    fresh = make_payload("fresh")

    result = invoke("job", "submit", workspace, fresh, changed, "--placement", "p")
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ")
    assert f"job {job['id']} is already placed here with a different definition" in line
    assert f"payload {changed}" in line
    assert "1 of 2 payloads were submitted before it and stay submitted" in line
    assert result.stdout == f"{job_key(fresh)}\tp\tsubmitted\n"
    assert len(submitted_markers(workspace)) == 2


def test_an_invalid_job_json_exits_2_naming_the_member(
    workspace: Path, invoke: Invoke, make_payload: MakePayload
) -> None:
    payload = make_payload("bad", workdir={"mode": "sideways"})
    result = invoke("job", "submit", workspace, payload, "--placement", "p")
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert "'workdir.mode'" in line
    assert str(payload / "job.json") in line
    assert submitted_markers(workspace) == []


def test_an_invalid_payload_stops_the_batch(
    workspace: Path, invoke: Invoke, make_payload: MakePayload
) -> None:
    good = make_payload("good")
    bad = make_payload("bad", claim={"required_capabilities": []})
    later = make_payload("later")
    result = invoke("job", "submit", workspace, good, bad, later, "--placement", "p", "--json")
    assert result.exit_code == 2
    assert [entry["job_key"] for entry in json.loads(result.stdout)] == [job_key(good)]
    assert "'claim.pool'" in result.stderr
    assert "1 of 3 payloads were submitted before it" in result.stderr
    assert submitted_markers(workspace) == [f"{job_key(good)}.p500.g0.init"]


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "job.json"), ("[]", "job.json"), (None, "job.json")],
)
def test_unreadable_job_json_exits_2(
    workspace: Path, invoke: Invoke, tmp_path: Path, content: str | None, message: str
) -> None:
    payload = tmp_path / "payload"
    payload.mkdir()
    if content is not None:
        (payload / "job.json").write_text(content)
    result = invoke("job", "submit", workspace, payload, "--placement", "p")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert message in result.stderr


def test_an_invalid_placement_exits_2_before_anything_is_submitted(
    workspace: Path, invoke: Invoke, make_payload: MakePayload
) -> None:
    result = invoke("job", "submit", workspace, make_payload("p"), "--placement", "a/../b")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid placement 'a/../b'")
    assert submitted_markers(workspace) == []


def test_move_consumes_the_payload(workspace: Path, invoke: Invoke, make_payload: MakePayload) -> None:
    payload = make_payload("moved")
    key = job_key(payload)
    result = invoke("job", "submit", workspace, payload, "--placement", "p", "--move")
    assert result.exit_code == 0, result.output
    assert not payload.exists()
    assert (workspace / "p" / key / "job.json").is_file()


def test_spec03_spelling_with_the_workspace_option(
    workspace: Path, invoke: Invoke, make_payload: MakePayload
) -> None:
    payloads = [make_payload("a"), make_payload("b")]
    result = invoke("job", "submit", "--workspace", workspace, "--placement", "project-a/00/17", *payloads)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 2
    again = invoke("job", "submit", workspace, payloads[0], "--workspace", workspace, "--placement", "x")
    assert again.exit_code == 0, again.output


def test_durability_can_be_overridden_per_command(
    workspace: Path, invoke: Invoke, make_payload: MakePayload
) -> None:
    result = invoke("job", "submit", workspace, make_payload("a"), "--placement", "p", "--durable")
    assert result.exit_code == 0, result.output
    assert format_document(workspace)["durable"] is False  # the workspace's own mode is unchanged


def test_submit_needs_a_payload(workspace: Path, invoke: Invoke) -> None:
    result = invoke("job", "submit", workspace, "--placement", "p")
    assert result.exit_code == 2
    assert "missing PAYLOAD" in result.stderr


def test_a_big_batch_prints_one_summary_line(
    workspace: Path, invoke: Invoke, make_payload: MakePayload, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_job_cmd, "BIG_BATCH", 3)
    payloads = [make_payload(f"p{index}") for index in range(4)]
    assert invoke("job", "submit", workspace, payloads[0], "--placement", "big").exit_code == 0
    result = invoke("job", "submit", workspace, *payloads, "--placement", "big")
    assert result.exit_code == 0, result.output
    assert result.stdout == "4 jobs at big: 1 already_submitted, 3 submitted\n"
    assert result.stderr == ""  # not a terminal: no progress bar
