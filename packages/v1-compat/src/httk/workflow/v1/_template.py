"""``httk workflow v1 new``: a v1 task template directory instantiated straight into a job.

v1 made a task from a template with ``create_batch_task``: copy the template, render its ``*.template``
files, run its ``ht.instantiate.py`` (which writes POSCAR from a structure object of the legacy httk
Python package), name the result ``ht.task.<set>.<name>.start.0.unclaimed.<priority>.waitstart``. Here:

1. the template is copied below the workspace's ``tmp/`` (``cp -a``) and renamed to the task's name;
2. every ``*.template`` file is rendered with Python's :class:`string.Template` (``$name``,
   ``${name}``, ``$$`` for a dollar sign) from ``--var NAME=VALUE`` plus ``name``, ``set`` and
   ``priority``, written without the suffix and the template file removed; a placeholder no variable
   fills is an error naming the file and the placeholder, never left in the output;
3. the ``--structure`` file is written as ``POSCAR``, where ``ht.instantiate.py`` would have put it;
4. ``ht.instantiate.py`` runs only with ``run_instantiate``, in an interpreter that has the legacy httk
   package (``python``), with ``structure`` (that package's structure of POSCAR), ``name`` and the
   variables as its globals, as v1 ran it; it is removed either way, as v1 removed it;
5. the task becomes a job exactly as an imported one (:func:`plan_job`), its origin the template.

The job id depends on the placement, the set, the name and the priority only, so instantiating the same
name again finds the job: the same definition is no change, another one is refused. Nothing is
submitted when any step fails, and the staging copy is removed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import string
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from httk.workflow.engine import Workspace, attach
from httk.workflow.protocol import InvalidNameError, validate_placement

from . import _mutations as mutations
from ._errors import TemplateError
from ._jobdoc import DEFAULT_ATTEMPTS, NAME_PREFIX, TaskRefusedError, plan_job, with_inputs
from ._placing import JobPlacer
from ._reader import read_tree

INSTANTIATE = "ht.instantiate.py"
TEMPLATE_SUFFIX = ".template"
STAGING_PREFIX = "v1-new."
LEGACY_CHECK = "import httk.core"
_FIELD = re.compile(r"[A-Za-z0-9_-]+")
_BOOTSTRAP = """
import json, runpy, sys
import httk
globals_ = json.loads(sys.argv[1])
globals_["structure"] = httk.load("POSCAR")
runpy.run_path("ht.instantiate.py", init_globals=globals_, run_name="__main__")
"""


@dataclass(frozen=True, slots=True)
class NewTask:
    """The job a template became (or already was)."""

    job_id: str
    job_key: str
    placement: str
    view: str
    created: bool
    """False when the same definition was instantiated before: nothing was written."""
    instantiated: bool
    """Whether ht.instantiate.py ran."""


def new_task(
    workspace: Path | str,
    template: Path | str,
    structure: Path | str,
    *,
    name: str | None = None,
    task_set: str = "any",
    priority: int = 3,
    placement: str = "v1",
    variables: Mapping[str, str] | None = None,
    run_instantiate: bool = False,
    python: str = "python3",
    attempts: int = DEFAULT_ATTEMPTS,
    durable: bool | None = None,
) -> NewTask:
    """Instantiate the v1 template directory ``template`` for ``structure`` as a job of ``workspace``.

    Raises :class:`TemplateError` (nothing submitted) for a template, structure, name, variable or
    ht.instantiate.py that cannot be used, naming the file or value.

    Examples
    --------
    >>> made = new_task("ws", "templates/vasp-relax-two", "Si.POSCAR", name="Si")  # doctest: +SKIP
    >>> made.view  # doctest: +SKIP
    'ht.task.any.Si.start.0.unclaimed.3.waitstart'
    """
    template_dir, structure_file = Path(template).absolute(), Path(structure).absolute()
    _check_sources(template_dir, structure_file)
    task_name = _task_name(name or structure_file.stem, task_set, priority)
    try:
        prefix = validate_placement(placement)
    except InvalidNameError as exc:
        raise TemplateError(f"--placement {placement!r} is not a placement: {exc.rule}") from None
    attached = attach(workspace, durable=durable)
    staging = attached.tmp_dir / f"{STAGING_PREFIX}{os.getpid()}.{os.urandom(4).hex()}"
    try:
        mutations.make_dirs(staging, durable=False)
        mutations.copy_trees(template_dir.parent, [template_dir.name], staging, durable=False)
        task = staging / task_name
        mutations.rename(staging / template_dir.name, task, durable=False)
        values = {
            "name": task_name.split(".")[3],
            "set": task_set,
            "priority": str(priority),
            **(variables or {}),
        }
        _render(task, values)
        shutil.copyfile(structure_file, task / "POSCAR")
        ran = _instantiate(task, values, python) if run_instantiate else False
        (task / INSTANTIATE).unlink(missing_ok=True)
        origin = {"v1.origin": str(template_dir), "v1.template": str(template_dir)}
        origin["v1.structure"] = str(structure_file)
        return _submit(attached, staging, origin=origin, prefix=prefix, attempts=attempts, ran=ran)
    finally:
        mutations.remove_tree(staging)


def _check_sources(template: Path, structure: Path) -> None:
    if not template.is_dir():
        raise TemplateError("the v1 template is not a directory", template)
    if not any(os.access(template / program, os.X_OK) for program in ("ht_steps", "ht_run")):
        raise TemplateError("the v1 template has no executable ht_steps (or ht_run)", template)
    if not structure.is_file():
        raise TemplateError("the structure is not a readable file", structure)


def _task_name(name: str, task_set: str, priority: int) -> str:
    for what, value in (("name", name), ("set", task_set)):
        if not _FIELD.fullmatch(value):
            raise TemplateError(
                f"the task {what} {value!r} must be letters, digits, '_' and '-' (a v1 name field holds no "
                "'.', '/' or whitespace)"
            )
    if priority not in range(1, 6):
        raise TemplateError(f"the v1 priority must be 1 (highest) to 5, not {priority}")
    return f"ht.task.{task_set}.{name}.start.0.unclaimed.{priority}.waitstart"


def _render(task: Path, values: Mapping[str, str]) -> None:
    """Render every ``*.template`` below ``task`` into the file without the suffix."""
    for directory, _dirs, files in os.walk(task):
        for file_name in sorted(files):
            if not file_name.endswith(TEMPLATE_SUFFIX) or file_name == TEMPLATE_SUFFIX:
                continue
            source = Path(directory) / file_name
            relative = source.relative_to(task)
            try:
                text = string.Template(source.read_text()).substitute(values)
            except KeyError as exc:
                raise TemplateError(
                    f"{relative}: ${exc.args[0]} has no value (give it with --var {exc.args[0]}=VALUE)"
                ) from None
            except ValueError as exc:
                raise TemplateError(f"{relative}: {exc} (write $$ for a dollar sign)") from None
            except UnicodeDecodeError:
                raise TemplateError(f"{relative}: a template must be UTF-8 text") from None
            source.with_name(file_name[: -len(TEMPLATE_SUFFIX)]).write_text(text)
            source.unlink()


def _instantiate(task: Path, values: Mapping[str, str], python: str) -> bool:
    """Run ht.instantiate.py as v1 did; :class:`TemplateError` naming what is missing when it cannot."""
    if not (task / INSTANTIATE).is_file():
        raise TemplateError(f"--run-instantiate: the template has no {INSTANTIATE}")
    check = _python(python, ["-c", LEGACY_CHECK], task)
    if check.returncode != 0:
        raise TemplateError(
            f"{INSTANTIATE} needs the legacy httk Python package (httk v1), which {python} cannot import "
            f"({_last_line(check.stderr)}); install it for that interpreter, pass another with --python, "
            "or leave out --run-instantiate (POSCAR is written from --structure either way)"
        )
    run = _python(python, ["-c", _BOOTSTRAP, json.dumps(dict(values))], task)
    if run.returncode != 0:
        raise TemplateError(
            f"{INSTANTIATE} failed with exit status {run.returncode}: {_last_line(run.stderr)}"
        )
    return True


def _python(python: str, arguments: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [python, *arguments], cwd=cwd, capture_output=True, text=True, check=False, timeout=600
        )
    except FileNotFoundError:
        raise TemplateError(f"--python {python!r} is not a program on PATH") from None


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no message"


def _submit(
    workspace: Workspace, staging: Path, *, origin: Mapping[str, str], prefix: str, attempts: int, ran: bool
) -> NewTask:
    """Make the one task below ``staging`` a job (or find it made before with the same definition)."""
    (found,) = read_tree(staging).tasks
    try:
        plan = plan_job(found, root=staging, prefix=prefix, attempts=attempts)
    except TaskRefusedError as exc:
        raise TemplateError(f"the instantiated template cannot be a job: {exc}") from None
    name = f"{NAME_PREFIX}{found.path.name} from the template {origin['v1.template']}"
    plan = with_inputs(plan, origin, remove=("v1.root",), name=name)
    placer = JobPlacer(workspace)
    placement = placer.placements.get(plan.placement)
    made = NewTask(plan.job_id, str(plan.key), plan.placement, plan.view, True, ran)
    if str(plan.key) in placement.payloads:
        placed = placement.path / str(plan.key) / "job.json"
        if placed.is_file() and placed.read_bytes() == plan.data:
            if str(plan.key) not in placement.kinds:
                placer.complete(placed.parent, plan.key, plan.document["priority"], plan.data, plan.placement)
            return NewTask(plan.job_id, str(plan.key), plan.placement, plan.view, False, ran)
        raise TemplateError(
            f"a job of task {plan.view} exists at {plan.placement} with another definition; "
            "give this one another --name"
        )
    placer.place(plan, plan.task.path)
    return made
