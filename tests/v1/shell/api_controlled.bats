#!/usr/bin/env bats
# Supervised runs: HT_TASK_RUN_CONTROLLED (timeout watchdog, checkers, the stdout checker, messages,
# return codes) and HT_TASK_FOLLOW_FILE, with real processes and no sleep-and-hope.

# Each @test runs in its own subshell; single-quoted scripts run in child shells, which expand them.
# shellcheck disable=SC2030,SC2031,SC2016,SC2154

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  v1_test_setup
}

# Wait (at most 20 s) until the shell condition holds.
await() { # <condition>
  local deadline=$((SECONDS + 20))
  until eval "$1"; do
    if ((SECONDS > deadline)); then
      printf 'timed out waiting for: %s\n' "$1" >&2
      return 1
    fi
    sleep 0.05
  done
}

# A command that records its pid, prints two lines and then runs for a long time.
long_command() {
  printf '%s' 'echo $$ >cmd.pid; echo line1; echo line2 >&2; exec sleep 1000'
}

@test "a command that ends by itself returns 0 whatever its status; its output lands in stdout.out" {
  run --separate-stderr HT_TASK_RUN_CONTROLLED 100 -- bash -c 'echo out; echo err >&2; exit 7'
  [[ $status -eq 0 ]]
  assert_contains "$output" out
  [[ $(sort stdout.out) == $'err\nout' ]]
  [[ -f ht.controlled.msgs && ! -s ht.controlled.msgs ]]
  [[ -z $(compgen -G 'ht.tmp.*') ]]
}

@test "a checker that exits 2 stops the run (return 2); its messages are gathered" {
  stopper() { # <message file> <watchdog pid>
    until [[ -s cmd.pid ]]; do sleep 0.05; done
    printf 'ZPOTRF\n' >"$1"
    kill -0 "$2"
    return 2
  }
  calm() { printf 'calm\n' >"$1"; }
  run HT_TASK_RUN_CONTROLLED 100 '' calm stopper -- bash -c "$(long_command)"
  [[ $status -eq 2 ]]
  assert_file ht.controlled.msgs $'calm\nZPOTRF'
  run kill -0 "$(<cmd.pid)"
  [[ $status -ne 0 ]]
  [[ -z $(compgen -G 'ht.tmp.*') ]]
}

@test "the stdout checker reads the output and can stop the run" {
  watch_output() { # <message file> <watchdog pid>
    local line
    while IFS= read -r line; do
      printf '%s\n' "$line"
      if [[ $line == line2 ]]; then
        printf 'SAW LINE2\n' >"$1"
        return 2
      fi
    done
  }
  run --separate-stderr HT_TASK_RUN_CONTROLLED 100 watch_output -- bash -c "$(long_command)"
  [[ $status -eq 2 ]]
  assert_file ht.controlled.msgs 'SAW LINE2'
  assert_file stdout.out $'line1\nline2'
}

@test "the watchdog stops a run that outlives its timeout (return 99, TIMEOUT recorded)" {
  run HT_TASK_RUN_CONTROLLED 1 -- bash -c "$(long_command)"
  [[ $status -eq 99 ]]
  assert_file ht.controlled.msgs TIMEOUT
  run kill -0 "$(<cmd.pid)"
  [[ $status -ne 0 ]]
}

@test "a checker follows a file until the run ends, through the watchdog pid" {
  follow_oszicar() { HT_TASK_FOLLOW_FILE OSZICAR "$2" | grep F= >"$1"; }
  run HT_TASK_RUN_CONTROLLED 100 '' follow_oszicar -- \
    bash -c 'for i in 1 2 3; do echo "$i F= -1.$i" >>OSZICAR; done; echo "  DAV: x" >>OSZICAR'
  [[ $status -eq 0 ]]
  assert_file ht.controlled.msgs $'1 F= -1.1\n2 F= -1.2\n3 F= -1.3'
}

@test "SIGTERM to the supervisor stops the run and returns 3" {
  (
    code=0
    HT_TASK_RUN_CONTROLLED 100 -- bash -c "$(long_command)" || code=$?
    echo "$code" >rc
  ) &
  await '[[ -s cmd.pid ]]'
  local supervisor
  supervisor=$(ps -o ppid= -p "$(<cmd.pid)")
  kill -TERM "${supervisor// /}"
  await '[[ -s rc ]]'
  assert_file rc 3
  run kill -0 "$(<cmd.pid)"
  [[ $status -ne 0 ]]
}

@test "checkers must be separated from the command by --" {
  run HT_TASK_RUN_CONTROLLED 100 checker1 checker2
  [[ $status -eq 1 ]]
  assert_contains "$output" "needs one argument '--'"
}

@test "HT_TASK_FOLLOW_FILE waits for the file, prints it from the start and stops when the pid exits" {
  sleep 1000 &
  local watched=$!
  HT_TASK_FOLLOW_FILE later.txt "$watched" >followed &
  local follower=$!
  printf 'first\nsecond\n' >later.txt
  await '[[ $(<followed) == *second* ]]'
  printf 'third\n' >>later.txt
  kill "$watched"
  wait "$follower"
  assert_file followed $'first\nsecond\nthird'
}
