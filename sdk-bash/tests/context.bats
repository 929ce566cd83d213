#!/usr/bin/env bats
# Reading context.json (fixtures/context.json is laid out exactly as the manager's json.dumps(indent=2)
# writes it) and resolving settings in their Bash layers.

# Each @test runs in its own subshell, so its exports are meant to stay local to it.
# shellcheck disable=SC2030,SC2031

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  httk_test_setup
}

@test "top-level scalars: strings, integers, booleans and null as text" {
  local value
  httk_workflow_context value job_id
  [[ $value == 01234567-89ab-cdef-0123-456789abcdef ]]
  httk_workflow_context value attempt_ordinal
  [[ $value == 2 ]]
  httk_workflow_context value is_unclean_restart
  [[ $value == true ]]
  httk_workflow_context value durable
  [[ $value == false ]]
  httk_workflow_context value data_generation
  [[ $value == null ]]
  httk_workflow_context value data_dir # the last member, without a trailing comma
  [[ $value == null ]]
  httk_workflow_context value placement
  [[ $value == project-17/0/03a ]]
}

@test "string escapes decode to UTF-8: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX and surrogate pairs" {
  local value
  export HTTK_WORKFLOW_CONTEXT=$FIXTURES/context-escapes.json
  httk_workflow_context value escaped
  [[ $value == $'q" b\\ s/ b\b f\f n\n r\r t\t e\xc3\xa9 euro\xe2\x82\xac smile\xf0\x9f\x98\x80 raw \xc3\xa9' ]]
  httk_workflow_context value upper_hex
  [[ $value == $'\xc3\xa9\xf0\x9f\x98\x80' ]]
  httk_workflow_context value controls
  [[ $value == $'\x01\x1f\x7f' ]]
  httk_workflow_context value empty
  [[ -z $value ]]
  httk_workflow_context value backslash_end
  [[ $value == "\\" ]]
  httk_workflow_context value exponent
  [[ $value == 1.5e-07 ]]
  httk_workflow_context value negative
  [[ $value == -3 ]]
}

@test "undecodable strings return 1: NUL, lone surrogates, unknown and short escapes" {
  export HTTK_WORKFLOW_CONTEXT=$FIXTURES/context-escapes.json
  local member expected
  for member in nul lone_high lone_low bad_escape short_u; do
    run --separate-stderr httk_workflow_context value "$member"
    [[ $status -eq 1 ]]
    case $member in
      nul) expected="holds a NUL character, which a Bash string cannot hold" ;;
      lone_*) expected="holds a lone UTF-16 surrogate" ;;
      bad_escape) expected="has an invalid escape \\x" ;;
      short_u) expected="has a malformed \\u escape" ;;
    esac
    assert_contains "$stderr" "httk_workflow_context: context member '$member' $expected"
  done
}

@test "a missing member or an object or array member returns 1 with a message" {
  run --separate-stderr httk_workflow_context value no_such_member
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "$FIXTURES/context.json has no member 'no_such_member'"
  for member in resources settings children; do
    run --separate-stderr httk_workflow_context value "$member"
    [[ $status -eq 1 ]]
    assert_contains "$stderr" "context member '$member' is a JSON object or array, not a scalar"
  done
  # Members nested inside objects are not top-level members.
  run --separate-stderr httk_workflow_context value procs
  [[ $status -eq 1 ]]
}

@test "wrong calls return 2" {
  run --separate-stderr httk_workflow_context value
  [[ $status -eq 2 && $stderr == *"usage: httk_workflow_context VAR MEMBER"* ]]
  run --separate-stderr httk_workflow_context "not a name" step
  [[ $status -eq 2 && $stderr == *"VAR 'not a name' must be a shell variable name"* ]]
  run --separate-stderr httk_workflow_context _hw_raw step
  [[ $status -eq 2 ]]
}

@test "context.json is read once per process" {
  local value
  cp "$FIXTURES/context.json" "$BATS_TEST_TMPDIR/context.json"
  export HTTK_WORKFLOW_CONTEXT=$BATS_TEST_TMPDIR/context.json
  httk_workflow_context value step
  [[ $value == relax ]]
  sed -i 's/"step": "relax"/"step": "changed"/' "$BATS_TEST_TMPDIR/context.json"
  httk_workflow_context value step
  [[ $value == relax ]]
  rm "$BATS_TEST_TMPDIR/context.json"
  httk_workflow_context value attempt_id
  [[ $value == a6c2c973-29e1-44e2-9649-ae419e340ac4 ]]
}

@test "a context in another layout, an unreadable one, or none at all returns 1" {
  export HTTK_WORKFLOW_CONTEXT=$FIXTURES/context-compact.json
  run --separate-stderr httk_workflow_context value step
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "is not in the layout the manager writes"
  export HTTK_WORKFLOW_CONTEXT=$BATS_TEST_TMPDIR/absent.json
  run --separate-stderr httk_workflow_context value step
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "cannot read the attempt context $BATS_TEST_TMPDIR/absent.json"
  unset HTTK_WORKFLOW_CONTEXT
  run --separate-stderr httk_workflow_context value step
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "HTTK_WORKFLOW_CONTEXT is not set"
}

@test "settings: the workspace snapshot in context.json, scalars only" {
  local value
  httk_workflow_setting value vasp.command
  [[ $value == "srun -n 32 vasp_std" ]]
  httk_workflow_setting value vasp.threads
  [[ $value == 4 ]]
  httk_workflow_setting value vasp.ratio
  [[ $value == -0.0005 ]]
  httk_workflow_setting value vasp.gamma
  [[ $value == false ]]
  httk_workflow_setting value vasp.quoted
  [[ $value == $'say "hi"\\ \xc3\xa9 \xf0\x9f\x98\x80 tab\tnl\n' ]]
  httk_workflow_setting value late # after nested arrays and objects
  [[ $value == last ]]
  for name in vasp.potentials vasp.nested vasp.empty; do
    run --separate-stderr httk_workflow_setting value "$name" fallback
    [[ $status -eq 1 ]]
    assert_contains "$stderr" "the setting $name is a JSON object or array, not a scalar"
  done
  # Members of a nested setting object are not settings.
  run --separate-stderr httk_workflow_setting value a
  [[ $status -eq 1 ]]
}

@test "settings: HTTK_<NAME> first, then context.json, then the default; null counts as unset" {
  local value
  HTTK_VASP_COMMAND="mpirun vasp" httk_workflow_setting value vasp.command
  [[ $value == "mpirun vasp" ]]
  HTTK_VASP_COMMAND='' httk_workflow_setting value vasp.command default
  [[ -z $value ]]
  httk_workflow_setting value vasp.none default
  [[ $value == default ]]
  httk_workflow_setting value not.there "the default"
  [[ $value == "the default" ]]
  HTTK_NOT_THERE=from-env httk_workflow_setting value not.there "the default"
  [[ $value == from-env ]]
  # The protocol's own namespace is never a setting layer.
  HTTK_WORKFLOW_SECRET=from-env httk_workflow_setting value workflow.secret
  [[ $value == x ]]
}

@test "settings: the job's inputs come first, scalars only, as in the Python SDK" {
  local value
  httk_workflow_setting value input.only
  [[ $value == "from the job" ]]
  HTTK_VASP_SHADOWED=2 httk_workflow_setting value vasp.shadowed # an input shadows every later layer
  [[ $value == 16 ]]
  httk_workflow_setting value kpoints
  [[ $value == 8 ]]
  httk_workflow_setting value nothing fallback # a null input falls through to the next layer
  [[ $value == fallback ]]
  run --separate-stderr httk_workflow_setting value structure
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "the job input structure is a JSON object or array, not a scalar"
  # Members of a nested input object are not settings.
  httk_workflow_setting value lattice none
  [[ $value == none ]]
}

@test "settings without a manager: the environment and the default still work" {
  local value
  unset HTTK_WORKFLOW_CONTEXT
  HTTK_VASP_COMMAND=vasp_gam httk_workflow_setting value vasp.command
  [[ $value == vasp_gam ]]
  httk_workflow_setting value vasp.command vasp_std
  [[ $value == vasp_std ]]
}

@test "settings: unset without default returns 1; invalid names and calls return 2" {
  run --separate-stderr httk_workflow_setting value not.there
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "the setting not.there is not set (no job input, HTTK_NOT_THERE unset"
  for name in Vasp.command vasp..command .vasp vasp. 'vasp command' '' "$(printf 'a%.0s' {1..129})"; do
    run --separate-stderr httk_workflow_setting value "$name" default
    [[ $status -eq 2 ]]
    assert_contains "$stderr" "must be a dotted lowercase setting name"
  done
  run --separate-stderr httk_workflow_setting value
  [[ $status -eq 2 ]]
  run --separate-stderr httk_workflow_setting value a b c
  [[ $status -eq 2 ]]
}
