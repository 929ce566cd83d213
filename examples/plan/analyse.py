#!/usr/bin/env python3
"""The analysis stage of examples/plan/si-study.json: compare the energies its three dependencies found.

Each input is the payload path of a results.json the coordinator copied from a dependency's job when it
started this stage (an input ``{"from_stage": ..., "path": "data/results.json"}`` in the plan).
"""

import json

from httk.workflow.sdk import Attempt, dispatch, step


@step
def main(a: Attempt) -> None:
    energies = {}
    for stage in ("relax-large", "relax-small", "static-large"):
        results = json.loads((a.job_dir / a.inputs[stage]).read_text())
        energies[stage] = results["energy"]["energy_per_atom"]
        volume = results["structure"]["volume"]
        kind = results["calculation"]
        print(f"{stage:<13} {kind:<7} E0/atom = {energies[stage]:.6f} eV, V = {volume:.3f} A^3")
    spread = abs(energies["relax-large"] - energies["relax-small"])
    (a.workdir / "summary.json").write_text(json.dumps({"energies": energies, "spread": spread}) + "\n")
    print(f"the two relaxations differ by {spread * 1000:.1f} meV/atom")
    a.succeed(message=f"the relaxations differ by {spread * 1000:.1f} meV/atom")


if __name__ == "__main__":
    raise SystemExit(dispatch())
