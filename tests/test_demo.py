"""The README's demo command runs end to end (the same script ``./dev demo`` runs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_demo_runs_every_job_to_its_end(tmp_path: Path) -> None:
    # no HTTK_CONFIG_HOME or HTTK_DATA_HOME: the demo must keep its names out of the user's own registry
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("HTTK_CONFIG_HOME", "HTTK_DATA_HOME")},
        "HOME": str(home),
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
    assert len([p for p in succeeded if p not in ("v1", "vasp", "plans")]) == 11
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
    _the_plan_completed_then_its_amendment_cascaded(tmp_path / "demo", result.stdout, succeeded)
    # one relaxation carried to a second workspace: counted as transferring until imported, its
    # history read across the move, the source's bundle retired
    cluster = tmp_path / "demo-cluster"
    assert re.search(r"^transferring +1$", result.stdout, re.MULTILINE)
    assert len(list((cluster / "vasp").glob("si-relax--*/run"))) == 1
    assert re.search(r"succeeded -> transferring .* reason=transfer_detach", result.stdout)
    assert re.search(r"transferring -> succeeded .* reason=transfer_import", result.stdout)
    assert re.search(r"  retired +si-relax--\S+ +vasp$", result.stdout, re.MULTILINE)
    # the names it registered are in a registry of its own, which it names; the user's is untouched
    assert not (home / ".config" / "httk").exists()
    [registry] = re.findall(r"registered in HTTK_CONFIG_HOME=(\S+)$", result.stdout, re.MULTILINE)
    for name, directory in [("demo", tmp_path / "demo"), ("demo-cluster", cluster)]:
        entry = json.loads((Path(registry) / "workspaces" / f"{name}.json").read_text())
        assert Path(entry["path"]) == directory


def _the_plan_completed_then_its_amendment_cascaded(ws: Path, stdout: str, succeeded: list[str]) -> None:
    """The four-stage plan: complete at version 1; after one relaxation's parameter_change, the
    relaxation, the static run after it and the analysis run again as -v2 jobs, the other relaxation
    does not, the old jobs stay, and progress.log says each change once."""
    for version in (1, 2):
        assert (
            f"plan si-study version {version}: coordinator paused\n  plan complete\n  4 completed\n" in stdout
        )
    assert succeeded.count("plans") == 7  # four stage jobs, then three again; the coordinator is paused
    after = stdout[stdout.index("plan si-study version 2") :]
    for stage, tag in [
        ("relax-large", "relax-large-v2"),
        ("relax-small", "relax-small"),
        ("static-large", "static-large-v2"),
        ("analysis", "analysis-v2"),
    ]:
        assert re.search(rf"^{stage} +completed +{tag}--", after, re.MULTILINE), stage
    [stages] = (ws / "plans" / "si-study").glob("si-study--*.stages")
    assert sorted(p.name.split("--")[0] for p in stages.iterdir()) == [
        "analysis", "analysis-v2", "relax-large", "relax-large-v2", "relax-small", "static-large",
        "static-large-v2",
    ]  # fmt: skip
    for suffix in ("", "-v2"):  # each static run started from its own relaxation's CONTCAR
        [relax] = stages.glob(f"relax-large{suffix}--*")
        [static] = stages.glob(f"static-large{suffix}--*")
        assert (static / "files" / "POSCAR").read_bytes() == (relax / "data" / "CONTCAR").read_bytes()
    [analysis] = stages.glob("analysis-v2--*")
    assert "static-large  static  E0/atom = " in (analysis / "logs" / "stdio.log").read_text()
    [plan_dir] = (ws / "plans" / "si-study").glob("si-study--*[0-9a-f]/plan")
    lines = (plan_dir / "progress.log").read_text().splitlines()
    [amendment] = [line for line in lines if "amendment amend-1" in line]
    assert amendment.endswith("invalidated: relax-large, static-large, analysis")
    for stage, runs in [("relax-large", 2), ("relax-small", 1), ("static-large", 2), ("analysis", 2)]:
        assert sum(f"stage {stage} (" in line and "-> completed (" in line for line in lines) == runs, stage
        assert sum(f"stage {stage} (" in line and line.endswith("-> ready") for line in lines) == runs, stage
        assert (
            sum(f"stage {stage} (" in line and line.endswith("-> invalidated") for line in lines) == runs - 1
        )
    assert sum(line.endswith("plan si-study: plan complete") for line in lines) == 2
    state = json.loads((plan_dir / "workflow-state.json").read_text())
    assert (state["version"], [stage["status"] for stage in state["stages"]]) == (2, ["completed"] * 4)
    assert state["amendments"][0]["changes"] == {
        "parameters": {"vasp.energy_tolerance": {"old": 0.01, "new": 0.005}}
    }
