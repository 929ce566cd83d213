"""The relaxation plot: the energy of every ionic step, run after run, with what happened between runs.

The steps come from the job's state (``.httk-job/state.json``, member ``vasp``), which holds every run --
repeats, remedied runs, interrupted ones -- so a running or failed job can be plotted too. Each run is
one line of its own colour over a common axis of ionic steps; a dashed line before each run after the
first says why it happened (a repeat, the remedy applied after the previous run's error, a restart).
Drawn with matplotlib (the ``[plot]`` extra) without a display (the Agg backend).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def run_label(run: Mapping[str, Any], previous: Mapping[str, Any] | None) -> str:
    """What the dashed line before ``run`` says: why the run happened."""
    if previous is None:
        return f"run {run['index']} ({run['stage']})"
    outcome = previous.get("outcome")
    if previous.get("remedy"):
        cause = f"{(previous.get('problems') or ['?'])[0]} → {previous['remedy']}"
    elif outcome == "repeat":
        cause = "repeat"
    elif outcome in ("interrupted", "stale", "stopped"):
        cause = f"restart after {outcome}"
    elif run["stage"] != previous["stage"]:
        cause = run["stage"]
    else:
        cause = outcome or "again"
    return f"run {run['index']}: {cause}"


def draw(runs: Sequence[Mapping[str, Any]], output: Path, *, title: str) -> int:
    """Write the plot of ``runs`` (job state's run records) to ``output`` (PNG); the steps drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5), dpi=120)
    start = 0
    drawn = 0
    previous: Mapping[str, Any] | None = None
    for run in runs:
        steps = [step for step in run.get("ionic_steps", []) if step.get("energy") is not None]
        x = [start + i + 1 for i in range(len(steps))]
        if previous is not None:
            axes.axvline(start + 0.5, color="0.6", linestyle="--", linewidth=0.8)
        axes.plot(x, [s["energy"] for s in steps], marker="o", markersize=3, label=run_label(run, previous))
        start += len(steps)
        drawn += len(steps)
        previous = run
    axes.set_xlabel("ionic step (all runs)")
    axes.set_ylabel("energy E0 (eV)")
    axes.set_title(title)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(output, format="png")
    plt.close(figure)
    return drawn
