#!/usr/bin/env bats
# v1 transactions: ht.tmp.atomic.<N> -> ht.atomic.<M> (the commit point) and their replay, as the
# reference's §1.8 describes them, through ht_tasks_api.sh and its library lib/atomic.sh.

# Each @test runs in its own subshell; single-quoted scripts run in child shells, which expand them.
# shellcheck disable=SC2030,SC2031,SC2016,SC2034,SC2154

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  v1_test_setup
}

@test "a section opens the first free ht.tmp.atomic.<N>, gaps reused, and works inside it" {
  mkdir ht.tmp.atomic.0 ht.tmp.atomic.2
  HT_TASK_ATOMIC_SECTION_START
  [[ $PWD == "$WORK/ht.tmp.atomic.1" ]]
}

@test "END_NEXT commits, replays and exits 2: staged files and renames land in the base" {
  echo old >oldfile
  echo keep >kept
  run bash -c '. "$API"
    HT_TASK_ATOMIC_SECTION_START
    echo new >newfile
    echo X=5 >ht.vars
    HT_TASK_ATOMIC_MV oldfile oldfile.renamed
    HT_TASK_ATOMIC_SECTION_END_NEXT step3
    echo unreachable'
  [[ $status -eq 2 && -z $output ]]
  [[ $(entries) == $'ht.nextstep\nht.vars\nkept\nnewfile\noldfile.renamed' ]]
  assert_file ht.nextstep step3
  assert_file oldfile.renamed old
}

@test "END_SUBTASKS, END_FINISHED and END_BROKEN exit 3, 10 and 4 after the commit" {
  local end code
  for end in 'SUBTASKS collect:3:collect' 'FINISHED:10:ht_finished' 'BROKEN:4:ht_broken'; do
    IFS=: read -r call code text <<<"$end"
    run bash -c ". \"\$API\"; HT_TASK_ATOMIC_SECTION_START; touch staged; HT_TASK_ATOMIC_SECTION_END_$call"
    [[ $status -eq $code ]]
    assert_file ht.nextstep "$text"
    [[ -f staged && -z $(compgen -G 'ht.*atomic*') ]]
    rm staged
  done
}

@test "a commit takes the first free ht.atomic.<M> and leaves replay to the caller" {
  mkdir ht.atomic.0
  HT_TASK_ATOMIC_SECTION_START
  touch x
  HT_TASK_ATOMIC_SECTION_END
  [[ $PWD == "$WORK" && -f ht.atomic.1/x && ! -e ht.tmp.atomic.0 ]]
}

@test "END refuses outside a transaction" {
  run HT_TASK_ATOMIC_SECTION_END
  [[ $status -eq 1 ]]
  assert_contains "$output" 'is not an open transaction'
}

@test "replay discards uncommitted work and applies committed transactions in C order (10 before 2)" {
  mkdir ht.atomic.2 ht.atomic.10 ht.tmp.atomic.3
  echo from-10 >ht.atomic.10/value
  echo from-2 >ht.atomic.2/value
  echo junk >ht.tmp.atomic.3/value
  HT_TASK_ATOMIC_EXEC
  [[ $(entries) == value ]]
  assert_file value from-2
}

@test "a rename record is removed even when its rename fails; renaming into ht.tmp.atomic.* deletes" {
  echo log >ht.taskmgr.stdout
  mkdir ht.atomic.0
  echo ht.tmp.atomic.drop >ht.atomic.0/ht.atommv.ht.taskmgr.stdout
  echo anything >ht.atomic.0/ht.atommv.absent
  HT_TASK_ATOMIC_EXEC
  [[ -z $(entries) ]]
}

@test "a rename record may name a path below the base and one with spaces" {
  mkdir -p ht.atomic.0 'archive dir'
  echo data >'a file'
  printf 'archive dir/renamed\n' >'ht.atomic.0/ht.atommv.a file'
  HT_TASK_ATOMIC_EXEC
  assert_file 'archive dir/renamed' data
  [[ $(entries) == 'archive dir' ]]
}

@test "a hidden entry keeps the transaction for the next replay; its visible entries are applied" {
  mkdir ht.atomic.0
  touch ht.atomic.0/.hidden ht.atomic.0/visible
  HT_TASK_ATOMIC_EXEC
  [[ -f visible && -f ht.atomic.0/.hidden ]]
  rm ht.atomic.0/.hidden
  HT_TASK_ATOMIC_EXEC
  [[ $(entries) == visible ]]
}

@test "replay is re-entrant: a replay stopped after the renames is finished by the next one" {
  echo old >oldfile
  mkdir ht.atomic.0
  echo new >ht.atomic.0/newfile
  echo oldfile.renamed >ht.atomic.0/ht.atommv.oldfile
  # the state a replay killed right after its renames leaves: renamed, record gone, files not moved
  mv oldfile oldfile.renamed
  rm ht.atomic.0/ht.atommv.oldfile
  HT_TASK_ATOMIC_EXEC
  [[ $(entries) == $'newfile\noldfile.renamed' ]]
  # and one killed before its record was removed: the rename is retried and fails harmlessly
  mkdir ht.atomic.0
  echo oldfile.renamed >ht.atomic.0/ht.atommv.oldfile
  HT_TASK_ATOMIC_EXEC
  [[ $(entries) == $'newfile\noldfile.renamed' ]]
  assert_file oldfile.renamed old
}

@test "replay works whatever the caller's glob and error options" {
  mkdir ht.atomic.0 ht.tmp.atomic.1
  touch ht.atomic.0/a
  set -euf
  shopt -s failglob dotglob
  HT_TASK_ATOMIC_EXEC
  [[ $- == *f* ]] && shopt -q failglob && shopt -q dotglob && ! shopt -q nullglob
  set +euf
  shopt -u failglob dotglob
  [[ $(entries) == a ]]
}

@test "a durable commit and replay synchronize and still work" {
  HTTK_WORKFLOW_DURABLE=1
  run bash -c '. "$API"; HT_TASK_ATOMIC_SECTION_START; mkdir d; touch d/f; HT_TASK_ATOMIC_SECTION_END_FINISHED'
  [[ $status -eq 10 && -f d/f ]]
}

@test "sourcing the API changes no shell option and defines only HT_ and _ht functions" {
  run bash -c '
    before=$(set +o; shopt -p; trap -p)
    funcs_before=$(compgen -A function)
    . "$API"
    after=$(set +o; shopt -p; trap -p)
    [[ $before == "$after" ]] || { echo "options or traps changed"; exit 1; }
    comm -13 <(printf "%s\n" "$funcs_before") <(compgen -A function) | grep -v -e "^HT_" -e "^_ht_" && exit 1
    exit 0'
  [[ $status -eq 0 ]]
}

@test "an unmodified v1-style ht_steps script runs through its steps with the API" {
  cat >"$TASK/ht_steps" <<'S'
#!/bin/bash
. "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh
HT_TASK_INIT "$@"
case "$STEP" in
  start) HT_TASK_STORE_VAR COUNT 1; HT_TASK_NEXT relax ;;
  relax)
    HT_TASK_ATOMIC_SECTION_START
    echo "result $COUNT" > result
    HT_TASK_STORE_VAR COUNT $((COUNT + 1))
    HT_TASK_ATOMIC_SECTION_END_NEXT cleanup ;;
  cleanup) HT_TASK_CLEANUP; HT_TASK_FINISHED ;;
esac
S
  chmod +x "$TASK/ht_steps"
  local step=start code
  for code in 2 2 10; do
    run ../ht_steps "$step"
    [[ $status -eq $code ]]
    step=$(<ht.nextstep)
  done
  [[ $(entries) == $'ht.nextstep\nresult' ]]
  assert_file result 'result 1'
}
