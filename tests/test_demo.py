"""The README's demo command runs end to end (the same script ``./dev demo`` runs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_demo_runs_every_job_to_its_end(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HTTK_DEMO_WORKSPACE": str(tmp_path / "demo"),
    }
    result = subprocess.run(
        ["bash", str(ROOT / "examples" / "demo.sh")], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    # three relaxations, and two fan-out parents (Python @step and Bash) with three children each
    assert "summary: 11 succeeded, 0 failed" in result.stdout
    succeeded_dir = tmp_path / "demo" / ".httk-workflow" / "state" / "succeeded"
    succeeded = [p.relative_to(succeeded_dir).parts[0] for p in succeeded_dir.rglob("*--*.p*")]
    assert len([p for p in succeeded if p not in ("v1", "vasp")]) == 11
    assert succeeded.count("v1") == 11  # the v1 tasks, their subtasks and their subtasks' subtasks
    # both gathers saw all three children and found the same minimum
    assert "lowest energy at strain-1" in result.stdout
    [bash_state] = (tmp_path / "demo" / "project-c").glob("bash-strains--*/.httk-job/state.json")
    assert '"best":"strain-1"' in bash_state.read_text()
    assert list((tmp_path / "demo" / "project-b").glob("carbon-relax--*/run/energy.txt"))
    # the operator's view: a diagnosis, a clean check, and a collection that only counts
    assert "answer: succeeded" in result.stdout
    assert "11 markers checked: clean" in result.stdout
    assert "dry run: would remove" in result.stdout
    # the v1 tree: ten tasks imported (the live one and a name that is no v1 task name left behind),
    # run to the end with their subtasks (two levels deep), each ending as it ended or would in v1
    assert "at v1: 10 imported, 1 skipped as live" in result.stdout
    assert "not a v1 task name: ht.task.any.Si.2.start.0.unclaimed.3.waitstart" in result.stdout
    assert "summary: 22 succeeded, 4 failed" in result.stdout
    v1_placement = tmp_path / "demo" / "v1"
    assert not [p for p in v1_placement.iterdir() if p.is_symlink()]  # no view beside the payloads
    views = sorted(p.name for p in v1_placement.glob("*--*/task/ht.task.*"))  # each task dir's name
    assert views == [
        "ht.task.any.bad.relax1.0.unclaimed.3.broken",
        "ht.task.any.between.second.0.unclaimed.3.finished",
        "ht.task.any.cut.relax.0.unclaimed.3.stopped",
        "ht.task.any.done.second.0.unclaimed.3.finished",
        "ht.task.any.odd.start.0.unclaimed.3.stopped",
        "ht.task.any.parent.collect.0.unclaimed.3.finished",
        "ht.task.any.slow.start.0.unclaimed.3.timeout",
        "ht.task.any.spawner.collect.0.unclaimed.3.finished",
        "ht.task.any.twostep.second.0.unclaimed.3.finished",
        "ht.task.any.txn.step3.2.unclaimed.3.finished",
    ]
    [parent_run] = v1_placement.glob("parent--*/task/ht.task.any.parent.*/ht.run.2*")
    assert (parent_run / "collected.txt").read_text().split() == [
        "ht.task.any.sub1.gather.0.unclaimed.2.finished",
        "ht.task.any.sub2.second.0.unclaimed.2.finished",
    ]
    leaf = "ht.task.any.sub1.*/ht.run.2*/ht.task.any.leaf.second.0.unclaimed.2.finished"
    assert list(parent_run.glob(leaf))
    [txn_run] = v1_placement.glob("txn--*/task/ht.task.any.txn.*/ht.run.2*")
    assert (txn_run / "result.txt").read_text() == "result of round 2\n"  # its transaction replayed
    assert "failure    declared_failure: Task gave 'broken' as return code." in result.stdout
    assert (tmp_path / "demo-v1-tree" / "ht.task.any.twostep.start.0.unclaimed.3.waitstart").is_dir()
    # the VASP part: refused until the workspace has transactional data, then two workflows against the
    # mock, one remedied (told by its runner's events), collected, and a relaxation plotted
    assert "needs the workspace extension 'transactional-data-v1'" in result.stderr
    assert "extension transactional-data-v1 enabled" in result.stdout
    assert "summary: 24 succeeded, 4 failed" in result.stdout and succeeded.count("vasp") == 1
    assert re.search(r"relax #1  vasp\.error  run 1: zpotrf", result.stdout)
    assert re.search(r"relax #1  vasp\.remedy  zpotrf: symmetry off \(ISYM = 0\)", result.stdout)
    assert "2 finished jobs: 2 with results, 0 degraded" in result.stdout
    assert re.search(r"si-relax-static static E0/atom = -\d+\.\d+ eV, VASP 6\.4\.2", result.stdout)
    plot = tmp_path / "demo-si-relax-static.png"
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert re.search(rf"{plot}: \d+ ionic steps of \d+ runs", result.stdout)
    # one relaxation carried to a second workspace: counted as transferring until imported, its
    # history read across the move, the source's bundle retired
    cluster = tmp_path / "demo-cluster"
    assert re.search(r"^transferring +1$", result.stdout, re.MULTILINE)
    assert len(list((cluster / "vasp").glob("si-relax--*/run"))) == 1
    assert re.search(r"succeeded -> transferring .* reason=transfer_detach", result.stdout)
    assert re.search(r"transferring -> succeeded .* reason=transfer_import", result.stdout)
    assert re.search(r"  retired +si-relax--\S+ +vasp$", result.stdout, re.MULTILINE)
