from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from httk.workflow.engine.core._workspace import Workspace, attach, init
from httk.workflow.engine.publish._submit import JobSpec, SubmitStatus, Submitter, submit_jobs
from httk.workflow.protocol import InvalidDocumentError, SubmissionError, UnsafePathError

from tests.conftest import minimal_job
from tests.crashkit import count_mutations, run_crashing


def _markers(ws: Workspace) -> list[Path]:
    return sorted(p for p in (ws.control / "state").rglob("*") if p.is_file())


def _inodes(root: Path) -> int:
    return sum(1 for _ in root.rglob("*"))


def _payload(tmp_path: Path, job: dict[str, object], extra: dict[str, str] | None = None) -> Path:
    payload = tmp_path / f"payload-{job['id']}"
    payload.mkdir()
    (payload / "job.json").write_text(json.dumps(job, indent=2))
    for relative, text in (extra or {}).items():
        (payload / relative).parent.mkdir(parents=True, exist_ok=True)
        (payload / relative).write_text(text)
    return payload


@pytest.mark.parametrize("durable", [False, True])
def test_submission_publishes_payload_and_init_marker(workspace_path: Path, durable: bool) -> None:
    ws = init(workspace_path, durable=durable)
    job = minimal_job()
    [result] = submit_jobs(ws, [JobSpec(job, "project-17/0/03a")])
    key = f"silicon-relax--{job['id']}"
    assert result.status is SubmitStatus.SUBMITTED
    assert (workspace_path / "project-17/0/03a" / key / "job.json").is_file()
    assert _markers(ws) == [ws.control / f"state/submitted/project-17/0/03a/{key}.p500.g0.init"]
    assert json.loads((workspace_path / "project-17/0/03a" / key / "job.json").read_text()) == job
    assert not list(ws.tmp_dir.iterdir())
    assert not list(ws.journal_dir.iterdir())  # submission writes no journal


def test_a_submitted_job_costs_three_inodes(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    submit_jobs(
        ws, [JobSpec(minimal_job(runner={"source": "workspace", "path": "r", "sha256": "0" * 64}), "flat")]
    )
    before = _inodes(workspace_path)
    jobs = [minimal_job(runner={"source": "workspace", "path": "r", "sha256": "0" * 64}) for _ in range(50)]
    submit_jobs(ws, [JobSpec(job, "flat") for job in jobs])
    assert (_inodes(workspace_path) - before) / len(jobs) == 3


def test_priority_of_the_marker_is_the_jobs(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    job = minimal_job(priority=7, tag=None)
    del job["tag"]
    submit_jobs(ws, [JobSpec(job, "p")])
    assert [m.name for m in _markers(ws)] == [f"{job['id']}.p007.g0.init"]


def test_resubmitting_an_identical_job_changes_nothing(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    job = minimal_job()
    submit_jobs(ws, [JobSpec(job, "p")])
    before = _markers(ws)
    [again] = submit_jobs(ws, [JobSpec(job, "p")])
    assert again.status is SubmitStatus.ALREADY_SUBMITTED
    assert _markers(ws) == before


def test_resubmitting_a_uuid_with_another_definition_is_refused(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    job = minimal_job()
    submit_jobs(ws, [JobSpec(job, "p")])
    with pytest.raises(SubmissionError, match="different definition"):
        submit_jobs(ws, [JobSpec({**job, "priority": 1}, "p")])
    assert len(_markers(ws)) == 1


def test_an_invalid_job_writes_nothing(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    before = _inodes(workspace_path)
    with pytest.raises(SubmissionError, match="workdir"):
        submit_jobs(ws, [JobSpec(minimal_job(workdir={"path": "run"}), "p")])
    assert _inodes(workspace_path) == before


@pytest.mark.parametrize("placement", ["", "a//b", "../up", "a/./b", "/abs", ".httk-workflow/x"])
def test_a_bad_placement_is_refused(workspace_path: Path, placement: str) -> None:
    ws = init(workspace_path, durable=False)
    with pytest.raises((SubmissionError, InvalidDocumentError, ValueError)):
        submit_jobs(ws, [JobSpec(minimal_job(), placement)])
    assert not _markers(ws)


def test_payload_copy_keeps_files_and_source(tmp_path: Path, workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    job = minimal_job()
    payload = _payload(tmp_path, job, {"files/runner": "#!/bin/sh\n"})
    os.chmod(payload / "files/runner", 0o755)
    result = Submitter(ws).submit_payload(payload, "proj")
    placed = workspace_path / "proj" / result.job_key
    assert (placed / "files/runner").read_text() == "#!/bin/sh\n"
    assert os.access(placed / "files/runner", os.X_OK)
    assert payload.is_dir()


def test_payload_move_consumes_the_source(tmp_path: Path, workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    payload = _payload(tmp_path, minimal_job())
    result = Submitter(ws).submit_payload(payload, "proj", move=True)
    assert not payload.exists()
    assert (workspace_path / "proj" / result.job_key / "job.json").is_file()


def test_a_payload_with_a_symlink_is_refused(tmp_path: Path, workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    payload = _payload(tmp_path, minimal_job())
    (payload / "link").symlink_to("/etc/passwd")
    with pytest.raises(UnsafePathError, match="symlink"):
        Submitter(ws).submit_payload(payload, "proj")
    assert not _markers(ws)


def test_a_payload_whose_job_json_is_a_symlink_is_refused(tmp_path: Path, workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    payload = tmp_path / "p"
    payload.mkdir()
    real = tmp_path / "real.json"
    real.write_text(json.dumps(minimal_job()))
    (payload / "job.json").symlink_to(real)
    with pytest.raises(UnsafePathError):
        Submitter(ws).submit_payload(payload, "proj")


_SCENARIO = """
import json, sys
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.publish._submit import JobSpec, Submitter
ws = attach({root!r})
Submitter(ws).{call}
"""


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("mode", ["spec", "copy", "move"])
def test_every_crash_during_submission_is_completed_by_a_retry(
    tmp_path: Path, durable: bool, mode: str
) -> None:
    """Stop the submitting process after each of its mutations; a retried submission must converge."""
    job = minimal_job()

    def scenario(root: Path, source: Path) -> str:
        call = {
            "spec": f"submit_spec(JobSpec(json.loads({json.dumps(json.dumps(job))}), 'proj/a'))",
            "copy": f"submit_payload({str(source)!r}, 'proj/a')",
            "move": f"submit_payload({str(source)!r}, 'proj/a', move=True)",
        }[mode]
        return _SCENARIO.format(root=str(root), call=call)

    def fresh(name: str) -> tuple[Workspace, Path]:
        ws = init(tmp_path / name, durable=durable)
        source = tmp_path / f"{name}-payload"
        source.mkdir()
        (source / "job.json").write_text(json.dumps(job))
        (source / "files").mkdir()
        (source / "files" / "runner").write_text("#!/bin/sh\n")
        return ws, source

    ws, source = fresh("trace")
    mutations = count_mutations(scenario(ws.root, source), tmp_path / "trace.log")
    assert len(mutations) >= 4  # payload placement and marker publication at least
    for after in range(1, len(mutations) + 1):
        ws, source = fresh(f"crash-{after}")
        run_crashing(scenario(ws.root, source), after)
        ws = attach(ws.root)
        submitter = Submitter(ws)
        if mode == "spec":
            submitter.submit_spec(JobSpec(job, "proj/a"))
        elif source.exists():
            submitter.submit_payload(source, "proj/a", move=mode == "move")
        else:  # the moved payload was already placed before the crash: resubmit from its new home
            placed = ws.root / "proj/a" / f"silicon-relax--{job['id']}"
            submitter.submit_payload(placed, "proj/a")
        key = f"silicon-relax--{job['id']}"
        assert _markers(ws) == [ws.control / f"state/submitted/proj/a/{key}.p500.g0.init"], after
        assert json.loads((ws.root / "proj/a" / key / "job.json").read_text()) == job, after


def test_in_memory_files_get_their_modes(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    spec = JobSpec(
        minimal_job(),
        "p",
        files={"runner": b"#!/bin/sh\n", "data/in.txt": b"x"},
        executables=frozenset({"runner"}),
    )
    [result] = submit_jobs(ws, [spec])
    placed = workspace_path / "p" / result.job_key
    assert os.access(placed / "runner", os.X_OK)
    assert not os.access(placed / "data/in.txt", os.X_OK)
    assert (placed / "data/in.txt").read_bytes() == b"x"


def test_a_batch_is_validated_whole_before_anything_is_written(workspace_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    before = _inodes(workspace_path)
    batch = [
        JobSpec(minimal_job(), "p"),
        JobSpec(minimal_job(priority=1000), "p"),
        JobSpec(minimal_job(), "p"),
    ]
    with pytest.raises(SubmissionError, match="priority"):
        submit_jobs(ws, batch)
    assert _inodes(workspace_path) == before


@pytest.mark.parametrize("threads", [1, 4])
def test_threaded_batches_return_results_in_order(workspace_path: Path, threads: int) -> None:
    ws = init(workspace_path, durable=False)
    jobs = [minimal_job() for _ in range(40)]
    results = submit_jobs(ws, [JobSpec(job, f"p/{i % 3}") for i, job in enumerate(jobs)], threads=threads)
    assert [r.job_id for r in results] == [job["id"] for job in jobs]
    assert len(_markers(ws)) == 40
    assert not list(ws.tmp_dir.iterdir())


def test_a_payload_submitted_with_another_initial_step_keeps_its_own_job_json(
    workspace_path: Path, tmp_path: Path
) -> None:
    """``job debug --step``: the submitted copy starts at the step asked for, the source is unchanged."""
    ws = init(workspace_path, durable=False)
    job = minimal_job()
    payload = _payload(tmp_path, job, {"files/runner": "#!/bin/sh\n"})
    source = (payload / "job.json").read_bytes()
    result = Submitter(ws).submit_payload(payload, "debug", initial_step="relax")
    placed = json.loads((workspace_path / "debug" / result.job_key / "job.json").read_text())
    assert placed == {**job, "initial_step": "relax"}
    assert (payload / "job.json").read_bytes() == source
    assert (workspace_path / "debug" / result.job_key / "files" / "runner").read_text() == "#!/bin/sh\n"


def test_an_invalid_initial_step_is_refused_naming_the_payload(workspace_path: Path, tmp_path: Path) -> None:
    ws = init(workspace_path, durable=False)
    payload = _payload(tmp_path, minimal_job())
    with pytest.raises(InvalidDocumentError, match="initial_step"):
        Submitter(ws).submit_payload(payload, "debug", initial_step="not a step/")
    assert _markers(ws) == [] and not (workspace_path / "debug").exists()
