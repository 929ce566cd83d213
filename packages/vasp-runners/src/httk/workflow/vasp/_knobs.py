"""The settings a VASP step reads, each resolved through the SDK's layers, with its default.

Every knob is a setting (``Attempt.setting``): the job's input of that name first, then ``HTTK_<NAME>``
in the environment (a deployment override, or the workspace setting the manager exported), then the
workspace settings snapshot, then the default below. A value from the environment is text and is read
as the number or logical it spells.

==========================  =========  =========================================================
setting                     default    meaning
==========================  =========  =========================================================
``vasp.command``            (none)     how to start VASP; ``{procs}`` is the attempt's procs
``vasp.pseudo_library``     (none)     the POTCAR library, when a job gives no POTCAR
``vasp.pseudopotentials``   (none)     per-element POTCAR choices, ``"Fe=Fe_pv O=O"``
``vasp.timeout``            (none)     seconds one VASP run may take before the runner stops it
``vasp.stop_grace``         60         seconds between the STOPCAR and SIGTERM
``vasp.kill_grace``         30         seconds between SIGTERM and SIGKILL
``vasp.poll_seconds``       5          how often the output is checked while VASP runs
``vasp.max_repeats``        5          relaxation repeats from CONTCAR before ``vasp.nonconvergent``
``vasp.energy_tolerance``   0.01       eV per atom: consecutive relaxation runs agreeing this well
                                       have converged
``vasp.max_remedies``       10         remedies one job may apply in all
``vasp.keep_wavefunctions`` false      keep WAVECAR, CHGCAR and CHG after success
==========================  =========  =========================================================
"""

from __future__ import annotations

import math

from ._errors import VaspInputError
from ._process import command_argv
from ._record import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Setting = Callable[[str, Any], Any]


class Knobs(NamedTuple):
    """The resolved settings of one VASP step."""

    argv: list[str]
    timeout: float | None
    stop_grace: float
    kill_grace: float
    poll_seconds: float
    max_repeats: int
    energy_tolerance: float
    max_remedies: int
    keep_wavefunctions: bool


def _number(setting: Setting, name: str, default: float | None, *, minimum: float = 0.0) -> float | None:
    value = setting(name, default)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise VaspInputError(f"setting {name} must be a number, not {value!r}") from None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < minimum
    ):
        raise VaspInputError(f"setting {name} must be a number of at least {minimum:g}, not {value!r}")
    return float(value)


def _flag(setting: Setting, name: str) -> bool:
    value = setting(name, False)
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def resolve_max_remedies(setting: Setting) -> int:
    """``vasp.max_remedies`` alone (what a remedy needs; no ``vasp.command`` is looked at)."""
    return int(_number(setting, "vasp.max_remedies", 10.0) or 0)


def resolve(setting: Setting, procs: int) -> Knobs:
    """Every knob of a step; ``vasp.command`` last, so that its absence is reported once it matters.

    Raises
    ------
    VaspInputError
        A knob holds a value it cannot have.
    VaspCommandError
        ``vasp.command`` is missing or malformed.
    """
    values = {
        "stop_grace": _number(setting, "vasp.stop_grace", 60.0),
        "kill_grace": _number(setting, "vasp.kill_grace", 30.0),
        "poll_seconds": _number(setting, "vasp.poll_seconds", 5.0, minimum=0.01),
        "max_repeats": _number(setting, "vasp.max_repeats", 5.0),
        "energy_tolerance": _number(setting, "vasp.energy_tolerance", 0.01),
    }
    return Knobs(
        argv=command_argv(setting("vasp.command", None), procs),
        timeout=_number(setting, "vasp.timeout", None, minimum=1.0),
        stop_grace=values["stop_grace"] or 0.0,
        kill_grace=values["kill_grace"] or 0.0,
        poll_seconds=values["poll_seconds"] or 5.0,
        max_repeats=int(values["max_repeats"] or 0),
        energy_tolerance=values["energy_tolerance"] or 0.0,
        max_remedies=resolve_max_remedies(setting),
        keep_wavefunctions=_flag(setting, "vasp.keep_wavefunctions"),
    )
