#!/usr/bin/env bats
# Job state (.httk-job/state.json) and observed declarations (.httk-job/declarations/<name>.json):
# atomic replacement, durability, and argument errors.

# CALLS comes from use_call_log in test_helper.bash.
# shellcheck disable=SC2153

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  httk_test_setup
}

# Fail unless .httk-job holds no temporary file.
assert_no_temporaries() {
  local found
  found=$(find "$JOB/.httk-job" -name '*.tmp.*')
  [[ -z $found ]]
}

@test "state: {} before anything is saved, then exactly what was saved" {
  local state
  httk_workflow_state_load state
  [[ $state == '{}' ]]
  [[ ! -e $JOB/.httk-job ]]
  httk_workflow_state_save '{"step":"relax","iterations":3,"text":"é \"q\""}'
  httk_workflow_state_load state
  [[ $state == '{"step":"relax","iterations":3,"text":"é \"q\""}' ]]
  printf '%s\n' '{"step":"relax","iterations":3,"text":"é \"q\""}' >"$BATS_TEST_TMPDIR/expected"
  assert_same_bytes "$BATS_TEST_TMPDIR/expected" "$JOB/.httk-job/state.json"
  assert_no_temporaries
}

@test "state: a save replaces the previous state whole" {
  local state
  httk_workflow_state_save '{"a":1,"long":"'"$(printf 'x%.0s' {1..500})"'"}'
  httk_workflow_state_save '{"b":2}'
  httk_workflow_state_load state
  [[ $state == '{"b":2}' ]]
  [[ $(wc -c <"$JOB/.httk-job/state.json") -eq 8 ]]
  assert_no_temporaries
}

@test "state: the state is shared by later processes (it belongs to the job, not the attempt)" {
  httk_workflow_state_save '{"round":1}'
  run bash -c 'source "$HTTK_WORKFLOW_BASH_API"; httk_workflow_state_load s; printf "%s" "$s"'
  [[ $status -eq 0 && $output == '{"round":1}' ]]
}

@test "state: invalid JSON object text or calls return 2 and write nothing" {
  local text
  for text in '' '[]' '"x"' ' {}' '{} ' $'{\n}' $'{"a":"\xff"}'; do
    run --separate-stderr httk_workflow_state_save "$text"
    [[ $status -eq 2 && $stderr == "httk_workflow_state_save: JSON_OBJECT must be"* ]]
  done
  run --separate-stderr httk_workflow_state_save '{}' '{}'
  [[ $status -eq 2 ]]
  run --separate-stderr httk_workflow_state_load
  [[ $status -eq 2 ]]
  run --separate-stderr httk_workflow_state_load 1bad
  [[ $status -eq 2 ]]
  [[ ! -e $JOB/.httk-job ]]
}

@test "state: an unwritable job directory returns 1" {
  export HTTK_WORKFLOW_JOB_DIR=$BATS_TEST_TMPDIR/file
  : >"$HTTK_WORKFLOW_JOB_DIR"
  run --separate-stderr httk_workflow_state_save '{}'
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "httk_workflow_state_save: cannot create $BATS_TEST_TMPDIR/file/.httk-job"
}

@test "declarations: written compactly with a newline, replaced by name" {
  httk_workflow_declare outputs '{"files":["OUTCAR","vasprun.xml"]}'
  httk_workflow_declare outputs '{"files":["OUTCAR"]}'
  httk_workflow_declare convergence.v2 '{"ok":true}'
  printf '%s\n' '{"files":["OUTCAR"]}' >"$BATS_TEST_TMPDIR/expected"
  assert_same_bytes "$BATS_TEST_TMPDIR/expected" "$JOB/.httk-job/declarations/outputs.json"
  [[ $(<"$JOB/.httk-job/declarations/convergence.v2.json") == '{"ok":true}' ]]
  [[ $(ls -A "$JOB/.httk-job/declarations") == $'convergence.v2.json\noutputs.json' ]]
}

@test "declarations: invalid names and objects return 2 and write nothing" {
  local name
  for name in '' .hidden -dash 'a b' a/b "$(printf 'n%.0s' {1..65})"; do
    run --separate-stderr httk_workflow_declare "$name" '{}'
    [[ $status -eq 2 && $stderr == "httk_workflow_declare: NAME '$name' must be"* ]]
  done
  run --separate-stderr httk_workflow_declare "$(printf 'n%.0s' {1..64})" '[]'
  [[ $status -eq 2 && $stderr == "httk_workflow_declare: JSON_OBJECT must be"* ]]
  run --separate-stderr httk_workflow_declare name
  [[ $status -eq 2 ]]
  [[ ! -e $JOB/.httk-job ]]
}

@test "durable: new directories, then the temporary file, rename, then the directory are synchronized" {
  use_call_log
  export HTTK_WORKFLOW_DURABLE=1
  httk_workflow_declare outputs '{}'
  mapfile -t calls <"$CALLS"
  [[ ${#calls[@]} -eq 4 ]]
  [[ ${calls[0]} == "sync -- $JOB $JOB/.httk-job" ]]
  [[ ${calls[1]} =~ ^sync\ --\ ($JOB/\.httk-job/declarations/\.outputs\.json\.tmp\.[0-9]+\.[0-9]+)$ ]]
  [[ ${calls[2]} == "mv -f -T -- ${BASH_REMATCH[1]} $JOB/.httk-job/declarations/outputs.json" ]]
  [[ ${calls[3]} == "sync -- $JOB/.httk-job/declarations" ]]
  : >"$CALLS"
  httk_workflow_state_save '{}'
  mapfile -t calls <"$CALLS"
  [[ ${#calls[@]} -eq 3 && ${calls[0]} == "sync -- $JOB/.httk-job/.state.json.tmp."* ]]
  [[ ${calls[2]} == "sync -- $JOB/.httk-job" ]]
}

@test "not durable: nothing is synchronized" {
  use_call_log
  httk_workflow_state_save '{}'
  httk_workflow_declare outputs '{}'
  [[ $(grep -c '^sync' "$CALLS") -eq 0 ]]
}
