"""Job state and observed declarations below ``.httk-job/``: runner-private state that outlives attempts.

``.httk-job/state.json`` is one JSON object a runner keeps for itself across retries, step advances and
isolated workdirs; ``.httk-job/declarations/<name>.json`` is the observed counterpart of a declaration in
job.json, carried verbatim and reported beside it. Both are excluded from every payload digest.

Each write replaces the file atomically (temporary name, rename), synchronized when durable, and is
compact JSON with a trailing newline -- the same bytes the Bash API writes for the same document. A
document is checked before anything is written: it must be a mapping that JSON can hold unchanged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from . import _checks
from ._errors import StateError
from ._files import compact_json, make_dirs, replace_atomically

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._files import StrPath

JOB_STATE_DIR = ".httk-job"
STATE_FILE = "state.json"
DECLARATIONS_DIR = "declarations"


def state_path(job_dir: StrPath) -> str:
    """Where the job's state lives."""
    return os.path.join(job_dir, JOB_STATE_DIR, STATE_FILE)


def read_state(job_dir: StrPath) -> dict[str, Any]:
    """The job's state: the object in ``.httk-job/state.json``, or ``{}`` when there is none yet."""
    path = state_path(job_dir)
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise StateError(f"cannot be read: {exc.strerror or exc}", path=path) from exc
    try:
        state = json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to decode
        raise StateError(f"is not UTF-8 JSON: {exc}", path=path) from exc
    if not isinstance(state, dict):
        raise StateError(f"holds {type(state).__name__}, not a JSON object", path=path)
    return state


def _encoded(document: object, what: str, path: str) -> bytes:
    if not isinstance(document, Mapping):
        raise StateError(f"{what} must be a mapping, not {type(document).__name__}", path=path)
    problem = _checks.json_problem(document)
    if problem is not None:
        raise StateError(f"{what} {problem}", path=path)
    return compact_json(document)


def _write(job_dir: StrPath, relative: str, data: bytes, *, durable: bool) -> str:
    path = os.path.join(job_dir, relative)
    try:
        make_dirs(job_dir, relative.rpartition("/")[0], durable=durable)
        replace_atomically(path, data, durable=durable)
    except OSError as exc:
        raise StateError(f"cannot be written: {exc.strerror or exc}", path=path) from exc
    return path


def write_state(job_dir: StrPath, state: object, *, durable: bool) -> dict[str, Any]:
    """Replace the job's state; return it as a later :func:`read_state` will (a fresh copy)."""
    data = _encoded(state, "the job state", state_path(job_dir))
    _write(job_dir, f"{JOB_STATE_DIR}/{STATE_FILE}", data, durable=durable)
    written: dict[str, Any] = json.loads(data)
    return written


def write_declaration(job_dir: StrPath, name: object, document: object, *, durable: bool) -> str:
    """Replace the observed declaration ``name``; return its path."""
    folder = os.path.join(job_dir, JOB_STATE_DIR, DECLARATIONS_DIR)
    problem = _checks.declaration_name_problem(name)
    if problem is not None:
        raise StateError(f"invalid declaration name {name!r}: {problem}", path=folder)
    relative = f"{JOB_STATE_DIR}/{DECLARATIONS_DIR}/{name}.json"
    data = _encoded(document, f"the declaration {name!r}", os.path.join(job_dir, relative))
    return _write(job_dir, relative, data, durable=durable)
