"""``engine/_slurm_resources``: each rule of spec/03's SLURM table, memory units, fallbacks, warnings.

The function is pure, so every case is an environment mapping; how a manager run uses it (derived values
in the banner and manifest, the command line overriding them, warnings on the console) is tested in
``tests/cli/test_manager_cmd.py``.
"""

from __future__ import annotations

import pytest
from httk.workflow.engine.manager._run import merged, slurm_capacities

JOB = {"SLURM_JOB_ID": "4711"}


def test_nothing_is_derived_outside_an_allocation() -> None:
    environ = {"SLURM_NTASKS": "8", "SLURM_GPUS": "2", "SLURM_MEM_PER_NODE": "1000"}

    assert slurm_capacities(environ) == ({}, [])


def test_an_allocation_without_the_variables_advertises_nothing() -> None:
    assert slurm_capacities(JOB) == ({}, [])


def test_every_rule_of_the_table() -> None:
    environ = {
        **JOB,
        "SLURM_NTASKS": "8",
        "SLURM_GPUS": "2",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_MEM_PER_CPU": "4000",
        "SLURM_CPUS_PER_TASK": "3",
        "SLURM_MEM_PER_NODE": "999999",  # ignored: the per-CPU rule applies
    }

    assert slurm_capacities(environ) == (
        {"procs": 8, "gpus": 2, "nodes": 2, "mem": 4000 * 3 * 8},
        [],
    )


def test_mem_per_cpu_defaults_to_one_cpu_per_task() -> None:
    environ = {**JOB, "SLURM_NTASKS": "4", "SLURM_MEM_PER_CPU": "2000"}

    assert slurm_capacities(environ) == ({"procs": 4, "mem": 8000}, [])


def test_mem_per_node_is_the_fallback_without_mem_per_cpu() -> None:
    environ = {**JOB, "SLURM_JOB_NUM_NODES": "3", "SLURM_MEM_PER_NODE": "64000"}

    assert slurm_capacities(environ) == ({"nodes": 3, "mem": 192000}, [])


@pytest.mark.parametrize(
    ("value", "megabytes"),
    [("2000", 2000), ("2000M", 2000), ("2000m", 2000), ("4G", 4096), ("2048K", 2), ("1023K", 0)],
)
def test_memory_is_recorded_in_megabytes(value: str, megabytes: int) -> None:
    environ = {**JOB, "SLURM_JOB_NUM_NODES": "1", "SLURM_MEM_PER_NODE": value}

    assert slurm_capacities(environ)[0]["mem"] == megabytes


def test_a_typed_gpu_count_is_read_as_its_count() -> None:
    assert slurm_capacities({**JOB, "SLURM_GPUS": "a100:4"}) == ({"gpus": 4}, [])


@pytest.mark.parametrize(
    ("missing", "left"),
    [
        ("SLURM_NTASKS", {"gpus": 1, "nodes": 2}),  # mem per CPU needs the task count too
        ("SLURM_JOB_NUM_NODES", {"procs": 4, "gpus": 1, "mem": 4000}),
        ("SLURM_GPUS", {"procs": 4, "nodes": 2, "mem": 4000}),
    ],
)
def test_a_missing_variable_omits_only_what_needs_it(missing: str, left: dict[str, int]) -> None:
    environ = {
        **JOB,
        "SLURM_NTASKS": "4",
        "SLURM_GPUS": "1",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_MEM_PER_CPU": "1000",
    }
    del environ[missing]

    assert slurm_capacities(environ) == (left, [])


def test_a_missing_node_count_omits_the_per_node_memory() -> None:
    assert slurm_capacities({**JOB, "SLURM_MEM_PER_NODE": "64G"}) == ({}, [])


@pytest.mark.parametrize(
    ("variable", "value", "left"),
    [
        ("SLURM_NTASKS", "four", {"gpus": 1, "nodes": 2}),
        ("SLURM_NTASKS", "-4", {"gpus": 1, "nodes": 2}),
        ("SLURM_GPUS", "1.5", {"procs": 4, "nodes": 2, "mem": 12000}),
        ("SLURM_JOB_NUM_NODES", "2(x3)", {"procs": 4, "gpus": 1, "mem": 12000}),
        ("SLURM_MEM_PER_CPU", "3T", {"procs": 4, "gpus": 1, "nodes": 2}),  # no fallback: it is present
        ("SLURM_CPUS_PER_TASK", "", {"procs": 4, "gpus": 1, "nodes": 2}),
    ],
)
def test_invalid_input_omits_only_that_capacity_and_is_warned_once(
    variable: str, value: str, left: dict[str, int]
) -> None:
    environ = {
        **JOB,
        "SLURM_NTASKS": "4",
        "SLURM_GPUS": "1",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_MEM_PER_CPU": "1000",
        "SLURM_CPUS_PER_TASK": "3",
        "SLURM_MEM_PER_NODE": "64000",
    }
    environ[variable] = value

    capacities, warnings = slurm_capacities(environ)

    assert capacities == left
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"ignoring {variable}={value!r}: not ")


def test_surrounding_whitespace_is_tolerated() -> None:
    assert slurm_capacities({**JOB, "SLURM_NTASKS": " 16\n"}) == ({"procs": 16}, [])


def test_command_line_values_override_derived_ones() -> None:
    derived, _ = slurm_capacities({**JOB, "SLURM_NTASKS": "8", "SLURM_GPUS": "2"})

    assert merged(derived, {"procs": 4, "licenses": 1}) == {"procs": 4, "gpus": 2, "licenses": 1}
