"""``httk workflow job new``: both front ends through the real executable, and every refusal.

A refusal must exit 2, say in one line what is wrong (naming the input at fault) and leave the workspace
exactly as it was; a job that is made must be submitted at the placement printed, with its file inputs
(or its runner) copied into ``files/``, and run to success by a real manager.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
from pathlib import Path

import pytest
from httk.workflow.protocol._job_rules import validate_job
from httk.workflow.sdk.packaged import DEFAULT_RETRY_POLICY
from httk.workflow.vasp import VASP_RELAX

from tests.cli.newkit import SILICON, TRANSACTIONAL, httk, init, markers, placed_job, snapshot

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "examples" / "runners" / "hello.sh"
UUID_SHARD = r"[0-9a-f]{2}"


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A directory holding a POSCAR, an INCAR and a copy of the demo's shared runner."""
    directory = tmp_path / "inputs"
    directory.mkdir()
    (directory / "POSCAR").write_text(SILICON)
    (directory / "INCAR").write_text("ENCUT = 520\n")
    (directory / "hello.sh").write_bytes(HELLO.read_bytes())
    return directory


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return init(tmp_path / "ws", TRANSACTIONAL)


def job_new(ws: Path, *words: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return httk("workflow", "job", "new", ws, *words, cwd=cwd)


def new(ws: Path, *words: str, cwd: Path) -> dict[str, object]:
    """``job new --json``, which must succeed: what it printed."""
    result = job_new(ws, *words, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    made: dict[str, object] = json.loads(result.stdout)
    return made


# -- --workflow ---------------------------------------------------------------------------------------
def test_a_packaged_workflow_job_is_made_from_its_inputs_and_submitted(ws: Path, inputs: Path) -> None:
    result = job_new(
        ws, "--workflow", "vasp-relax", "--input", "structure=POSCAR", "--tag", "silicon", cwd=inputs
    )

    assert result.returncode == 0, result.stderr
    key, payload = result.stdout.rstrip("\n").split("\t")
    assert key.startswith("silicon--") and Path(payload) == ws / "vasp-relax" / key[9:11] / key
    job = json.loads((Path(payload) / "job.json").read_text())
    validate_job(job)
    assert job["workflow"] == "vasp-relax" and job["tag"] == "silicon" and job["id"] == key[9:]
    assert job["inputs"] == {"structure": "files/POSCAR"}
    assert job["runner"]["path"] == VASP_RELAX.runner and job["runner"]["source"] == "installed"
    assert job["data"] == {"mode": "transactional"} and job["priority"] == 500
    assert (Path(payload) / "files" / "POSCAR").read_text() == SILICON
    assert markers(ws, "submitted") == [Path("vasp-relax", key[9:11], f"{key}.p500.g0.init")]


def test_values_are_typed_file_inputs_copied_and_the_placement_tag_priority_honoured(
    ws: Path, inputs: Path
) -> None:
    made = new(
        ws,
        "--workflow",
        "vasp-static",
        "--input",
        "structure=POSCAR",
        "--input",
        "incar=INCAR",
        "--input",
        "kpoint_density=2500",
        "--input",
        "vasp.keep_wavefunctions=yes",
        "--placement",
        "campaign/07",
        "--tag",
        "si-static",
        "--priority",
        "42",
        cwd=inputs,
    )

    assert made["placement"] == "campaign/07" and made["status"] == "submitted"
    assert made["workflow"] == "vasp-static" and made["state"] == "submitted"
    assert made["marker"] == f".httk-workflow/state/submitted/campaign/07/{made['job_key']}.p042.g0.init"
    job = placed_job(ws, made)
    assert job["priority"] == 42 and job["tag"] == "si-static"
    assert job["inputs"] == {
        "structure": "files/POSCAR",
        "incar": "files/INCAR",
        "kpoint_density": 2500,
        "vasp.keep_wavefunctions": True,
    }
    assert Path(str(made["payload"]), "files", "INCAR").read_text() == "ENCUT = 520\n"
    assert made["runner"] == job["runner"]


def test_print_shows_the_job_json_and_writes_nothing(ws: Path, inputs: Path) -> None:
    before = snapshot(ws)
    result = job_new(
        ws, "--workflow", "vasp-relax", "--input", "structure=POSCAR", "--tag", "si", "--print", cwd=inputs
    )

    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    validate_job(job)
    assert job["workflow"] == "vasp-relax" and job["inputs"] == {"structure": "files/POSCAR"}
    placement = f"vasp-relax/{job['id'][:2]}"
    where = ws / placement / f"si--{job['id']}"
    assert result.stderr == f"would place the job at {where} with files/POSCAR ({len(SILICON)} bytes)\n"
    assert snapshot(ws) == before


def test_a_workspace_without_the_extension_is_refused_with_the_command_that_enables_it(
    tmp_path: Path, inputs: Path
) -> None:
    plain = init(tmp_path / "plain")
    before = snapshot(plain)
    refused = job_new(plain, "--workflow", "vasp-relax", "--input", "structure=POSCAR", cwd=inputs)

    assert refused.returncode == 2 and snapshot(plain) == before
    [line] = refused.stderr.splitlines()
    assert "workflow 'vasp-relax' needs the workspace extension 'transactional-data-v1'" in line
    command = line.rsplit(" by: ", 1)[1]
    assert command == f"httk workflow workspace extension enable {shlex.quote(str(plain))} {TRANSACTIONAL}"
    enabled = httk(*shlex.split(command)[1:])
    assert enabled.returncode == 0 and enabled.stdout == f"extension {TRANSACTIONAL} enabled\n"
    made = new(plain, "--workflow", "vasp-relax", "--input", "structure=POSCAR", cwd=inputs)
    assert made["status"] == "submitted"


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--input", "structur=POSCAR"], "error: input 'structur': is not an input of workflow 'vasp-relax'"),
        (
            ["--input", "kpoint_density=2000"],
            "error: input 'structure': is required by workflow 'vasp-relax'",
        ),
        (["--input", "structure=absent"], "error: input 'structure': cannot read absent: No such file"),
        (["--input", "structure=."], "error: input 'structure': cannot read .: Is a directory"),
        (
            ["--input", "structure=INCAR"],
            "error: input 'structure': INCAR: ends at line 1; line 2 is missing",
        ),
        (
            ["--input", "structure=POSCAR", "--input", "kpoint_density=dense"],
            "error: input 'kpoint_density': must be a number, not 'dense'",
        ),
        (
            ["--input", "structure=POSCAR", "--input", "incar=POSCAR"],
            "error: input 'incar': POSCAR, line 1: ",
        ),
        (["--input", "structure=POSCAR", "--tag", "Not A Tag"], "error: invalid tag 'Not A Tag': "),
        (
            ["--input", "structure=POSCAR", "--placement", "../escape"],
            "error: invalid placement '../escape': ",
        ),
    ],
)
def test_a_refused_input_is_named_and_nothing_is_written(
    ws: Path, inputs: Path, words: list[str], message: str
) -> None:
    before = snapshot(ws)
    result = job_new(ws, "--workflow", "vasp-relax", *words, cwd=inputs)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(message), line
    assert result.stdout == "" and snapshot(ws) == before


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (
            ["--workflow", "vasp-relaxing"],
            "error: no packaged workflow is named 'vasp-relaxing' (installed: ",
        ),
        ([], "give exactly one of --workflow NAME and --runner PATH"),
        (
            ["--workflow", "vasp-relax", "--runner", "hello.sh"],
            "give exactly one of --workflow NAME and --runner",
        ),
        (
            ["--workflow", "vasp-relax", "--step", "static", "--shared"],
            "--step, --shared: only with --runner (a packaged workflow declares its own)",
        ),
        (["--workflow", "vasp-relax", "--input", "structure"], "--input 'structure': give it as KEY=VALUE"),
        (["--workflow", "vasp-relax", "--input", "=POSCAR"], "--input '=POSCAR': give it as KEY=VALUE"),
        (
            ["--workflow", "vasp-relax", "--input", "structure=POSCAR", "--input", "structure=INCAR"],
            "--input 'structure' is given twice",
        ),
        (["--runner", "hello.sh", "--priority", "1000"], "Invalid value for '--priority'"),
    ],
)
def test_a_command_line_that_does_not_say_what_to_make_is_refused(
    ws: Path, inputs: Path, words: list[str], message: str
) -> None:
    before = snapshot(ws)
    result = job_new(ws, *words, cwd=inputs)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == "" and snapshot(ws) == before


# -- --runner -----------------------------------------------------------------------------------------
def test_an_own_runner_is_copied_into_files_and_runs_to_success(ws: Path, inputs: Path) -> None:
    made = new(
        ws,
        "--runner",
        "hello.sh",
        "--step",
        "relax",
        "--input",
        "element=silicon",
        "--input",
        "count=3",
        "--input",
        'flags=["fast"]',
        "--input",
        "label=",
        "--tag",
        "si",
        cwd=inputs,
    )

    job = placed_job(ws, made)
    assert made["placement"] == f"hello/{str(made['job_id'])[:2]}"
    assert job["runner"] == {"backend": "path", "path": "files/hello.sh", "arguments": []}
    assert job["inputs"] == {"element": "silicon", "count": 3, "flags": ["fast"], "label": ""}
    assert job["initial_step"] == "relax" and job["workflow"] == "hello.sh"
    assert job["workdir"] == {"mode": "persistent", "path": "run"} and job["data"] == {"mode": "none"}
    assert job["claim"] == {"pool": "default", "required_capabilities": []}
    assert job["retry_policy"] == dict(DEFAULT_RETRY_POLICY) and job["priority"] == 500
    copied = Path(str(made["payload"]), "files", "hello.sh")
    assert copied.read_bytes() == HELLO.read_bytes() and copied.stat().st_mode & 0o777 == 0o755

    ran = httk("workflow", "run", ws)
    assert ran.returncode == 0, ran.stderr
    [marker] = markers(ws, "succeeded")
    assert marker.parent == Path(str(made["placement"])) and marker.name.startswith(
        f"{made['job_key']}.p500."
    )
    assert Path(str(made["payload"]), "run", "energy.txt").read_text() == "E = -5.42 eV\n"


def test_the_default_step_is_main(ws: Path, inputs: Path) -> None:
    job = placed_job(ws, new(ws, "--runner", "hello.sh", cwd=inputs))
    assert job["initial_step"] == "main" and job["inputs"] == {}


def test_a_shared_runner_is_published_pinned_and_reused(ws: Path, inputs: Path) -> None:
    first = new(ws, "--runner", "hello.sh", "--shared", "--step", "relax", "--tag", "a", cwd=inputs)
    second = new(ws, "--runner", "hello.sh", "--shared", "--step", "relax", "--tag", "b", cwd=inputs)

    digest = hashlib.sha256(HELLO.read_bytes()).hexdigest()
    for made in (first, second):
        job = placed_job(ws, made)
        assert job["runner"] == {
            "backend": "path",
            "path": "hello.sh",
            "arguments": [],
            "source": "workspace",
            "sha256": digest,
        }
        assert not Path(str(made["payload"]), "files").exists()
    assert (ws / ".httk-workflow" / "runners" / "hello.sh").read_bytes() == HELLO.read_bytes()
    ran = httk("workflow", "run", ws)
    assert ran.returncode == 0, ran.stderr
    assert len(markers(ws, "succeeded")) == 2


def test_a_shared_runner_whose_name_holds_other_content_is_refused(ws: Path, inputs: Path) -> None:
    other = inputs / "other" / "hello.sh"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\nexit 1\n")
    assert httk("workflow", "runner", "publish", ws, "--name", "hello.sh", other).returncode == 0
    before = snapshot(ws)

    result = job_new(ws, "--runner", "hello.sh", "--shared", cwd=inputs)

    assert result.returncode == 2 and snapshot(ws) == before
    [line] = result.stderr.splitlines()
    stored = hashlib.sha256(other.read_bytes()).hexdigest()
    assert line.startswith(f"error: the runner store already holds another 'hello.sh' (digest {stored})")
    assert f"--name hello.sh --replace {inputs / 'hello.sh'}" in line


def test_a_runner_tree_is_copied_whole_and_entered_at_its_run(ws: Path, inputs: Path) -> None:
    tree = inputs / "greeter"
    tree.mkdir()
    (tree / "lib").mkdir()
    (tree / "lib" / "greet.sh").write_text("greet() { printf 'hello %s\\n' \"$1\" >greeting.txt; }\n")
    (tree / "run").write_text(
        "#!/usr/bin/env bash\nset -euo pipefail\n# shellcheck source=/dev/null\n"
        'source "$HTTK_WORKFLOW_BASH_API"\nsource "$(dirname "$0")/lib/greet.sh"\n'
        'main() { local who; httk_workflow_setting who who; greet "$who"; httk_workflow_succeed; }\n'
        "httk_workflow_register_step main\nhttk_workflow_dispatch\n"
    )
    (tree / "run").chmod(0o644)  # the copy is made executable: the job's copy is what runs

    made = new(ws, "--runner", "greeter", "--input", "who=world", "--workdir", "isolated", cwd=inputs)

    job = placed_job(ws, made)
    assert job["runner"]["path"] == "files/greeter/run" and job["workdir"] == {"mode": "isolated"}
    payload = Path(str(made["payload"]))
    assert (payload / "files" / "greeter" / "lib" / "greet.sh").read_text().startswith("greet()")
    assert (payload / "files" / "greeter" / "run").stat().st_mode & 0o777 == 0o755
    assert (payload / "files" / "greeter" / "lib" / "greet.sh").stat().st_mode & 0o111 == 0
    ran = httk("workflow", "run", ws)
    assert ran.returncode == 0, ran.stderr
    assert len(markers(ws, "succeeded")) == 1
    [greeting] = payload.glob("run.*/greeting.txt")
    assert greeting.read_text() == "hello world\n"


def test_transactional_data_needs_the_extension(tmp_path: Path, inputs: Path) -> None:
    plain = init(tmp_path / "plain")
    before = snapshot(plain)
    result = httk(
        "workflow", "job", "new", plain, "--runner", "hello.sh", "--data", "transactional", cwd=inputs
    )
    assert result.returncode == 2 and snapshot(plain) == before
    assert "workflow 'hello.sh' needs the workspace extension 'transactional-data-v1'" in result.stderr

    ws = init(tmp_path / "ws", TRANSACTIONAL)
    job = placed_job(ws, new(ws, "--runner", "hello.sh", "--data", "transactional", cwd=inputs))
    assert job["data"] == {"mode": "transactional"}


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--runner", "absent.sh"], "error: absent.sh: the runner cannot be read: No such file or directory"),
        (["--runner", "absent.sh", "--shared"], "error: absent.sh: no such runner file or directory"),
        (
            ["--runner", "link.sh"],
            "error: link.sh: a runner is a regular file or a directory (not a symlink)",
        ),
        (["--runner", "empty"], "error: empty: a runner tree is entered at its top-level 'run' file"),
        (
            ["--runner", "hello.sh", "--workdir", "scratch"],
            "error: the workdir mode must be one of persistent, isolated, not 'scratch'",
        ),
        (
            ["--runner", "hello.sh", "--data", "all"],
            "error: the data mode must be one of none, transactional",
        ),
        (["--runner", "hello.sh", "--step", "-x"], "error: invalid step name '-x': "),
        (["--runner", "hello.sh", "--tag", "UPPER"], "error: invalid tag 'UPPER': "),
    ],
)
def test_a_refused_runner_job_writes_nothing(ws: Path, inputs: Path, words: list[str], message: str) -> None:
    (inputs / "link.sh").symlink_to("hello.sh")
    (inputs / "empty").mkdir()
    before = snapshot(ws)
    result = job_new(ws, *words, cwd=inputs)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(message), line
    assert snapshot(ws) == before
