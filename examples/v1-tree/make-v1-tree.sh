#!/usr/bin/env bash
# make-v1-tree.sh DIR: an httk v1 task tree as a campaign leaves it, for the demo and for trying the
# v1 compatibility package (`httk workflow v1 status|import`).
#
# Every task is named ht.task.<set>.<id>.<step>.<restarts>.<owner>.<priority>.<status> and holds the
# same executable ht_steps, written against httk v1's own shell API, so httk v1's taskmanager.sh runs
# this tree as it is. The tree holds one of each situation an import meets:
#
#   twostep   waitstart     fresh: start -> second -> finished
#   between   waitstep      parked between its two steps, ht.vars and a first result in ht.run.current
#   parent    waitsubtasks  waiting for its subtasks: sub1 (itself waiting for its subtask leaf, two
#                           levels deep) and sub2 (finished); collects them when they are done
#   spawner   waitstart     spawns s1 and s2 (s2 spawns its own), waits, collects
#   txn       running       abandoned by a dead manager two hours ago, restarted once: a committed
#                           transaction (next step step3) and an uncommitted one are left for replay
#   live      running       a live manager's (fresh heartbeat, touched now): an import leaves it alone
#   done, bad, slow, odd, cut   finished, broken, timeout, stopped (code 1), stopped by the watchdog (43)
#   ht.task.any.Si.2.…  a name with a dot in its id: not a v1 task name
#   ht.tmp.task.…, ht.tmp.staging/…  half-published and staged tasks, which v1 never runs
set -euo pipefail

if [[ $# -ne 1 ]]; then
    printf 'usage: %s DIR (a directory that does not exist yet)\n' "${0##*/}" >&2
    exit 2
fi
if [[ -e $1 ]]; then
    printf '%s: %s exists; give a new directory\n' "${0##*/}" "$1" >&2
    exit 2
fi
mkdir -p -- "$1"
cd -- "$1"

dead_owner=tskmgr-2024-01-01_00_00_00_12345
live_owner=tskmgr-2099-01-01_00_00_00_999
stamp=2024-01-01_12.00.00

# The step script every task runs, as a v1 template would have shipped it.
steps() {
    cat <<'STEPS'
#!/bin/bash
# demo-steps
# 1.0
# start -> second -> finished; spawn makes subtasks and collects them; a subtask made with the word
# "nested" starts by spawning a leaf of its own. One invocation runs one step.
. "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh
HT_TASK_INIT "$@"
HT_TASK_LOG "step $STEP"

subtask() { # <id> [nested]: the callback HT_TASK_CREATE runs inside each new subtask directory
    cp "$HT_TASK_TOP_DIR/ht_steps" .
    if [ "${2-}" = nested ]; then
        touch nested
    fi
}

case "$STEP" in
    start)
        if [ -e ../nested ]; then
            HT_TASK_NEXT spawn
        fi
        echo "prepared by step start" >prepared.txt
        HT_TASK_STORE_VAR ROUND 1
        HT_TASK_NEXT second
        ;;
    second | step3)
        HT_TASK_ATOMIC_SECTION_START
        echo "result of round ${ROUND:-0}" >result.txt
        HT_TASK_ATOMIC_SECTION_END_FINISHED
        ;;
    spawn)
        if [ -e ../nested ]; then
            HT_TASK_CREATE subtask ./ start any 1 <<<leaf
        else
            HT_TASK_CREATE subtask ./ start any 2 <<<$'s1\ns2 nested'
        fi
        HT_TASK_SUBTASKS collect
        ;;
    collect | gather)
        ls -d ht.task.* >collected.txt
        HT_TASK_FINISHED
        ;;
    freeze)
        exit 0
        ;;
    *)
        HT_TASK_BROKEN
        ;;
esac
STEPS
}

# task DIR [FILE=TEXT]...: a task directory with its ht_steps and the files given (parents made).
task() {
    local dir=$1 pair
    shift
    mkdir -p -- "$dir"
    steps >"$dir/ht_steps"
    chmod 755 "$dir/ht_steps"
    for pair in "$@"; do
        mkdir -p -- "$(dirname -- "$dir/${pair%%=*}")"
        printf '%s\n' "${pair#*=}" >"$dir/${pair%%=*}"
    done
}

# archive DIR: the ht.run.<stamp> a finished task keeps, with its compressed log.
archive() {
    mkdir -p -- "$1/ht.run.$stamp"
    echo ht_finished >"$1/ht.run.$stamp/ht.nextstep"
    echo "(the log of its steps)" | bzip2 >"$1/ht.run.$stamp/ht.taskmgr.stdout.bz2"
}

task ht.task.any.twostep.start.0.unclaimed.3.waitstart input.txt=input

task ht.task.any.between.second.0.unclaimed.3.waitstep \
    ht.run.current/ht.nextstep=second ht.run.current/ht.vars=ROUND=1 \
    ht.run.current/prepared.txt="prepared by step start" ht.taskmgr.stdout="(the log of step start)"

parent=ht.task.any.parent.collect.0.unclaimed.3.waitsubtasks
task "$parent" ht.run.current/ht.nextstep=collect ht.taskmgr.stdout="(the log of step spawn)"
sub1=$parent/ht.run.current/ht.task.any.sub1.gather.0.none.2.waitsubtasks
task "$sub1" ht.run.current/ht.nextstep=gather
task "$sub1/ht.run.current/ht.task.any.leaf.start.0.none.2.waitstart"
sub2=$parent/ht.run.current/ht.task.any.sub2.second.0.unclaimed.2.finished
task "$sub2"
archive "$sub2"

task ht.task.any.spawner.spawn.0.unclaimed.3.waitstart

txn=ht.task.any.txn.step2.1.$dead_owner.3.running
task "$txn" ht.run.current/ht.nextstep=step2 ht.run.current/oldfile=old ht.taskmgr.stdout="(log)" \
    ht.run.current/ht.atomic.0/ht.nextstep=step3 ht.run.current/ht.atomic.0/ht.vars=ROUND=2 \
    ht.run.current/ht.atomic.0/newfile=new ht.run.current/ht.atomic.0/ht.atommv.oldfile=oldfile.renamed \
    ht.run.current/ht.tmp.atomic.1/junk=half-written

task "ht.task.any.live.relax.0.$live_owner.3.running"
mkdir -p "ht.task.any.live.relax.0.$live_owner.3.running/ht.run.current" ht.taskmgrstats
touch "ht.taskmgrstats/alive.$live_owner"

task ht.task.any.done.second.0.unclaimed.3.finished
archive ht.task.any.done.second.0.unclaimed.3.finished
task ht.task.any.bad.relax1.0.unclaimed.3.broken ht.reason="Task gave 'broken' as return code."
mkdir ht.task.any.bad.relax1.0.unclaimed.3.broken/ht.run.current
task ht.task.any.slow.start.0.unclaimed.3.timeout ht.reason="Task timed out."
mkdir ht.task.any.slow.start.0.unclaimed.3.timeout/ht.run.current
undefined='This usually means something unexpected have returned an error.'
task ht.task.any.odd.start.0.unclaimed.3.stopped ht.reason="Task returned non-defined error code (1). $undefined"
task ht.task.any.cut.relax.0.unclaimed.3.stopped ht.reason="Task returned non-defined error code (43). $undefined"

task ht.task.any.Si.2.start.0.unclaimed.3.waitstart
mkdir -p ht.tmp.task.any.half.start.0.none.3.waitstart ht.tmp.staging/ht.task.any.hidden.start.0.unclaimed.3.waitstart

# Liveness is read from directory times, so they are set last: the abandoned task untouched for two
# hours, the live one touched now.
touch -d '2 hours ago' "$txn"
touch "ht.task.any.live.relax.0.$live_owner.3.running"
