#!/usr/bin/env bats
# The step dispatcher: registration, runner_steps, and the runner-library failures unknown_step and
# no_outcome. Runners run as real Bash scripts (fixtures/runner.sh) where the shell's exit matters.

# Step functions are called through the dispatcher, which shellcheck cannot see.
# shellcheck disable=SC2329

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  httk_test_setup
}

# Print member PATH (dotted) of the published outcome, as JSON.
outcome_member() { # <path>
  "$PYTHON" -c 'import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2].split("."):
    value = value[key]
print(json.dumps(value, ensure_ascii=False))' "$OUTCOME" "$1"
}

@test "dispatch runs the current step's function with the arguments; runner_steps in registration order" {
  relax_step() { httk_workflow_advance collect --message "args: $*"; }
  collect() { httk_workflow_succeed; }
  prepare() { httk_workflow_succeed; }
  httk_workflow_register_step prepare
  httk_workflow_register_step relax relax_step
  httk_workflow_register_step collect
  httk_workflow_dispatch one "two words"
  [[ $(outcome_member action) == '"advance"' ]]
  [[ $(outcome_member message) == '"args: one two words"' ]]
  [[ $(outcome_member runner_steps) == '["prepare", "relax", "collect"]' ]]
}

@test "an unknown step publishes fail unknown_step naming the step and the known ones (Python's wording)" {
  prepare() { httk_workflow_succeed; }
  collect() { httk_workflow_succeed; }
  httk_workflow_register_step prepare
  httk_workflow_register_step collect
  run --separate-stderr httk_workflow_dispatch
  [[ $status -eq 0 ]]
  local message="this runner does not implement step 'relax'; its steps are: 'prepare', 'collect'"
  [[ $stderr == "httk_workflow_dispatch: $message (publishing fail/unknown_step)" ]]
  assert_outcome unknown-step
}

@test "an unknown step in a runner that registered nothing" {
  run --separate-stderr httk_workflow_dispatch
  [[ $status -eq 0 ]]
  local message="this runner does not implement step 'relax'; its steps are: none"
  [[ $(outcome_member failure) == \
    '{"code": "unknown_step", "message": "'"$message"'", "details": {"step": "relax", "runner_steps": []}}' ]]
  [[ $(outcome_member runner_steps) == '[]' ]]
}

@test "a step that returns 0 without an outcome gets fail no_outcome" {
  relax_step() { :; }
  httk_workflow_register_step relax relax_step
  run --separate-stderr httk_workflow_dispatch
  [[ $status -eq 0 ]]
  [[ $stderr == *"step 'relax' returned without publishing an outcome (publishing fail/no_outcome)" ]]
  local message="step 'relax' returned without publishing an outcome"
  [[ $(outcome_member failure) == \
    '{"code": "no_outcome", "message": "'"$message"'", "details": {"step": "relax", "function": "relax_step"}}' ]]
}

@test "a step that returns nonzero without an outcome: dispatch returns that status, publishes nothing" {
  relax() { return 7; }
  httk_workflow_register_step relax
  run --separate-stderr httk_workflow_dispatch
  [[ $status -eq 7 ]]
  [[ ! -e $CONTROL/outcome.ready ]]
}

@test "a step that publishes and then returns nonzero: dispatch returns 0, the outcome stands" {
  relax() {
    httk_workflow_retry "scratch is full"
    return 5
  }
  httk_workflow_register_step relax
  run --separate-stderr httk_workflow_dispatch
  [[ $status -eq 0 ]]
  [[ $(outcome_member action) == '"retry"' ]]
}

@test "an outcome published by a subshell or a child process counts" {
  relax() { (httk_workflow_succeed); }
  httk_workflow_register_step relax
  run --separate-stderr httk_workflow_dispatch
  [[ $status -eq 0 && -z $stderr ]]
  [[ $(outcome_member action) == '"succeed"' ]]
  rm -r "$CONTROL/outcome.ready"
  relax() { bash -c 'source "$HTTK_WORKFLOW_BASH_API"; httk_workflow_pause "asked by a child"'; }
  run --separate-stderr httk_workflow_dispatch
  [[ $status -eq 0 && -z $stderr ]]
  [[ $(outcome_member action) == '"pause"' ]]
}

@test "without HTTK_WORKFLOW_STEP the step comes from context.json" {
  relax() { httk_workflow_succeed --message "from the context"; }
  httk_workflow_register_step relax
  unset HTTK_WORKFLOW_STEP
  httk_workflow_dispatch
  [[ $(outcome_member message) == '"from the context"' ]]
}

@test "registration errors return 2" {
  relax() { :; }
  run --separate-stderr httk_workflow_register_step ".hidden" relax
  [[ $status -eq 2 && $stderr == *"STEP '.hidden' must be"* ]]
  run --separate-stderr httk_workflow_register_step collect no_such_function
  [[ $status -eq 2 && $stderr == *"FUNCTION 'no_such_function' is not a defined shell function"* ]]
  run --separate-stderr httk_workflow_register_step collect
  [[ $status -eq 2 && $stderr == *"FUNCTION 'collect' is not a defined shell function"* ]]
  httk_workflow_register_step relax
  run --separate-stderr httk_workflow_register_step relax
  [[ $status -eq 2 && $stderr == *"STEP 'relax' is already registered"* ]]
  run --separate-stderr httk_workflow_register_step
  [[ $status -eq 2 && $stderr == *"usage: httk_workflow_register_step STEP [FUNCTION]"* ]]
  # shellcheck disable=SC2154 # the library's registry, assigned when the library is sourced
  [[ ${_httk_workflow_steps[*]} == relax ]]
}

@test "a runner script under set -euo pipefail: a failing command inside a step exits nonzero, no outcome" {
  run --separate-stderr bash "$FIXTURES/runner.sh" fail-inside
  [[ $status -eq 3 ]]
  [[ ! -e $CONTROL/outcome.ready ]]
  [[ $output != *"not reached"* ]]
}

@test "a runner script under set -euo pipefail: steps publish, dispatch's status is the script's" {
  run --separate-stderr bash "$FIXTURES/runner.sh" advance
  [[ $status -eq 0 ]]
  [[ $(outcome_member next_step) == '"collect"' ]]
  [[ $(outcome_member runner_steps) == '["relax", "collect"]' ]]
  rm -r "$CONTROL/outcome.ready"
  run --separate-stderr bash "$FIXTURES/runner.sh" forget
  [[ $status -eq 0 ]]
  [[ $(outcome_member failure.code) == '"no_outcome"' ]]
  rm -r "$CONTROL/outcome.ready"
  HTTK_WORKFLOW_STEP=collect run --separate-stderr bash "$FIXTURES/runner.sh" twice
  [[ $status -eq 3 ]]
  assert_contains "$stderr" "httk_workflow_fail: this attempt has already published its outcome (succeed)"
  [[ $(outcome_member action) == '"succeed"' ]]
}
