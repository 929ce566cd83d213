"""Withdrawing an acknowledged detach (``workspace attach``), stopped after each of its mutations in
turn, converges on a rerun: the workspace is served again and nothing it holds is lost.

The template is a workspace detached the way ``workspace detach`` leaves it — the request published,
its one manager's acknowledgement naming it, quiescent — with one job that succeeded before the detach
and one submitted while it was detached. The scenario is what follows ``workspace attach``: the request
withdrawn (its one mutation), then a manager serving the workspace again and running the waiting job.
It is traced once, then for EVERY k a fresh copy is stopped right after mutation k (``os._exit``, as
after a SIGKILL). Recovery is what an operator does: run ``workspace attach`` again and start a
manager, which recovers whatever the dead one held (DECISIONS D17). The outcome: no request, a
manager no longer refused, and both jobs succeeded, each exactly once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.manager._detach import read_request, refuse_detached, withdraw_detach
from httk.workflow.protocol import WorkspaceError

from tests.crashkit import crash_at_every_traced_point
from tests.runners import markers_of
from tests.transferkit import jobs_in, run_manager, transfer_workspace

DETACH = """
from pathlib import Path
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.manager._detach import request_detach
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
root = Path({root!r})
manager = Manager(attach(root), ManagerConfig(idle=True))
manager.start()
request_detach(attach(root))
assert manager.run(rescan_interval=0.0).exit_reason == "detached"
"""

SCENARIO = """
from pathlib import Path
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.manager._detach import withdraw_detach
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
root = Path({root!r}) / "ws"
assert withdraw_detach(attach(root))
summary = Manager(attach(root), ManagerConfig()).run()
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("attach-template")
    ws = transfer_workspace(root / "ws")
    jobs_in(ws, root / "scratch", 1)
    ws.close()
    here = Path(__file__).parents[2]
    # Each manager in a process of its own, gone once it is done, like every manager but the scenario's.
    code = f"import pathlib, tests.transferkit as kit; kit.run_manager(pathlib.Path({str(root / 'ws')!r}))"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=here)
    subprocess.run([sys.executable, "-c", DETACH.format(root=str(root / "ws"))], check=True, cwd=here)
    detached = attach(root / "ws")
    jobs_in(detached, root / "scratch-2", 1)  # submitted while detached: served once attached again
    detached.close()
    assert read_request(root / "ws") is not None
    return root


def recover(root: Path) -> None:
    withdraw_detach(attach(root / "ws"))  # `workspace attach` run again
    run_manager(root / "ws")


def outcome(root: Path) -> dict[str, Any]:
    ws = attach(root / "ws", writable=False)
    try:
        refuse_detached(ws.root)
        refused = None
    except WorkspaceError as exc:
        refused = str(exc)
    return {
        "request": read_request(ws.root),
        "refused": refused,
        "succeeded": len(markers_of(ws, Kind.SUCCEEDED.value)),
        "elsewhere": sum(len(markers_of(ws, kind.value)) for kind in Kind if kind is not Kind.SUCCEEDED),
    }


def test_a_crash_at_any_mutation_of_an_attach_and_the_serving_after_it_converges_on_rerun(
    template: Path, tmp_path: Path
) -> None:
    expected, failures, points = crash_at_every_traced_point(template, tmp_path, SCENARIO, recover, outcome)
    assert failures == []
    assert points[0].split("\t")[1:] == [
        "unlink",
        str(tmp_path / "reference" / "ws" / ".httk-workflow" / "detach.json"),
    ]
    assert expected == {"request": None, "refused": None, "succeeded": 2, "elsewhere": 0}
