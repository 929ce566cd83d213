#!/usr/bin/env python3
"""A Python @step workflow: relax a structure at three strains in parallel, then fit the minimum.

``prepare`` spawns one labelled child per strain and waits for all of them; each child runs ``strain``
in its own workdir; ``gather`` — the parent's next activation, after the join — reads every child's
result through the join's ``children`` and publishes the best strain.
"""

from httk.workflow.sdk import Attempt, dispatch, step

STRAINS = (-0.02, 0.0, 0.02)


@step
def prepare(a: Attempt) -> None:
    for index, strain in enumerate(STRAINS):
        a.spawn("strain", label=f"strain-{index}", inputs={"strain": strain})
    a.wait("gather", message=f"relaxing at {len(STRAINS)} strains")


@step
def strain(a: Attempt) -> None:
    x = float(a.inputs["strain"])
    energy = -5.4 + 40.0 * (x - 0.004) ** 2  # a stand-in for the real calculation
    (a.workdir / "energy.txt").write_text(f"{energy:.6f}\n")
    print(f"strain {x:+.3f}: E = {energy:.6f} eV")
    a.succeed()


@step
def gather(a: Attempt) -> None:
    energies = {}
    for child in a.children:
        text = (a.workspace_dir / child["workdir_path"] / "energy.txt").read_text()
        energies[child["label"]] = float(text)
    best = min(energies, key=energies.__getitem__)
    a.save_state({"energies": energies, "best": best})
    print(f"lowest energy at {best}: {energies[best]:.6f} eV")
    a.succeed(message=f"lowest energy at {best}")


if __name__ == "__main__":
    raise SystemExit(dispatch())
