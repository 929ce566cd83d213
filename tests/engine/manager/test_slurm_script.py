"""The Slurm batch script's settings, validated and rendered (pure; the real sbatch is elsewhere)."""

from __future__ import annotations

import pytest
from httk.workflow.engine.manager._slurm import batch_options, render, time_limit_seconds
from httk.workflow.protocol import LauncherError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 5400), ("1:30", 90), ("2:00:00", 7200), ("1-0", 86400), ("1-2:30", 95400), ("0-0:0:45", 45)],
)
def test_time_limits_in_every_slurm_form(text: str, seconds: int) -> None:
    assert time_limit_seconds(text) == seconds


def test_directives_follow_the_table_and_the_drain_margin_is_at_most_half_the_limit() -> None:
    options = batch_options(
        {
            "slurm.time_limit": "4",
            "slurm.partition": "batch,debug",
            "slurm.ntasks": 32,
            "slurm.gres": "gpu:a100:2",
        }
    )

    assert options.directives == (
        ("--partition", "batch,debug"),
        ("--time", "4"),
        ("--ntasks", "32"),
        ("--gres", "gpu:a100:2"),
    )
    assert (options.time_limit_seconds, options.drain_seconds) == (240, 120)
    assert batch_options({"slurm.signal_seconds": 600}).drain_seconds == 600


def test_the_script_names_its_directives_before_its_body() -> None:
    options = batch_options({"slurm.account": "mat-sci", "slurm.time_limit": "1-00:00:00"})

    text = render(
        options, job_name="httk-manager", output="/ws/b-%j.out", header="made\nhere", body="exec x\n"
    )

    assert text == (
        "#!/bin/bash\n#SBATCH --job-name=httk-manager\n#SBATCH --output=/ws/b-%j.out\n#SBATCH --no-requeue\n"
        "#SBATCH --signal=B:TERM@300\n#SBATCH --account=mat-sci\n#SBATCH --time=1-00:00:00\n"
        "# made\n# here\nexec x\n"
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"slurm.nodes": 0}, "the setting slurm.nodes must be a node count or MIN-MAX, not '0'"),
        ({"slurm.mem": True}, "the setting slurm.mem must be an amount of memory"),
        ({"slurm.gres": "gpu:2\n#SBATCH --x"}, "the setting slurm.gres must be generic resources"),
        ({"slurm.signal_seconds": 0}, "the setting slurm.signal_seconds must be an integer from 1 to 65535"),
        ({"slurm.qos": "high"}, "unknown Slurm setting 'slurm.qos'"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(settings: dict[str, object], message: str) -> None:
    with pytest.raises(LauncherError, match="^" + message.replace("(", r"\(")):
        batch_options(settings)
