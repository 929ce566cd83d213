#!/usr/bin/env bats
# Outcome documents: exact bytes (fixtures/outcomes/*.json, written by Python's json.dumps with the
# contract's member order), publication, one outcome per attempt, durability, and argument errors.

# Each @test runs in its own subshell (its assignments stay local on purpose); single-quoted scripts
# run in child shells; CALLS comes from use_call_log in test_helper.bash.
# shellcheck disable=SC2030,SC2031,SC2016,SC2153

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  httk_test_setup
}

register_two_steps() {
  relax() { :; }
  collect() { :; }
  httk_workflow_register_step relax
  httk_workflow_register_step collect
}

@test "every expected fixture is what Python's json.dumps writes, members in the contract's order" {
  local file
  for file in "$FIXTURES"/outcomes/*.json; do
    "$PYTHON" -c 'import json, sys
data = open(sys.argv[1], "rb").read()
document = json.loads(data)
again = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
assert data == again, sys.argv[1]
order = ["format", "format_version", "job_id", "activation_id", "attempt_id", "action",
         "next_step", "failure", "retry", "pause", "priority", "resources", "message", "runner_steps"]
assert sorted(document, key=order.index) == list(document), sys.argv[1]
failure = document.get("failure", {})
failure_order = ["code", "message", "details", "retryable"]
assert sorted(failure, key=failure_order.index) == list(failure), sys.argv[1]' "$file"
  done
}

@test "advance: minimal, and with every option in any order (contract member order)" {
  httk_workflow_advance collect
  assert_outcome advance-minimal
  rm -r "$CONTROL/outcome.ready"
  _httk_workflow_published=''
  register_two_steps
  httk_workflow_advance collect --message "relaxation converged" --resource procs=4 --priority 5 \
    --resources=mem=2000
  assert_outcome advance-full
}

@test "succeed: minimal, and with message and priority" {
  httk_workflow_succeed
  assert_outcome succeed-minimal
  rm -r "$CONTROL/outcome.ready"
  _httk_workflow_published=''
  register_two_steps
  httk_workflow_succeed --message=done --priority 0
  assert_outcome succeed-full
}

@test "fail: minimal, with details and retryable, and not retryable" {
  httk_workflow_fail vasp.nonconvergent "electronic minimization did not converge"
  assert_outcome fail-minimal
  rm -r "$CONTROL/outcome.ready"
  _httk_workflow_published=''
  register_two_steps
  httk_workflow_fail vasp.nonconvergent "electronic minimization did not converge" --retryable \
    --details '{"iterations":61,"log":"vasp/convergence.log"}'
  assert_outcome fail-full
  rm -r "$CONTROL/outcome.ready"
  _httk_workflow_published=''
  _httk_workflow_steps=() _httk_workflow_step_functions=()
  httk_workflow_fail x y --not-retryable
  assert_outcome fail-not-retryable
}

@test "retry and pause" {
  httk_workflow_retry "the node lost its scratch"
  assert_outcome retry-minimal
  rm -r "$CONTROL/outcome.ready"
  _httk_workflow_published=''
  httk_workflow_pause "check the INCAR by hand"
  assert_outcome pause-minimal
  rm -r "$CONTROL/outcome.ready"
  _httk_workflow_published=''
  register_two_steps
  httk_workflow_retry "the node lost its scratch" --message again --priority 900
  assert_outcome retry-full
}

@test "publication leaves exactly outcome.ready/outcome.json: one line, one newline, no draft" {
  httk_workflow_succeed --message "a
b"
  [[ -z $(leftover_drafts) ]]
  [[ $(ls -A "$CONTROL/outcome.ready") == outcome.json ]]
  [[ $(wc -l <"$OUTCOME") -eq 1 ]]
  [[ $(tail -c 1 "$OUTCOME" | od -An -c | tr -d ' ') == '\n' ]]
  [[ $_httk_workflow_published == succeed ]]
}

@test "a second outcome in the same shell returns 3 and leaves the first untouched" {
  httk_workflow_advance collect
  run --separate-stderr httk_workflow_succeed
  [[ $status -eq 3 ]]
  assert_contains "$stderr" "httk_workflow_succeed: this attempt has already published its outcome (advance)"
  assert_outcome advance-minimal
  [[ -z $(leftover_drafts) ]]
}

@test "a second outcome from another process (outcome.ready exists) returns 3" {
  httk_workflow_pause "check the INCAR by hand"
  run --separate-stderr bash -c 'source "$HTTK_WORKFLOW_BASH_API"; httk_workflow_fail x "another process"'
  [[ $status -eq 3 ]]
  assert_contains "$stderr" "already published its outcome in $CONTROL/outcome.ready"
  assert_outcome pause-minimal
}

@test "an outcome.ready that appears between the check and the rename is never replaced" {
  # A mkdir shim publishes a rival outcome right after the draft is created, so the library's own
  # check passes and the rename itself must refuse the nonempty destination.
  mkdir -p "$BATS_TEST_TMPDIR/shims"
  printf '#!/usr/bin/env bash\n%q "$@" || exit\n%q -p "%s"\necho rival >"%s"\n' \
    "$(command -v mkdir)" "$(command -v mkdir)" "$CONTROL/outcome.ready" "$OUTCOME" \
    >"$BATS_TEST_TMPDIR/shims/mkdir"
  chmod +x "$BATS_TEST_TMPDIR/shims/mkdir"
  PATH=$BATS_TEST_TMPDIR/shims:$PATH run --separate-stderr httk_workflow_succeed
  [[ $status -eq 3 ]]
  assert_contains "$stderr" "another outcome appeared in $CONTROL/outcome.ready first"
  [[ $(<"$OUTCOME") == rival && -z $(leftover_drafts) ]]
}

@test "durable: sync the file, then the draft, rename, then sync the control directory" {
  use_call_log
  export HTTK_WORKFLOW_DURABLE=1
  httk_workflow_succeed
  assert_outcome succeed-minimal
  mapfile -t calls <"$CALLS"
  [[ ${#calls[@]} -eq 3 ]]
  [[ ${calls[0]} =~ ^sync\ --\ (.*/outcome\.tmp\.[0-9]+\.[0-9]+)/outcome\.json\ (.*)$ ]]
  [[ ${BASH_REMATCH[1]} == "$CONTROL"/outcome.tmp.* && ${BASH_REMATCH[2]} == "${BASH_REMATCH[1]}" ]]
  [[ ${calls[1]} == "mv -T -- ${BASH_REMATCH[1]} $CONTROL/outcome.ready" ]]
  [[ ${calls[2]} == "sync -- $CONTROL" ]]
}

@test "not durable: no sync at all; without HTTK_WORKFLOW_DURABLE the context's durable member decides" {
  use_call_log
  httk_workflow_succeed
  [[ $(grep -c '^sync' "$CALLS") -eq 0 ]]
  sed 's/"durable": false/"durable": true/' "$FIXTURES/context.json" >"$BATS_TEST_TMPDIR/durable.json"
  rm -r "$CONTROL/outcome.ready"
  : >"$CALLS"
  run bash -c 'unset HTTK_WORKFLOW_DURABLE; HTTK_WORKFLOW_CONTEXT=$1
    source "$HTTK_WORKFLOW_BASH_API"; httk_workflow_succeed' _ "$BATS_TEST_TMPDIR/durable.json"
  [[ $status -eq 0 ]]
  [[ $(grep -c '^sync' "$CALLS") -eq 2 ]]
}

@test "a failed synchronization publishes nothing and removes the draft" {
  mkdir -p "$BATS_TEST_TMPDIR/shims"
  printf '#!/bin/sh\nexit 1\n' >"$BATS_TEST_TMPDIR/shims/sync"
  chmod +x "$BATS_TEST_TMPDIR/shims/sync"
  PATH=$BATS_TEST_TMPDIR/shims:$PATH HTTK_WORKFLOW_DURABLE=1 run --separate-stderr httk_workflow_succeed
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "cannot synchronize the outcome draft"
  [[ ! -e $CONTROL/outcome.ready && -z $(leftover_drafts) ]]
}

@test "no context or no control directory: return 1 with a message" {
  run --separate-stderr env -u HTTK_WORKFLOW_CONTEXT bash -c 'source "$HTTK_WORKFLOW_BASH_API"; httk_workflow_succeed'
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "HTTK_WORKFLOW_CONTEXT is not set"
  HTTK_WORKFLOW_CONTROL_DIR=$BATS_TEST_TMPDIR/missing run --separate-stderr httk_workflow_succeed
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "cannot create an outcome draft in $BATS_TEST_TMPDIR/missing"
}

# Run one invalid call: it must return 2, name the function and the problem on stderr, publish nothing.
check_invalid() { # <expected stderr fragment> <function> [argument...]
  local expected=$1
  shift
  run --separate-stderr "$@"
  if [[ $status -ne 2 || $stderr != *"$1: "*"$expected"* || -e $CONTROL/outcome.ready ]]; then
    printf 'call %q: status %s, stderr %q\n' "$*" "$status" "$stderr" >&2
    return 1
  fi
  [[ -z $(leftover_drafts) ]]
}

@test "invalid arguments return 2, name the argument, and publish nothing" {
  check_invalid "usage: httk_workflow_advance STEP" httk_workflow_advance
  check_invalid "STEP '-x' must be" httk_workflow_advance -x
  check_invalid "STEP 'a b' must be" httk_workflow_advance "a b"
  check_invalid "must be 1-128 bytes" httk_workflow_advance "$(printf 'a%.0s' {1..129})"
  check_invalid "--priority must be an integer from 0 through 999, not '1000'" httk_workflow_advance b --priority 1000
  check_invalid "--priority must be an integer from 0 through 999, not '07'" httk_workflow_advance b --priority 07
  check_invalid "--priority must be an integer from 0 through 999, not '-1'" httk_workflow_advance b --priority=-1
  check_invalid "--priority needs a value" httk_workflow_advance b --priority
  check_invalid "--priority is given twice" httk_workflow_advance b --priority 1 --priority 2
  check_invalid "--resource 'procs' must be NAME=INT" httk_workflow_advance b --resource procs
  check_invalid "--resource 'Procs=1' must be NAME=INT" httk_workflow_advance b --resource Procs=1
  check_invalid "--resource 'a--b=1' must be NAME=INT" httk_workflow_advance b --resource a--b=1
  check_invalid "--resource procs: '01' must be a non-negative integer" httk_workflow_advance b --resource procs=01
  check_invalid "--resource procs: '-1' must be" httk_workflow_advance b --resource procs=-1
  check_invalid "--resource procs: '9223372036854775808' must be" httk_workflow_advance b \
    --resource procs=9223372036854775808
  check_invalid "--resource procs is given twice" httk_workflow_advance b --resource procs=1 --resource procs=2
  check_invalid "--message must be a nonempty text" httk_workflow_advance b --message ""
  check_invalid "--message must be a nonempty text" httk_workflow_advance b --message $' \t\n'
  check_invalid "--message is not valid UTF-8" httk_workflow_advance b --message $'caf\xe9'
  check_invalid "unknown option --details (accepted: --priority --message --resource)" httk_workflow_advance b \
    --details '{}'
  check_invalid "unexpected argument 'c'" httk_workflow_advance b c
  check_invalid "unexpected argument 'extra'" httk_workflow_succeed extra
  check_invalid "unknown option --resource" httk_workflow_succeed --resource procs=1
  check_invalid "usage: httk_workflow_fail CODE MESSAGE" httk_workflow_fail code
  check_invalid "CODE '' must be 1 to 128 bytes" httk_workflow_fail "" message
  check_invalid "must be 1 to 128 bytes" httk_workflow_fail "$(printf 'c%.0s' {1..129})" message
  check_invalid "CODE 'a b' must be one token" httk_workflow_fail "a b" message
  check_invalid "must be one token" httk_workflow_fail $'a\tb' message
  check_invalid "must be one token" httk_workflow_fail $'a\x7fb' message
  check_invalid "must be one token" httk_workflow_fail $'no\xc2\xa0break' message
  check_invalid "must be one token" httk_workflow_fail $'ideographic\xe3\x80\x80space' message
  check_invalid "must be one token" httk_workflow_fail $'c1\xc2\x85control' message
  check_invalid "CODE is not valid UTF-8" httk_workflow_fail $'\xff' message
  check_invalid "MESSAGE must be a nonempty text" httk_workflow_fail code ""
  check_invalid "MESSAGE must be a nonempty text" httk_workflow_fail code $' \xe2\x80\xa8\xe3\x80\x80'
  check_invalid "--details must be a JSON object text" httk_workflow_fail code message --details '[1]'
  check_invalid "--details must be a JSON object text" httk_workflow_fail code message --details ' {}'
  check_invalid "--details must be one line" httk_workflow_fail code message --details $'{\n}'
  check_invalid "--not-retryable is given twice (or with its opposite)" httk_workflow_fail c m --retryable \
    --not-retryable
  check_invalid "unknown option --priority" httk_workflow_fail c m --priority 1
  check_invalid "usage: httk_workflow_retry REASON" httk_workflow_retry
  check_invalid "REASON must be a nonempty text" httk_workflow_retry " "
  check_invalid "usage: httk_workflow_pause REASON" httk_workflow_pause
  check_invalid "REASON must be a nonempty text" httk_workflow_pause ""
  check_invalid "unknown option --resource" httk_workflow_pause why --resource a=1
  # Nothing was remembered either: a valid outcome still publishes.
  httk_workflow_succeed
  assert_outcome succeed-minimal
}

@test "the largest resource amount and priority bounds are accepted" {
  httk_workflow_advance b --priority 999 --resource a=9223372036854775807 --resource b.c_d-e=0
  "$PYTHON" -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["priority"] == 999 and d["resources"] == {"a": 2**63 - 1, "b.c_d-e": 0}, d
assert list(d["resources"]) == ["a", "b.c_d-e"]' "$OUTCOME"
}
