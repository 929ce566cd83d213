"""``v1 new``: a v1 template directory instantiated into a job, its *.template files rendered, POSCAR
written, ht.instantiate.py run only when asked (and refused, naming legacy httk, when it cannot run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from httk.workflow.v1._errors import TemplateError
from httk.workflow.v1._template import new_task
from httk.workflow.v1.cli import app
from typer.testing import CliRunner

from tests.v1.v1jobs import V1Workspace

STEPS = r"""#!/bin/bash
. "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh
HT_TASK_INIT "$@"
case "$STEP" in
  start) cp ../POSCAR ../INCAR .; HT_TASK_NEXT relax ;;
  relax) grep -q "ENCUT = 520" INCAR && head -1 POSCAR >relaxed && HT_TASK_FINISHED; HT_TASK_BROKEN ;;
esac
"""
POSCAR = "Si2 [a tag]\n5.43\n0 0.5 0.5\n0.5 0 0.5\n0.5 0.5 0\nSi\n2\nDirect\n0 0 0\n0.25 0.25 0.25\n"


def template(tmp_path: Path, **extra: str) -> Path:
    root = tmp_path / "vasp-relax"
    (root / "sub").mkdir(parents=True)
    (root / "ht_steps").write_text(STEPS)
    (root / "ht_steps").chmod(0o755)
    (root / "INCAR.template").write_text("SYSTEM = $name\nENCUT = ${ENCUT}\nCOST = $$5\n")
    (root / "sub" / "notes.template").write_text("task $name in set $set at priority $priority\n")
    (root / "KPOINTS").write_text("auto\n")
    (root / "ht.instantiate.py").write_text("open('instantiated', 'w').write(repr(sorted(globals())))\n")
    (root / "ht_instantiate.py").write_text("# v1 left this duplicate in task directories\n")
    for name, text in extra.items():
        (root / name).write_text(text)
    return root


@pytest.fixture
def poscar(tmp_path: Path) -> Path:
    path = tmp_path / "Si.POSCAR"
    path.write_text(POSCAR)
    return path


def test_a_template_becomes_a_job_that_runs(tmp_path: Path, v1ws: V1Workspace, poscar: Path) -> None:
    source = template(tmp_path)
    made = new_task(v1ws.path, source, poscar, variables={"ENCUT": "520"})
    assert (made.created, made.instantiated, made.placement) == (True, False, "v1")
    assert made.view == "ht.task.any.Si.start.0.unclaimed.3.waitstart"
    placed = v1ws.path / "v1" / made.job_key
    assert sorted(p.name for p in placed.iterdir()) == ["job.json", "task"]
    payload = placed / "task" / made.view  # the task directory
    names = sorted(str(p.relative_to(payload)) for p in payload.rglob("*"))
    assert names == [
        "INCAR",
        "KPOINTS",
        "POSCAR",
        "ht_instantiate.py",
        "ht_steps",
        "sub",
        "sub/notes",
    ]
    assert (payload / "INCAR").read_text() == "SYSTEM = Si\nENCUT = 520\nCOST = $5\n"
    assert (payload / "sub/notes").read_text() == "task Si in set any at priority 3\n"
    assert (payload / "POSCAR").read_text() == POSCAR
    inputs = json.loads((placed / "job.json").read_text())["inputs"]
    assert inputs["v1.template"] == inputs["v1.origin"] == str(source)
    assert inputs["v1.structure"] == str(poscar) and "v1.root" not in inputs
    name = f"httk v1 task {made.view} from the template {source}"
    assert v1ws.show(made.job_key)["job"]["name"] == name  # what `job show` prints
    assert v1ws.views() == [made.view]
    assert not list((v1ws.path / ".httk-workflow" / "tmp").iterdir())
    v1ws.run()
    assert v1ws.kind(made.job_key) == "succeeded"
    (finished,) = (placed / "task").iterdir()
    (archive,) = finished.glob("ht.run.*")
    assert (archive / "relaxed").read_text() == "Si2 [a tag]\n"


def test_instantiating_the_same_task_again_changes_nothing(
    tmp_path: Path, v1ws: V1Workspace, poscar: Path
) -> None:
    source = template(tmp_path)
    first = new_task(v1ws.path, source, poscar, variables={"ENCUT": "520"})
    again = new_task(v1ws.path, source, poscar, variables={"ENCUT": "520"})
    assert (again.job_key, again.created) == (first.job_key, False)
    with pytest.raises(
        TemplateError, match="exists at v1 with another definition; give this one another --name"
    ):
        new_task(v1ws.path, source, poscar, variables={"ENCUT": "520"}, attempts=3)
    other = new_task(
        v1ws.path, source, poscar, name="Si-2", task_set="hpc", priority=1, variables={"ENCUT": "1"}
    )
    assert other.view == "ht.task.hpc.Si-2.start.0.unclaimed.1.waitstart" and len(v1ws.list_jobs()) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, r"INCAR.template: \$ENCUT has no value \(give it with --var ENCUT=VALUE\)"),
        ({"name": "Si.2", "variables": {"ENCUT": "1"}}, "the task name 'Si.2' must be letters"),
        ({"task_set": "a b", "variables": {"ENCUT": "1"}}, "the task set 'a b' must be letters"),
        ({"priority": 6, "variables": {"ENCUT": "1"}}, "priority must be 1 .highest. to 5, not 6"),
        ({"placement": "..", "variables": {"ENCUT": "1"}}, "--placement '..' is not a placement"),
    ],
)
def test_what_cannot_be_instantiated_is_refused_and_nothing_submitted(
    tmp_path: Path, v1ws: V1Workspace, poscar: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(TemplateError, match=message):
        new_task(v1ws.path, template(tmp_path), poscar, **kwargs)  # type: ignore[arg-type]
    assert v1ws.list_jobs() == [] and not list((v1ws.path / ".httk-workflow" / "tmp").iterdir())


def test_a_bad_placeholder_names_its_file(tmp_path: Path, v1ws: V1Workspace, poscar: Path) -> None:
    source = template(tmp_path, **{"bad.template": "price $5\n"})
    with pytest.raises(
        TemplateError, match=r"bad.template: Invalid placeholder .* \(write \$\$ for a dollar sign\)"
    ):
        new_task(v1ws.path, source, poscar, variables={"ENCUT": "1"})


def test_the_sources_must_exist(tmp_path: Path, v1ws: V1Workspace, poscar: Path) -> None:
    with pytest.raises(TemplateError, match="the v1 template is not a directory"):
        new_task(v1ws.path, tmp_path / "absent", poscar)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TemplateError, match="has no executable ht_steps"):
        new_task(v1ws.path, empty, poscar)
    with pytest.raises(TemplateError, match="the structure is not a readable file"):
        new_task(v1ws.path, template(tmp_path), tmp_path / "none.POSCAR")


def test_ht_instantiate_py_needs_the_legacy_httk_package(
    tmp_path: Path, v1ws: V1Workspace, poscar: Path
) -> None:
    with pytest.raises(
        TemplateError, match=r"needs the legacy httk Python package \(httk v1\), which .* cannot import"
    ):
        new_task(v1ws.path, template(tmp_path), poscar, variables={"ENCUT": "1"}, run_instantiate=True,
                 python=sys.executable)  # fmt: skip
    assert v1ws.list_jobs() == []
    with pytest.raises(TemplateError, match="--python 'no-such-python' is not a program on PATH"):
        new_task(v1ws.path, template(tmp_path / "t2"), poscar, variables={"ENCUT": "1"}, run_instantiate=True,
                 python="no-such-python")  # fmt: skip


def test_ht_instantiate_py_runs_with_the_structure_as_v1_ran_it(
    tmp_path: Path, v1ws: V1Workspace, poscar: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in for the legacy httk package (not installable beside httk.workflow: both are "httk"),
    # offering what the bootstrap uses: httk.core and httk.load.
    legacy = tmp_path / "legacy" / "httk"
    (legacy / "core").mkdir(parents=True)
    (legacy / "__init__.py").write_text(
        "def load(path):\n    return 'structure from ' + open(path).readline().strip()\n"
    )
    (legacy / "core" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(legacy.parent))
    script = "open('instantiated', 'w').write(structure + ' / ' + name + ' / ' + ENCUT)\n"
    source = template(tmp_path, **{"ht.instantiate.py": script})
    made = new_task(v1ws.path, source, poscar, variables={"ENCUT": "520"}, run_instantiate=True,
                    python=sys.executable)  # fmt: skip
    assert made.instantiated
    payload = v1ws.path / "v1" / made.job_key / "task" / made.view
    assert (payload / "instantiated").read_text() == "structure from Si2 [a tag] / Si / 520"
    assert not (payload / "ht.instantiate.py").exists()


def test_the_command_instantiates_and_reports(tmp_path: Path, v1ws: V1Workspace, poscar: Path) -> None:
    source = template(tmp_path)
    args = ["new", str(v1ws.path), str(source), "--structure", str(poscar), "--var", "ENCUT=520"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "created job si--"
    ) and "(view ht.task.any.Si.start.0.unclaimed.3.waitstart)" in (result.stdout)
    again = CliRunner().invoke(app, [*args, "--json"])
    assert json.loads(again.stdout)["created"] is False
    bad = CliRunner().invoke(app, [*args, "--var", "no equals"])
    assert (
        bad.exit_code == 2
        and bad.stderr == "error: --var 'no equals' must be NAME=VALUE with NAME a $placeholder name\n"
    )
