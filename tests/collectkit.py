"""A workspace for ``collect``: every way a finished job's record can be whole or degraded, run for real.

One transactional workspace, run by the real manager: a Python SDK runner in each payload commits (or
does not commit) a ``data/results.json`` in its succeed transaction as the job's ``mode`` input says.
Every way a record can be whole or degraded has a job (:data:`JOBS`): results, results with their own
warnings, a document that is not JSON, none at all, a planted symbolic link, a failure, a cancellation,
a job without transactional data -- and one job that has not finished, which yields no record.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

from httk.workflow.engine.core._workspace import init
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._submit import Submitter
from httk.workflow.engine.requests._requests import publish_request

from tests.conftest import minimal_job
from tests.runners import current_marker, job_key

HTTK = str(Path(sys.executable).parent / "httk")
RESULTS = {"format": "demo-results", "energy": {"e0": -10.5, "unit": "eV"}, "forces": [[0, 0, 1]], "ok": True}
RUNNER = f"""#!{sys.executable}
import json
from httk.workflow.sdk import Attempt, dispatch, step

RESULTS = {RESULTS!r}


@step
def main(a: Attempt) -> None:
    mode = a.inputs["mode"]
    if mode == "fails":
        a.fail("demo.bad", "the input was unphysical")
        return
    if mode in ("results", "warned", "not-json"):
        document = dict(RESULTS, warnings=["values from a fallback"]) if mode == "warned" else RESULTS
        text = b"{{not json" if mode == "not-json" else json.dumps(document).encode()
        a.transaction().put_file("results.json", text)
    a.succeed(message=mode)


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""
# label -> (placement, workflow, data mode, extra job.json members)
JOBS: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "results": ("c/a", "demo-a", "transactional", {}),
    "warned": ("c/a", "demo-a", "transactional", {}),
    "not-json": ("c/b", "demo-a", "transactional", {}),
    "missing": ("c/b", "demo-b", "transactional", {}),
    "linked": ("c/b", "demo-b", "transactional", {}),
    "fails": ("c/b", "demo-b", "transactional", {}),
    "plain": ("c/b", "demo-b", "none", {}),
    "cancelled": ("c/d", "demo-a", "transactional", {"claim": {"pool": "gpu", "required_capabilities": []}}),
    "unfinished": ("c/d", "demo-a", "transactional", {"claim": {"pool": "gpu", "required_capabilities": []}}),
}


def build(root: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The workspace below ``root`` with the jobs of :data:`JOBS` run to their ends; its jobs by label."""
    ws = init(root / "ws", durable=False, extensions=("transactional-data-v1",))
    jobs = {}
    for label, (placement, workflow, data_mode, extra) in JOBS.items():
        job = minimal_job(
            runner={"backend": "path", "path": "runner.py"},
            initial_step="main",
            tag=label,
            workflow=workflow,
            data={"mode": data_mode},
            inputs={"mode": label},
            **extra,
        )
        source = root / label
        source.mkdir()
        (source / "job.json").write_text(json.dumps(job))
        (source / "runner.py").write_text(RUNNER)
        (source / "runner.py").chmod(stat.S_IRWXU)
        Submitter(ws).submit_payload(source, placement)
        jobs[label] = job
    Manager(ws, ManagerConfig()).run()
    cancelled = current_marker(ws, jobs["cancelled"], "c/d")
    publish_request(ws, "c/d", cancelled.job_key, "cancel", operator="ann", reason="not needed")
    Manager(ws, ManagerConfig()).run()
    ws.close()
    data = root / "ws" / "c/b" / job_key(jobs["linked"]) / "data"
    data.mkdir(exist_ok=True)
    (data / "results.json").symlink_to(root / "results" / "job.json")
    return root / "ws", jobs
