"""An acknowledged detach, stopped after each of its mutations in turn, converges on a rerun.

The template is a workspace whose one job already succeeded. The scenario is one process doing what a
detach of a served workspace does: a manager starts there, the detach request is published (what
``workspace detach`` writes), and the manager, noticing it at its next rescan, acknowledges and stops.
It is traced once to learn its mutations, then for EVERY k a fresh copy is stopped right after
mutation k (``os._exit``: the manager's process is gone, as after a SIGKILL). Recovery is what an
operator does: run ``workspace detach`` again (the same request when it was published, a new one
otherwise). The workspace must then be quiescent — a manager that died before acknowledging is
provably gone (DECISIONS D17), so it is not waited for — nothing held, the request in place, and every
acknowledgement naming that request.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.manager._detach import detach_quiescence, read_request, request_detach
from httk.workflow.protocol._jsonio import read_json_object

from tests.crashkit import crash_at_every_traced_point
from tests.transferkit import jobs_in, transfer_workspace

SCENARIO = """
from pathlib import Path
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.manager._detach import request_detach
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
root = Path({root!r}) / "ws"
manager = Manager(attach(root), ManagerConfig(idle=True))
manager.start()
request_detach(attach(root))
summary = manager.run(rescan_interval=0.0)
assert summary.exit_reason == "detached", summary.exit_reason
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("detach-template")
    ws = transfer_workspace(root / "ws")
    jobs_in(ws, root / "scratch", 1)
    ws.close()
    # In a process of its own, which is gone once it is done: like every manager but the scenario's.
    code = f"import pathlib, tests.transferkit as kit; kit.run_manager(pathlib.Path({str(root / 'ws')!r}))"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
    return root


def recover(root: Path) -> None:
    request_detach(attach(root / "ws"))  # `workspace detach` run again


def outcome(root: Path) -> dict[str, Any]:
    ws = attach(root / "ws", writable=False)
    request = read_request(ws.root)
    assert request is not None
    detach_id = str(request["detach_id"])
    quiescence = detach_quiescence(ws, detach_id)
    acknowledged = {
        str(read_json_object(path, document="detached.json")["detach_id"])
        for path in ws.managers_dir.glob("*/detached.json")
    }
    return {
        "quiescent": quiescence.quiescent,
        "waiting_for": quiescence.waiting_for,
        "held": quiescence.held,
        "acknowledgements name the request": acknowledged <= {detach_id},
    }


def test_a_crash_at_any_mutation_of_a_detach_and_its_acknowledgement_converges_on_rerun(
    template: Path, tmp_path: Path
) -> None:
    expected, failures, points = crash_at_every_traced_point(template, tmp_path, SCENARIO, recover, outcome)
    assert failures == []
    paths = [line.split("\t")[2] for line in points]
    assert any(path.endswith("/detach.json") for path in paths), points  # the request's publication
    assert any(path.endswith("/detached.json") for path in paths), points  # and the acknowledgement
    assert expected == {
        "quiescent": True,
        "waiting_for": (),
        "held": {},
        "acknowledgements name the request": True,
    }
    reference = attach(tmp_path / "reference" / "ws", writable=False)
    assert len(list(reference.managers_dir.glob("*/detached.json"))) == 1  # the reference acknowledged
