"""Three managers replaying the same abandoned committing transaction at once converge.

A manager is stopped right after the running -> committing rename of an outcome that carries a
transaction, so the marker is committing and nothing of the transaction is applied. Its lease is made
expired (it is dead; rewriting the heartbeat stands in for the time that takes), then three managers are
started together behind a barrier file. Whatever the interleaving, the job ends succeeded exactly once,
data/ holds exactly what the transaction says, and the data generation advanced by exactly one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from httk.workflow.engine.core._workspace import attach, init
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs

from tests.conftest import minimal_job
from tests.crashkit import count_mutations, run_crashing
from tests.runners import age_heartbeats, current_marker, frame_chain, markers_of, wait_until

RUNNER = f"""#!{sys.executable}
from httk.workflow.sdk import Attempt, dispatch, step


@step
def write(a: Attempt) -> None:
    tx = a.transaction()
    tx.make_dir("results")
    for n in range(5):
        tx.put_file(f"results/{{n}}.txt", f"{{n}}\\n".encode())
    tx.make_dir("empty")
    a.succeed()


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""

MANAGER = """
import sys, os, time
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
barrier = sys.argv[2] if len(sys.argv) > 2 else None
if barrier:
    deadline = time.monotonic() + 30
    while not os.path.exists(barrier) and time.monotonic() < deadline:
        time.sleep(0.001)
Manager(sys.argv[1], ManagerConfig(lease_seconds=600.0)).run()
"""


def test_three_managers_replaying_one_abandoned_transaction_converge(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=False, extensions=("transactional-data-v1",))
    job = minimal_job(
        initial_step="write",
        data={"mode": "transactional"},
        runner={"backend": "path", "path": "runner", "arguments": []},
    )
    spec = JobSpec(job, "p", files={"runner": RUNNER.encode()}, executables=frozenset({"runner"}))
    submit_jobs(ws, [spec])
    code = MANAGER.replace("sys.argv[1]", repr(str(ws.root))).replace(
        "barrier = sys.argv[2] if len(sys.argv) > 2 else None", "barrier = None"
    )
    # Find the rename into committing in a traced run of an identical workspace, then crash right after it.
    twin = init(tmp_path / "twin", durable=False, extensions=("transactional-data-v1",))
    submit_jobs(twin, [spec])
    trace = count_mutations(code.replace(repr(str(ws.root)), repr(str(twin.root))), tmp_path / "trace")
    fence = next(
        i for i, line in enumerate(trace, 1) if "\trename\t" in line and "/state/committing/" in line
    )
    run_crashing(code, fence)
    assert current_marker(ws, job).kind.value == "committing"
    assert not (ws.payload_path("p", f"silicon-relax--{job['id']}") / "data").exists()
    age_heartbeats(ws)

    barrier = tmp_path / "go"
    managers = [
        subprocess.Popen(
            [sys.executable, "-c", MANAGER, str(ws.root), str(barrier)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    barrier.touch()
    for manager in managers:
        _out, err = manager.communicate(timeout=60)
        assert manager.returncode == 0, err

    ws = attach(ws.root)
    marker = wait_until(
        lambda: current_marker(ws, job) if current_marker(ws, job).kind.value == "succeeded" else None,
        "success",
    )
    assert [p.name for p in markers_of(ws, "succeeded")] == [str(marker.name)]
    data = ws.payload_path("p", f"silicon-relax--{job['id']}") / "data"
    assert sorted(str(p.relative_to(data)) for p in data.rglob("*")) == [
        "empty",
        "results",
        "results/0.txt",
        "results/1.txt",
        "results/2.txt",
        "results/3.txt",
        "results/4.txt",
    ]
    assert all((data / f"results/{n}.txt").read_text() == f"{n}\n" for n in range(5))
    frames = frame_chain(ws, marker)
    assert [f["kind"] for f in frames].count("running") == 1  # the step itself never ran again
    assert frames[-1]["data_generation"] == 1
