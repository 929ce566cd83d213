#!/usr/bin/env bats
# The library as a guest in its caller's shell: it changes no option, trap, IFS or locale, leaks no
# variable, trips no ERR trap, and works under set -euo pipefail, noglob, noclobber and the glob options.

# Single-quoted scripts run in child shells, which expand them.
# shellcheck disable=SC2016

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  httk_test_setup --no-source
}

@test "sourcing and calling every public function leaves the caller's shell exactly as it was" {
  run --separate-stderr bash "$FIXTURES/hygiene.sh" "$LIBRARY"
  if [[ $status -ne 0 ]]; then
    printf '%s\n' "$stderr" >&2
    return 1
  fi
  "$PYTHON" -c 'import json, sys
raw = open(sys.argv[1], "rb").read()
outcome = json.loads(raw)
assert outcome["message"] == "hostile \"*\" ? [a] \\ \n\t\x01 é", outcome
assert raw == json.dumps(outcome, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"' "$OUTCOME"
}

@test "sourcing changes nothing visible at the top level: no set, shopt or trap in the file" {
  # Only definitions and _httk_workflow_ assignments run when the file is sourced.
  run grep -nE '^[[:space:]]*(set|shopt|trap|export|cd|umask)([[:space:]]|$)|^(IFS|LC_ALL|LANG)=' "$LIBRARY"
  [[ $status -eq 1 ]]
}

@test "sourcing twice keeps the registered steps; sourcing inside a function keeps globals global" {
  run --separate-stderr bash -c '
    load() { source "$HTTK_WORKFLOW_BASH_API"; }
    load
    relax() { httk_workflow_succeed; }
    httk_workflow_register_step relax
    load
    httk_workflow_dispatch
    printf "%s" "${_httk_workflow_steps[*]}"'
  [[ $status -eq 0 && $output == relax ]]
  [[ $(<"$OUTCOME") == *'"runner_steps":["relax"]}' ]]
}

@test "the library does not depend on the caller's functions or aliases named mv, mkdir or sync" {
  run --separate-stderr bash -c '
    mv() { echo "caller mv" >&2; return 1; }
    mkdir() { echo "caller mkdir" >&2; return 1; }
    sync() { echo "caller sync" >&2; return 1; }
    source "$HTTK_WORKFLOW_BASH_API"
    HTTK_WORKFLOW_DURABLE=1 httk_workflow_succeed'
  [[ $status -eq 0 && -z $stderr ]]
  [[ -e $OUTCOME ]]
}
