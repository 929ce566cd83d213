# shellcheck shell=bash
# Shared setup of the Bash API tests: a hermetic attempt (fixture context.json, empty control directory
# and job directory in the test's own temporary directory) and the library sourced into the test shell.
#
#   FIXTURES  sdk-bash/tests/fixtures          LIBRARY  sdk-bash/httk-workflow.sh
#   CONTROL   the attempt control directory    JOB      the job payload directory
#   OUTCOME   $CONTROL/outcome.ready/outcome.json
#   PYTHON    the interpreter the tests (never the library) use to compute expected JSON

httk_test_setup() { # [--no-source]
  local variable
  FIXTURES=$BATS_TEST_DIRNAME/fixtures
  LIBRARY=$(cd "$BATS_TEST_DIRNAME/.." && pwd)/httk-workflow.sh
  PYTHON=${HTTK_WORKFLOW_PYTHON:-}
  if [[ -z $PYTHON ]]; then # the repository's interpreter starts faster than a version-manager shim
    PYTHON=$BATS_TEST_DIRNAME/../../.venv/bin/python
    [[ -x $PYTHON ]] || PYTHON=python3
  fi
  CONTROL=$BATS_TEST_TMPDIR/job/.httk-attempt.a6c2c973
  JOB=$BATS_TEST_TMPDIR/job
  OUTCOME=$CONTROL/outcome.ready/outcome.json
  mkdir -p "$CONTROL"
  for variable in $(compgen -e); do # a hermetic environment: nothing HTTK_ leaks in from outside
    [[ $variable != HTTK_* ]] || unset "$variable"
  done
  export HTTK_WORKFLOW_CONTEXT=$FIXTURES/context.json
  export HTTK_WORKFLOW_CONTROL_DIR=$CONTROL
  export HTTK_WORKFLOW_JOB_DIR=$JOB
  export HTTK_WORKFLOW_STEP=relax
  export HTTK_WORKFLOW_DURABLE=0
  export HTTK_WORKFLOW_BASH_API=$LIBRARY
  export FIXTURES LIBRARY PYTHON CONTROL JOB OUTCOME
  if [[ ${1-} != --no-source ]]; then
    # shellcheck source=/dev/null # the library is checked on its own
    source "$LIBRARY"
  fi
}

# Fail (showing both) unless the two files hold the same bytes.
assert_same_bytes() { # <expected file> <actual file>
  if ! cmp -s -- "$1" "$2"; then
    printf 'expected (%s):\n' "$1" >&2
    od -c -- "$1" | head -n 40 >&2
    printf 'actual (%s):\n' "$2" >&2
    od -c -- "$2" 2>&1 | head -n 40 >&2
    return 1
  fi
}

# Fail unless the published outcome is byte for byte the expected fixture outcomes/NAME.json.
assert_outcome() { # <name>
  assert_same_bytes "$FIXTURES/outcomes/$1.json" "$OUTCOME"
}

# Fail unless TEXT contains NEEDLE.
assert_contains() { # <text> <needle>
  if [[ $1 != *"$2"* ]]; then
    printf 'expected to find %q in:\n%s\n' "$2" "$1" >&2
    return 1
  fi
}

# Put logging shims for sync and mv first on PATH: each appends "<command> <arguments>" to $CALLS, then
# runs the real command.
use_call_log() {
  local name real
  CALLS=$BATS_TEST_TMPDIR/calls
  mkdir -p "$BATS_TEST_TMPDIR/shims"
  : >"$CALLS"
  for name in sync mv; do
    real=$(command -v "$name")
    printf '#!/usr/bin/env bash\nprintf "%%s\\n" "%s $*" >>"%s"\nexec %q "$@"\n' \
      "$name" "$CALLS" "$real" >"$BATS_TEST_TMPDIR/shims/$name"
    chmod +x "$BATS_TEST_TMPDIR/shims/$name"
  done
  export CALLS PATH=$BATS_TEST_TMPDIR/shims:$PATH
}

# The only outcome draft name left behind, if any (there should be none).
leftover_drafts() {
  local draft found=''
  for draft in "$CONTROL"/outcome.tmp.*; do
    [[ ! -e $draft ]] || found+="$draft "
  done
  printf '%s' "$found"
}
