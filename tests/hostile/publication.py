"""A real published attempt to break: a running job, its prepared attempt, an outcome the SDK published.

:func:`published_attempt` builds, in a fresh workspace, one job moved to ``running`` by the engine's own
moves (``tests/jobkinds.py``), prepares its attempt with the manager's ``prepare_attempt`` (so
context.json is what a manager writes), and has the Python SDK publish through that context: two
children and a join, or a transaction into data/, or a plain ``succeed``. Every document of the
publication is then the real thing, and a test replaces one of them with hostile bytes and runs the
manager's step 1 (:meth:`Published.refusal`, read-only) on it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._frames import Frame, committing
from httk.workflow.engine.core._jobs import LoadedJob
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, init
from httk.workflow.engine.manager import _launch
from httk.workflow.engine.manager._attempt import prepare_attempt
from httk.workflow.engine.manager._commit import validate_publication
from httk.workflow.engine.manager._state import ManagerState
from httk.workflow.engine.publish._outcome import UnusableOutcomeError, read_outcome, validate_outcome
from httk.workflow.sdk import Attempt

from tests.jobkinds import frame_of, job_in, new_state
from tests.runners import publish_scripted_runner, scripted_job

PUBLICATIONS = ("children", "transaction", "plain")


@dataclass(frozen=True)
class Published:
    """One running job whose attempt has published an outcome, and the manager state that judges it."""

    state: ManagerState
    marker: MarkerLocation
    frame: Frame
    job: LoadedJob
    control_dir: Path

    @property
    def ready(self) -> Path:
        return self.control_dir / "outcome.ready"

    def validate(self) -> dict[str, Any]:
        """The manager's commit step 1 on what is published now; raises what the manager would catch."""
        outcome = read_outcome(self.control_dir)
        assert outcome is not None, "nothing is published"
        outcome, _notes = validate_outcome(
            outcome,
            job_id=self.marker.job_id,
            activation_id=self.frame["activation_id"],
            attempt_id=self.frame["attempt_id"],
        )
        outcome, _spawned = validate_publication(self.state, self.marker, self.frame, self.job, outcome)
        return outcome

    def refusal(self) -> str | None:
        """The failure message the manager would commit for what is published now; ``None``: accepted."""
        try:
            self.validate()
        except UnusableOutcomeError as exc:
            fence = committing(
                self.frame, manager_id="m", writer_id="w", outcome=None, defect=str(exc), spawned=[]
            )
            return str(fence["failure"]["message"])
        return None


def published_attempt(base: Path, publication: str) -> Published:
    """A workspace at ``base/ws`` holding one running job whose attempt published ``publication``."""
    assert publication in PUBLICATIONS, publication
    workspace = init(base / "ws", durable=False, extensions=("transactional-data-v1",))
    runner = publish_scripted_runner(workspace, base)
    data = {"mode": "transactional"} if publication == "transaction" else {"mode": "none"}
    state = new_state(workspace.root)
    marker = job_in(state, Kind.RUNNING, job=scripted_job({}, runner, data=data), process={})
    frame = frame_of(state, marker)
    job = state.jobs.get(marker)
    prepared = prepare_attempt(_launch.plan(state, marker, frame, job))
    attempt = Attempt.load(
        prepared.control_dir / "context.json", environ={**os.environ, "HTTK_WORKFLOW_DURABLE": "0"}
    )
    if publication == "children":
        attempt.spawn("relax", label="branch-a", inputs={"strain": -1})
        attempt.spawn("relax", label="branch-b", inputs={"strain": 1})
        attempt.wait("collect", message="two branches")
    elif publication == "transaction":
        payload = base / "energy.json"
        payload.write_text('{"energy": -5.4}\n')
        transaction = attempt.transaction()
        transaction.make_dir("results")
        transaction.put_file("results/energy.json", payload)
        attempt.advance("collect")
    else:
        attempt.succeed(message="done")
    published = Published(state, marker, frame, job, prepared.control_dir)
    published.validate()  # the real publication is accepted: what a test breaks was valid
    return published
