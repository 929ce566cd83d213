"""Capacities a manager derives from the SLURM allocation it runs in (``spec/03``, "Resources").

Only when ``SLURM_JOB_ID`` is set; then, each rule on its own:

- ``procs`` = ``SLURM_NTASKS``
- ``gpus`` = ``SLURM_GPUS`` (a count, optionally ``TYPE:COUNT``)
- ``nodes`` = ``SLURM_JOB_NUM_NODES``
- ``mem`` = ``SLURM_MEM_PER_CPU * SLURM_CPUS_PER_TASK * SLURM_NTASKS`` (``SLURM_CPUS_PER_TASK`` 1 when
  absent); without ``SLURM_MEM_PER_CPU``, ``SLURM_MEM_PER_NODE * SLURM_JOB_NUM_NODES``

Memory is in MB: a plain integer or one with a trailing ``M``; ``G`` is multiplied by 1024 and ``K``
divided by 1024 (rounded down). A missing variable omits only the capacity that needs it; an invalid one
(not a non-negative integer) omits it too and is reported in one warning per variable. The command
line's ``--worker-resource`` values override same-named derived ones (:func:`merged`).

Pure: a function of the environment mapping it is given; the caller logs the warnings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

_INTEGER = re.compile(r"[0-9]+\Z")
_MEMORY = re.compile(r"([0-9]+)([MGK]?)\Z", re.IGNORECASE)
_GPUS = re.compile(r"(?:[^:\s]+:)?([0-9]+)\Z")


def _count(raw: str) -> int | None:
    return int(raw) if _INTEGER.match(raw) else None


def _gpus(raw: str) -> int | None:
    match = _GPUS.match(raw)
    return None if match is None else int(match.group(1))


def _megabytes(raw: str) -> int | None:
    match = _MEMORY.match(raw)
    if match is None:
        return None
    amount, unit = int(match.group(1)), match.group(2).upper()
    return amount * 1024 if unit == "G" else amount // 1024 if unit == "K" else amount


Kind = tuple[Callable[[str], int | None], str]
"""How to read one kind of variable, and what a valid value is (for the warning)."""
COUNT: Kind = (_count, "a non-negative integer")
GPUS: Kind = (_gpus, "a GPU count (optionally TYPE:COUNT)")
MEMORY: Kind = (_megabytes, "an amount of memory in MB (optionally with a K, M or G suffix)")


class _Reader:
    """Reads SLURM variables from one environment, warning about each invalid one once."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.warnings: list[str] = []
        self._read: dict[str, int | None] = {}

    def present(self, name: str) -> bool:
        return name in self.environ

    def get(self, name: str, kind: Kind = COUNT) -> int | None:
        """The variable's value, or ``None`` when it is absent or invalid."""
        if name not in self._read:
            raw = self.environ.get(name)
            value = None if raw is None else kind[0](raw.strip())
            if raw is not None and value is None:
                self.warnings.append(f"ignoring {name}={raw!r}: not {kind[1]}")
            self._read[name] = value
        return self._read[name]


def slurm_capacities(environ: Mapping[str, str]) -> tuple[dict[str, int], list[str]]:
    """The capacities the SLURM allocation in ``environ`` describes, and warnings about invalid input."""
    if "SLURM_JOB_ID" not in environ:
        return {}, []
    reader = _Reader(environ)
    derived: dict[str, int | None] = {
        "procs": reader.get("SLURM_NTASKS"),
        "gpus": reader.get("SLURM_GPUS", GPUS),
        "nodes": reader.get("SLURM_JOB_NUM_NODES"),
        "mem": _memory(reader),
    }
    return {label: amount for label, amount in derived.items() if amount is not None}, reader.warnings


def _memory(reader: _Reader) -> int | None:
    if reader.present("SLURM_MEM_PER_CPU"):
        per_cpu = reader.get("SLURM_MEM_PER_CPU", MEMORY)
        cpus = reader.get("SLURM_CPUS_PER_TASK") if reader.present("SLURM_CPUS_PER_TASK") else 1
        tasks = reader.get("SLURM_NTASKS")
        return None if per_cpu is None or cpus is None or tasks is None else per_cpu * cpus * tasks
    per_node = reader.get("SLURM_MEM_PER_NODE", MEMORY)
    nodes = reader.get("SLURM_JOB_NUM_NODES")
    return None if per_node is None or nodes is None else per_node * nodes


def merged(derived: Mapping[str, int], given: Mapping[str, int]) -> dict[str, int]:
    """The derived capacities with the command line's values replacing same-named ones."""
    return {**derived, **given}
