"""``python -m httk.workflow.v1.vasptools``: the Python half of v1's ``vasptools.sh``, one subcommand a call.

The Bash helpers old templates source (``$HTTK_DIR/Execution/tasks/vasp/vasptools.sh``) do the file
work themselves and call these for what the VASP package knows:

=========================  =======================================================================
``potcar LIBRARY``         VASP_PREPARE_POTCAR: POTCAR from POSCAR's species (:mod:`._potcar`)
``run TIMEOUT -- CMD...``  VASP_RUN_CONTROLLED: VASP run once and diagnosed (:mod:`._run`)
``fix`` / ``adjust``       VASP_INPUTS_FIX_ERROR / VASP_INPUTS_ADJUST in the current directory
                           (:mod:`._remedy`)
=========================  =======================================================================

The exit status is the helper's v1 return code. A helper that cannot do its work (the VASP package is
not installed, a file it needs is missing or does not parse) prints why on stderr and exits with its
failure code: 1 for ``potcar``, 2 for ``run`` (VASP did not finish), 3 for ``fix`` (give up), 1 for
``adjust`` (nothing adjusted).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from httk.workflow.v1._errors import V1Error

_FAILURE = {"potcar": 1, "run": 2, "fix": 3, "adjust": 1}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m httk.workflow.v1.vasptools")
    commands = parser.add_subparsers(dest="command", required=True)
    potcar = commands.add_parser("potcar")
    potcar.add_argument("library", type=Path)
    run = commands.add_parser("run")
    run.add_argument("timeout", type=float)
    run.add_argument("argv", nargs=argparse.REMAINDER)
    commands.add_parser("fix")
    commands.add_parser("adjust")
    options = parser.parse_args(argv)
    try:
        return _dispatch(options)
    except (V1Error, OSError, ValueError) as exc:
        return _failed(options.command, exc)
    except Exception as exc:
        if type(exc).__module__.startswith("httk.workflow.vasp"):  # the VASP package's own errors
            return _failed(options.command, exc)
        raise


def _dispatch(options: argparse.Namespace) -> int:
    here = Path.cwd()
    if options.command == "potcar":
        from ._potcar import prepare_potcar

        prepare_potcar(options.library, here / "POSCAR", here / "POTCAR")
        return 0
    if options.command == "run":
        from ._run import run_controlled

        argv = options.argv[1:] if options.argv[:1] == ["--"] else options.argv
        if not argv:
            raise V1Error("VASP_RUN_CONTROLLED needs the command that runs VASP after its timeout")
        return run_controlled(here, options.timeout, argv)
    from ._remedy import remedy

    return remedy(here, fix=options.command == "fix")


def _failed(command: str, exc: Exception) -> int:
    helper = {"potcar": "VASP_PREPARE_POTCAR", "run": "VASP_RUN_CONTROLLED"}.get(command)
    helper = helper or f"VASP_INPUTS_{'FIX_ERROR' if command == 'fix' else 'ADJUST'}"
    print(f"{helper}: {exc}", file=sys.stderr)
    return _FAILURE[command]


if __name__ == "__main__":
    raise SystemExit(main())
