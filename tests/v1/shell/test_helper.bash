# shellcheck shell=bash
# Shared setup of the v1 shell API tests: HTTK_DIR is the runner tree the package ships, each test
# works in its own run directory WORK (a task directory TASK holding ht.run.current), and the API is
# sourced into the test shell unless --no-source is given.
#
#   HTTK_DIR  packages/v1-compat/src/httk/workflow/v1/runner     API  $HTTK_DIR/Execution/tasks/ht_tasks_api.sh
#   TASK      a v1 task directory                                 WORK $TASK/ht.run.current (the cwd)

v1_test_setup() { # [--no-source]
  local variable
  HTTK_DIR=$(cd "$BATS_TEST_DIRNAME/../../../packages/v1-compat/src/httk/workflow/v1/runner" && pwd)
  API=$HTTK_DIR/Execution/tasks/ht_tasks_api.sh
  for variable in $(compgen -e); do # a hermetic environment: nothing HTTK_ or HT_ leaks in
    [[ $variable != HTTK_* && $variable != HT_* ]] || unset "$variable"
  done
  TASK=$BATS_TEST_TMPDIR/ht.task.any.t.start.0.unclaimed.3.running
  WORK=$TASK/ht.run.current
  mkdir -p "$WORK"
  cd "$WORK" || return 1
  export HTTK_DIR API TASK WORK HTTK_WORKFLOW_DURABLE=0
  if [[ ${1-} != --no-source ]]; then
    # shellcheck source=/dev/null # checked on its own
    . "$API"
  fi
}

# Fail unless FILE holds exactly TEXT (a newline is added to TEXT).
assert_file() { # <file> <text>
  local actual
  if [[ ! -f $1 ]]; then
    printf 'no file %s\n' "$1" >&2
    return 1
  fi
  actual=$(<"$1")
  if [[ $actual != "$2" ]]; then
    printf 'file %s holds:\n%s\nexpected:\n%s\n' "$1" "$actual" "$2" >&2
    return 1
  fi
}

# Fail unless TEXT contains NEEDLE.
assert_contains() { # <text> <needle>
  if [[ $1 != *"$2"* ]]; then
    printf 'expected to find %q in:\n%s\n' "$2" "$1" >&2
    return 1
  fi
}

# The entries of DIRECTORY (hidden ones included), sorted, one per line.
entries() { # [directory]
  (cd "${1:-.}" && LC_ALL=C command ls -A)
}
