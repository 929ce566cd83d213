#!/usr/bin/env bats
# The Bash VASP API (httk-workflow-vasp.sh) on a real attempt layout: inputs prepared, problems found in
# what the mock VASP wrote, a ladder climbed to its end, the decision of a whole step, and wrong calls.

bats_require_minimum_version 1.5.0

# make_attempt DIR: a real attempt below DIR -- job.json with a structure input, context.json as a
# manager writes it, run/ -- and DIR/env, which exports its environment. Every attempt of a test takes
# its POTCAR from one library.
make_attempt() {
  "$PYTHON" - "$1" "$MOCK" "$ROOT" "$BATS_TEST_TMPDIR/potcars" <<'PY'
import subprocess, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
root, mock, library = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[4])
from tests.sdk.attempts import make_attempt
from tests.vasp.vaspkit import SILICON
if not library.exists():
    subprocess.run([mock, "pseudo-library", str(library), "Si"], check=True)
inputs = {"structure": "files/POSCAR", "vasp.pseudo_library": str(library), "vasp.command": mock}
layout = make_attempt(root / "attempt", step="relax", inputs=inputs, settings={})
(layout.job_dir / "files").mkdir()
(layout.job_dir / "files" / "POSCAR").write_text(SILICON)
(root / "env").write_text("".join(f"export {k}={v}\n" for k, v in layout.environ().items()))
PY
}

setup() {
  load test_helper
  httk_test_setup --no-source
  ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  MOCK=$(dirname "$PYTHON")/httk-mock-vasp
  export HTTK_WORKFLOW_PYTHON=$PYTHON
  make_attempt "$BATS_TEST_TMPDIR"
  # shellcheck source=/dev/null # written just above
  source "$BATS_TEST_TMPDIR/env"
  # shellcheck source=/dev/null # the libraries are checked on their own
  source "$LIBRARY"
  # shellcheck source=/dev/null
  source "$("$PYTHON" -P -m httk.workflow.vasp bash-api-path)"
}

@test "vasp: the library is where bash-api-path says, and sourcing it changes no shell option" {
  local before after
  [[ $("$PYTHON" -P -m httk.workflow.vasp bash-api-path) == "$ROOT/packages/vasp-runners/src/httk/workflow/vasp/bash/httk-workflow-vasp.sh" ]]
  before=$(set +o; shopt -p)
  # shellcheck source=/dev/null
  source "$("$PYTHON" -P -m httk.workflow.vasp bash-api-path)"
  after=$(set +o; shopt -p)
  [[ $before == "$after" ]]
}

@test "vasp: prepare writes the four inputs and returns their provenance" {
  local provenance
  httk_workflow_vasp_prepare provenance relax
  [[ -f $HTTK_WORKFLOW_WORKDIR/INCAR && -f $HTTK_WORKFLOW_WORKDIR/POSCAR && -f $HTTK_WORKFLOW_WORKDIR/KPOINTS ]]
  grep -q 'PAW_PBE Si mock' "$HTTK_WORKFLOW_WORKDIR/POTCAR"
  grep -q '^IBRION = 2$' "$HTTK_WORKFLOW_WORKDIR/INCAR"
  [[ $provenance == '{"kind":"relax","natoms":2,'* && $provenance == *'"source":"density 1000"'* ]]
}

@test "vasp: check names the problems in the outputs, and remedy climbs the ladder to its end (4)" {
  local provenance problems remedy status
  httk_workflow_vasp_prepare provenance static
  (cd "$HTTK_WORKFLOW_WORKDIR" && "$MOCK" --fault zpotrf >vasp.out 2>vasp.err) || :
  httk_workflow_vasp_check problems
  [[ $problems == zpotrf ]]
  for expected in no_symmetry perturb_structure expand_cell; do
    httk_workflow_vasp_remedy remedy zpotrf
    [[ $remedy == "$expected" ]]
  done
  grep -q '^ISYM = 0$' "$HTTK_WORKFLOW_WORKDIR/INCAR"
  [[ -f $HTTK_WORKFLOW_WORKDIR/.httk-vasp/backups/001-zpotrf/INCAR ]]
  run httk_workflow_vasp_remedy remedy zpotrf
  [[ $status -eq 4 ]]
}

@test "vasp: run runs VASP and records the run that remedy then fixes, as a step would" {
  local provenance problems remedy
  export HTTK_MOCK_VASP_FAULTS=zpotrf  # the job's vasp.command is the mock
  httk_workflow_vasp_prepare provenance relax
  httk_workflow_vasp_run problems
  [[ $problems == zpotrf ]]
  [[ -f $HTTK_WORKFLOW_WORKDIR/runs/01-relax/OUTCAR.gz && ! -e $HTTK_WORKFLOW_WORKDIR/OUTCAR ]]
  httk_workflow_vasp_remedy remedy zpotrf
  [[ $remedy == no_symmetry ]]
  grep -q '"remedy":"no_symmetry"' "$HTTK_WORKFLOW_JOB_DIR/.httk-job/state.json"
  grep -q '"kind":"vasp.remedy"' "$HTTK_WORKFLOW_JOB_DIR/.httk-job/events.jsonl"
  run --separate-stderr httk_workflow_vasp_run
  [[ $status -eq 2 && $stderr == *usage* ]]
}

@test "vasp: prepare, run and remedy composed in Bash leave the record one whole step leaves" {
  local provenance problems remedy step_job
  httk_workflow_vasp_prepare provenance relax
  HTTK_MOCK_VASP_FAULTS=zpotrf httk_workflow_vasp_run problems
  httk_workflow_vasp_remedy remedy "$problems"
  [[ $remedy == no_symmetry ]]
  mkdir "$BATS_TEST_TMPDIR/step"
  make_attempt "$BATS_TEST_TMPDIR/step"
  step_job=$(
    # shellcheck source=/dev/null # written just above
    source "$BATS_TEST_TMPDIR/step/env"
    HTTK_MOCK_VASP_FAULTS=zpotrf httk_workflow_vasp_step action vasp-relax >&2
    [[ $action == retry ]] && printf '%s' "$HTTK_WORKFLOW_JOB_DIR"
  )
  "$PYTHON" - "$HTTK_WORKFLOW_JOB_DIR" "$step_job" "$ROOT" <<'PY'
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from tests.vasp.test_bash_parity import normalized
def record(job):
    state = json.loads((Path(job) / ".httk-job" / "state.json").read_text())
    lines = (Path(job) / ".httk-job" / "events.jsonl").read_text().splitlines()
    return normalized(state), normalized([json.loads(line) for line in lines])
composed, step = record(sys.argv[1]), record(sys.argv[2])
assert composed == step, (composed, step)
assert [e["kind"] for e in composed[1]] == ["vasp.prepared", "vasp.error", "vasp.remedy"], composed[1]
PY
}

@test "vasp: a whole step decides, and publish turns the decision into the outcome" {
  local action message next
  httk_workflow_vasp_step action vasp-relax
  [[ $action == advance ]]
  httk_workflow_vasp_decision message message
  httk_workflow_vasp_decision next next_step
  [[ $next == relax && $message == "repeat 1 of at most 5 from CONTCAR (first run)" ]]
  httk_workflow_vasp_publish
  grep -q '"action":"advance","next_step":"relax","message":"repeat 1 of at most 5' \
    "$HTTK_WORKFLOW_CONTROL_DIR/outcome.ready/outcome.json"
  run --separate-stderr httk_workflow_vasp_publish
  [[ $status -eq 3 ]]
}

@test "vasp: wrong calls return 2, a decision before a step returns 1" {
  run --separate-stderr httk_workflow_vasp_step action
  [[ $status -eq 2 && $stderr == *usage* ]]
  run --separate-stderr httk_workflow_vasp_step _hwv_x vasp-relax
  [[ $status -eq 2 ]]
  run --separate-stderr httk_workflow_vasp_decision message message
  [[ $status -eq 1 && $stderr == *"call httk_workflow_vasp_step first"* ]]
  run --separate-stderr httk_workflow_vasp_prepare provenance bogus
  [[ $status -eq 2 ]]
  run --separate-stderr httk_workflow_vasp_remedy remedy gremlins
  [[ $status -eq 1 && $stderr == *"no problem 'gremlins'"* ]]
}
