#!/usr/bin/env bats
# The Bash VASP API (httk-workflow-vasp.sh) on a real attempt layout: inputs prepared, problems found in
# what the mock VASP wrote, a ladder climbed to its end, the decision of a whole step, and wrong calls.

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  httk_test_setup --no-source
  ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  MOCK=$(dirname "$PYTHON")/httk-mock-vasp
  export HTTK_WORKFLOW_PYTHON=$PYTHON
  # A real attempt: job.json with a structure input, context.json as a manager writes it, run/.
  "$PYTHON" - "$BATS_TEST_TMPDIR" "$MOCK" "$ROOT" <<'PY'
import subprocess, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
root, mock = Path(sys.argv[1]), sys.argv[2]
from tests.sdk.attempts import make_attempt
from tests.vasp.vaspkit import SILICON
subprocess.run([mock, "pseudo-library", str(root / "potcars"), "Si"], check=True)
inputs = {"structure": "files/POSCAR", "vasp.pseudo_library": str(root / "potcars"), "vasp.command": mock}
layout = make_attempt(root / "attempt", step="relax", inputs=inputs, settings={})
(layout.job_dir / "files").mkdir()
(layout.job_dir / "files" / "POSCAR").write_text(SILICON)
(root / "env").write_text("".join(f"export {k}={v}\n" for k, v in layout.environ().items()))
PY
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
