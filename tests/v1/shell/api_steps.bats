#!/usr/bin/env bats
# The v1 step protocol and utilities of ht_tasks_api.sh: HT_TASK_INIT, the exit helpers, ht.vars,
# subtasks (HT_TASK_CREATE), templates, the RUNLOG helpers, compression and the arithmetic helpers.

# Each @test runs in its own subshell; single-quoted scripts run in child shells, which expand them.
# shellcheck disable=SC2030,SC2031,SC2016,SC2034,SC2154

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  v1_test_setup
}

@test "the arithmetic helpers evaluate awk expressions with abs, max and min" {
  [[ $(HT_FCALC '1/3') == 0.333333 ]]
  [[ $(HT_FCALC 'abs(-2.5) + max(1, 4) - min(3, 7)') == 3.5 ]]
  [[ $(HT_ECALC '2^0.5') == 1.41421356237310e+00 ]]
  HT_FTEST '0.01 * 8 > abs(-0.05)'
  run HT_FTEST '1 > 2'
  [[ $status -eq 1 ]]
}

@test "HT_FILE_MATCH looks one level deep and sees hidden entries" {
  mkdir -p d/sub
  touch d/sub/x.out d/.hidden
  HT_FILE_MATCH 'd/.h*'
  HT_FILE_MATCH 'd/s*'
  run HT_FILE_MATCH 'd/*.out'
  [[ $status -eq 1 ]]
  touch y.out
  HT_FILE_MATCH '*.out'
}

@test "HT_PATH_PREFIX takes the first free number from 0, gaps included, and prints the name" {
  [[ $(HT_PATH_PREFIX -d run.) == run.0 ]]
  [[ -d run.0 ]]
  touch run.2
  [[ $(HT_PATH_PREFIX -f run.) == run.1 ]]
  [[ -f run.1 ]]
  echo data >src
  [[ $(HT_PATH_PREFIX src run.) == run.3 ]]
  assert_file run.3 data
  [[ ! -e src ]]
  run HT_PATH_PREFIX absent run.
  [[ $status -ne 0 && $output != run.4 ]]
}

@test "HT_SPLIT_FIELDS prints one field, counted from 1" {
  [[ $(HT_SPLIT_FIELDS : 2 'a:b:c') == b ]]
  [[ $(HT_SPLIT_FIELDS ' ' 3 'x y z') == z ]]
  [[ -z $(HT_SPLIT_FIELDS : 5 'a:b') ]]
}

@test "the exit helpers write ht.nextstep and exit with the codes the runner maps" {
  run HT_TASK_NEXT relax2
  [[ $status -eq 2 ]] && assert_file ht.nextstep relax2
  run HT_TASK_SUBTASKS collect
  [[ $status -eq 3 ]] && assert_file ht.nextstep collect
  run HT_TASK_FINISHED
  [[ $status -eq 10 ]] && assert_file ht.nextstep ht_finished
  run HT_TASK_BROKEN
  [[ $status -eq 4 ]] && assert_file ht.nextstep ht_broken
}

@test "HT_TASK_INIT takes the step argument, then ht.nextstep, and sources ht.vars" {
  HT_TASK_INIT start
  [[ $STEP == start && $HT_NBR_NODES == 1 ]]
  printf 'relax1\n' >ht.nextstep
  printf 'RELAXSTEP=3\nNAME="a b"\n' >ht.vars
  HT_NBR_NODES=16
  HT_TASK_INIT start
  [[ $STEP == relax1 && $RELAXSTEP == 3 && $NAME == 'a b' && $HT_NBR_NODES == 16 ]]
}

@test "HT_TASK_INIT replays committed transactions before reading ht.nextstep" {
  mkdir ht.atomic.0 ht.tmp.atomic.1
  printf 'step3\n' >ht.atomic.0/ht.nextstep
  printf 'X=5\n' >ht.atomic.0/ht.vars
  printf 'step2\n' >ht.nextstep
  HT_TASK_INIT step2
  [[ $STEP == step3 && $X == 5 ]]
  [[ $(entries) == $'ht.nextstep\nht.vars' ]]
}

@test "HT_TASK_INIT ends the script at once on a decision already published" {
  printf 'ht_finished\n' >ht.nextstep
  run --separate-stderr bash -c '. "$API"; HT_TASK_INIT start; echo reached'
  [[ $status -eq 10 && -z $output ]]
  printf 'ht_broken\n' >ht.nextstep
  run --separate-stderr bash -c '. "$API"; HT_TASK_INIT start; echo reached'
  [[ $status -eq 4 && -z $output ]]
  assert_file ht.nextstep ht_broken
}

@test "HT_TASK_INIT probes mpirun for HT_NBR_NODES when it is unset" {
  mkdir bin
  printf '#!/bin/sh\nfor r in 1 2 3 4; do "$2" "$3"; done\n' >bin/mpirun
  chmod +x bin/mpirun
  PATH=$PWD/bin:$PATH HT_TASK_INIT start
  [[ $HT_NBR_NODES == 4 ]]
  [[ $(PATH=$PWD/bin:$PATH bash -c '. "$API"; HT_TASK_INIT x; printenv HT_NBR_NODES') == 4 ]]
}

@test "HT_TASK_STORE_VAR replaces or appends one KEY=VALUE line" {
  printf 'A=1\n  B = 2\nBB=3\n# note\n' >ht.vars
  HT_TASK_STORE_VAR B 20
  HT_TASK_STORE_VAR C 'x y'
  assert_file ht.vars $'A=1\nBB=3\n# note\nB=20\nC=x y'
  [[ ! -e ht.tmp.vars ]]
}

@test "HT_TASK_STORE_VAR inside a transaction replaces the whole ht.vars on commit, as in v1" {
  printf 'TOOCLOSESTEP=1\nRELAXSTEP=2\n' >ht.vars
  HT_TASK_ATOMIC_SECTION_START
  HT_TASK_STORE_VAR RELAXSTEP 3
  run HT_TASK_ATOMIC_SECTION_END_NEXT relax2
  [[ $status -eq 2 ]]
  cd "$WORK"
  assert_file ht.vars RELAXSTEP=3
}

@test "HT_TASK_LOG appends; HT_TASK_SET_PRIORITY writes ht.priority" {
  HT_TASK_LOG 'first line'
  HT_TASK_LOG second
  assert_file ht.log $'first line\nsecond'
  HT_TASK_SET_PRIORITY 5
  assert_file ht.priority 5
}

@test "HT_TASK_CLEANUP removes ht.vars, ht.controlled.msgs and ht.tmp.* only" {
  mkdir ht.tmp.dir
  touch ht.vars ht.controlled.msgs ht.tmp.file ht.tmp.dir/x ht.RUNLOG OUTCAR
  HT_TASK_CLEANUP
  [[ $(entries) == $'OUTCAR\nht.RUNLOG' ]]
}

@test "HT_TASK_COMPRESS bzips every file not named ht.*, subtask directories included, then ht.RUNLOG" {
  mkdir -p ht.task.any.s.start.0.none.3.finished
  echo o >OUTCAR
  echo c >ht.task.any.s.start.0.none.3.finished/CONTCAR
  echo v >ht.vars
  echo log >ht.RUNLOG
  echo z | bzip2 >old.bz2
  HT_TASK_COMPRESS
  [[ $(entries) == $'OUTCAR.bz2\nht.RUNLOG.bz2\nht.task.any.s.start.0.none.3.finished\nht.vars\nold.bz2' ]]
  [[ -f ht.task.any.s.start.0.none.3.finished/CONTCAR.bz2 ]]
  HT_TASK_UNCOMPRESS
  assert_file OUTCAR o
  assert_file ht.RUNLOG log
  assert_file old z
  assert_file ht.task.any.s.start.0.none.3.finished/CONTCAR c
}

@test "HT_TEMPLATE expands variables and command substitutions; a missing template ends the script" {
  printf 'ENCUT = $ENCUT\nNPAR = $(( 2 * 2 ))\nEOF\nlast\n' >INCAR.template
  ENCUT=520 HT_TEMPLATE INCAR.template INCAR
  assert_file INCAR $'ENCUT = 520\nNPAR = 4\nEOF\nlast'
  run HT_TEMPLATE absent out
  [[ $status -eq 1 && $output == 'HT_TEMPLATE: Template file missing.' ]]
}

@test "HT_TASK_CREATE publishes one subtask per line, through ht.tmp.task.*, with the defaults" {
  HT_TASK_CREATE '' < <(printf 'a 1 2\nb x\n\n') # not in a pipeline: its globals must reach us
  [[ $(entries) == $'ht.task.any.a.start.0.none.3.waitstart\nht.task.any.b.start.0.none.3.waitstart' ]]
  assert_file ht.task.any.a.start.0.none.3.waitstart/task_data 'a 1 2'
  [[ $STEP == start && $TASKSET == any && $PRIO == 3 && $LOCATION == ./ && -z $CALLBACK ]]
}

@test "HT_TASK_CREATE runs the callback inside each new subtask and skips existing ones" {
  setup_subtask() {
    cp "$TASK/ht_steps" .
    printf '%s\n' "$@" >args
  }
  printf '#!/bin/bash\n' >"$TASK/ht_steps"
  mkdir -p sub/ht.task.hpc.a.relax.2.unclaimed.1.running sub/ht.tmp.task.hpc.b.prepare.0.none.1.waitstart
  touch sub/ht.tmp.task.hpc.b.prepare.0.none.1.waitstart/stale
  HT_TASK_CREATE setup_subtask sub prepare hpc 1 < <(printf 'a\nb x y\n')
  [[ $(entries sub) == $'ht.task.hpc.a.relax.2.unclaimed.1.running\nht.task.hpc.b.prepare.0.none.1.waitstart' ]]
  [[ $(entries sub/ht.task.hpc.b.prepare.0.none.1.waitstart) == $'args\nht_steps' ]]
  assert_file sub/ht.task.hpc.b.prepare.0.none.1.waitstart/args $'b\nx\ny'
  [[ $STEP == prepare && $TASKSET == hpc && $PRIO == 1 && $LOCATION == sub ]]
}

@test "HT_TASK_CREATE durably publishes too" {
  HTTK_WORKFLOW_DURABLE=1
  printf 'a\n' | HT_TASK_CREATE ''
  [[ -f ht.task.any.a.start.0.none.3.waitstart/task_data ]]
}

@test "the RUNLOG helpers rebuild ht.RUNLOG from the base's inside a transaction" {
  printf 'old history\n' >ht.RUNLOG
  echo 'E0= -1.5' >OSZICAR
  HT_TASK_ATOMIC_SECTION_START
  HT_TASK_ATOMIC_RUNLOG_HEADLINE relax step 2
  HT_TASK_ATOMIC_RUNLOG_APPEND ../OSZICAR ../absent
  HT_TASK_ATOMIC_RUNLOG_NOTE 'converged'
  [[ $(entries) == ht.RUNLOG ]]
  run HT_TASK_ATOMIC_SECTION_END_NEXT cleanup
  cd "$WORK"
  mapfile -t lines <ht.RUNLOG
  [[ ${lines[0]} == 'old history' && ${lines[1]} == '*****************************************************' ]]
  assert_contains "${lines[2]}" ': relax step 2'
  [[ ${lines[4]} == '' && ${lines[5]} == '=====================================================' ]]
  [[ ${lines[6]} == OSZICAR && ${lines[8]} == 'E0= -1.5' && ${lines[10]} == '' && ${lines[11]} == converged ]]
  [[ ${#lines[@]} -eq 12 ]]
}
