"""The coordinator's book: which job each stage has had, and what was last seen of it.

Kept as the coordinator's job state (``.httk-job/state.json``), saved before each outcome. Its one
subtle point is a spawn that never happened: a job is entered when the coordinator spawns it, but the
spawn is real only once the manager commits the outcome that carries it, and an attempt that saved the
book and then died is retried with the book already naming the job. So at the start of every
activation :meth:`Book.confirm` keeps a not-yet-seen job only when its payload exists -- the manager
registers a child's payload before the parent leaves committing, and never removes it -- and forgets
the others; the retried attempt then spawns that stage again.

# Invariant: a stage's current job (the last of ``jobs``) is either confirmed (its payload exists) or
# was entered by this very attempt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ._statuses import TERMINAL


class Book:
    """The stages' jobs and their last seen state (see the module docstring)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        stages = document.get("stages")
        self.stages: dict[str, dict[str, Any]] = (
            {name: dict(entry) for name, entry in stages.items()} if isinstance(stages, dict) else {}
        )
        self.inbox = int(document.get("inbox", 0))
        self.amended = int(document.get("amended", 0))
        created = document.get("created")
        self.created: str | None = created if isinstance(created, str) else None  # the first task list's

    def document(self) -> dict[str, Any]:
        """What is saved as the job state."""
        saved: dict[str, Any] = {"stages": self.stages, "inbox": self.inbox, "amended": self.amended}
        if self.created is not None:
            saved["created"] = self.created
        return saved

    def entry(self, stage: str) -> dict[str, Any]:
        """The stage's entry, made empty on first use."""
        return self.stages.setdefault(stage, {"jobs": [], "retries": 0})

    def invalidated(self, stage: str) -> bool:
        """Whether an amendment moved the stage's job aside and it has not run again since."""
        return self.current(stage) is None and "invalidated" in self.stages.get(stage, {})

    def current(self, stage: str) -> dict[str, Any] | None:
        """The stage's current job, or ``None`` when it never had one."""
        jobs = self.stages.get(stage, {}).get("jobs") or []
        return jobs[-1] if jobs else None

    def kind(self, stage: str) -> str | None:
        """The state kind last seen of the stage's current job (``None``: not seen yet, or no job)."""
        job = self.current(stage)
        return None if job is None else job.get("kind")

    def completed(self, stage: str) -> bool:
        return self.kind(stage) == "succeeded"

    def failed(self, stage: str) -> bool:
        """Whether the stage's current job failed, or the stage could not start (:meth:`unavailable`)."""
        kind = self.kind(stage)
        return (kind is not None and kind in TERMINAL and kind != "succeeded") or bool(
            self.unavailable(stage)
        )

    def unavailable(self, stage: str) -> str | None:
        """Why the stage could not start (an input from a dependency's output unreadable), if it could not."""
        if self.current(stage) is not None:
            return None
        reason = self.stages.get(stage, {}).get("unavailable")
        return reason if isinstance(reason, str) else None

    def live(self, stage: str) -> bool:
        """Whether the stage's current job may still change: it exists and was not seen terminal."""
        job = self.current(stage)
        return job is not None and job.get("kind") not in TERMINAL

    def add_job(self, stage: str, reference: Mapping[str, Any], activation: str) -> None:
        entry = self.entry(stage)
        entry.pop("invalidated", None)
        entry.pop("unavailable", None)
        entry["jobs"].append({**reference, "spawned_in": activation, "kind": None})

    def confirm(self, workspace_dir: Path, activation: str) -> list[str]:
        """Forget each job a spawn never registered (see the module docstring); return their stages."""
        forgotten = []
        for stage, entry in self.stages.items():
            jobs = entry.get("jobs") or []
            if not jobs or jobs[-1].get("kind") is not None:
                continue
            job = jobs[-1]
            payload = workspace_dir / job["placement"] / job["job_key"]
            if not (payload / "job.json").is_file():
                jobs.pop()
                forgotten.append(stage)
        return forgotten

    def observe(self, observations: Iterable[Mapping[str, Any]]) -> list[str]:
        """Take each join observation of a current job into the book; return the stages it updated."""
        by_job = {job["job_id"]: stage for stage in self.stages if (job := self.current(stage)) is not None}
        updated = []
        for observation in observations:
            stage = by_job.get(observation.get("job_id"))
            if stage is None:
                continue
            job = self.current(stage)
            assert job is not None
            if (
                job.get("generation") is not None
                and observation.get("state_generation", -1) < job["generation"]
            ):
                continue  # an older observation (a continued activation's) than the book already has
            job["kind"] = observation.get("kind")
            job["generation"] = observation.get("state_generation")
            job["record_ref"] = observation.get("record_ref")
            failure = observation.get("failure")
            job["failure"] = dict(failure) if isinstance(failure, Mapping) else None
            updated.append(stage)
        return updated

    def join_children(self) -> list[dict[str, str]]:
        """The join references of every live current job."""
        children = []
        for stage in self.stages:
            job = self.current(stage)
            if job is not None and self.live(stage):
                children.append(
                    {
                        "workspace_id": job["workspace_id"],
                        "job_id": job["job_id"],
                        "job_key": job["job_key"],
                        "placement_hint": job["placement"],
                    }
                )
        return children
