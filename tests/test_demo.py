"""The README's demo command runs end to end (the same script ``./dev demo`` runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_demo_runs_every_job_to_success(tmp_path: Path) -> None:
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
    succeeded = list((tmp_path / "demo" / ".httk-workflow" / "state" / "succeeded").rglob("*--*.p*"))
    assert len(succeeded) == 11
    # both gathers saw all three children and found the same minimum
    assert "lowest energy at strain-1" in result.stdout
    [bash_state] = (tmp_path / "demo" / "project-c").glob("bash-strains--*/.httk-job/state.json")
    assert '"best":"strain-1"' in bash_state.read_text()
    assert list((tmp_path / "demo" / "project-b").glob("carbon-relax--*/run/energy.txt"))
    # the operator's view: a diagnosis, a clean check, and a collection that only counts
    assert "answer: succeeded" in result.stdout
    assert "11 markers checked: clean" in result.stdout
    assert "dry run: would remove" in result.stdout
