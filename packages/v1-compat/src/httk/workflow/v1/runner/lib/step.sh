# shellcheck shell=bash disable=SC2034,SC2153,SC2154 # V1_*, V1N_*, D_* and _ht_matches are shared by lib/*.sh
# step.sh: one activation of a v1 task: what to run, running it as v1's task manager did, and the
# decision its exit code means (reference §2.1-§2.3, §1.9).
#
# Order of one activation, each point a place a crash may stop it:
#   1. locate the task directory; on an unclean restart of an activation that recorded its decision,
#      complete that decision (apply.sh) without running anything;
#   2. replay pending transactions in the task directory and ht.run.current (v1's claim-time replay);
#      an ht.run.resume directory becomes ht.run.current (the previous one archived);
#   3. a decision that needs no program: an imported terminal task, too many restarts, an imported
#      waitsubtasks parent with active subtasks, ht.nextstep holding ht_finished / ht_broken, or naming
#      a step other than this activation's (a decision a crashed earlier run committed);
#   4. run `../ht_steps STEP` in ht.run.current (or ./ht_run STEP in the task directory) with the v1
#      environment, stdin /dev/null, output appended to ht.taskmgr.stdout, in the runner's own process
#      group (so the manager's cancellation reaches it) under the HT_TASKMGR_TIMEOUT watchdog;
#   5. replay again (a script killed between its commit and its replay), map the exit code, record the
#      decision in .httk-job/state.json, and apply it (apply.sh).

# Read what the activation and the job's v1 inputs say into V1_* globals. Returns 0, or 1 with a message.
# Each context or input read costs a quarter of a millisecond: what only some steps need is read there
# (V1_ACTIVATION by _v1_activation, v1.bzip2log by the archive), the name fields come from one input
# (v1.name, the task's name when it became this job; a stale running one counts one more restart, as
# v1 counted it when it claimed the task), and the job key and placement from the exported paths.
_v1_load() {
  local timeout name
  V1_STEP=$HTTK_WORKFLOW_STEP V1_ATTEMPT_REASON=${HTTK_WORKFLOW_ATTEMPT_REASON-} V1_ACTIVATION=''
  V1_JOB_KEY=${HTTK_WORKFLOW_JOB_DIR##*/}
  V1_PLACEMENT=${HTTK_WORKFLOW_JOB_DIR#"$HTTK_WORKFLOW_WORKSPACE_DIR"/}
  V1_PLACEMENT=${V1_PLACEMENT%/*}
  httk_workflow_context V1_ACTIVATION_ORDINAL activation_ordinal || return 1
  httk_workflow_context V1_TOTAL_ATTEMPTS total_attempts || return 1
  # The seven fields of the task's v1 name when it became this job (v1.name): one read, not seven.
  if ! httk_workflow_setting name v1.name 2>/dev/null || ! _v1_parse_name "$name"; then
    printf 'httk v1: this job was not made from a v1 task (its input v1.name is no v1 task name)\n' >&2
    return 1
  fi
  V1_NAME=$name V1_SET=$V1N_SET V1_ID=$V1N_ID V1_PRIO=$V1N_PRIO V1_ORIGIN_STATUS=$V1N_STATUS
  V1_ORIGIN_RESTARTS=$V1N_RESTARTS
  [[ $V1N_STATUS != running ]] || V1_ORIGIN_RESTARTS=$((V1N_RESTARTS + 1))
  httk_workflow_setting timeout v1.timeout "${HT_TASKMGR_TIMEOUT:-21600}"
  httk_workflow_setting V1_WRAP v1.wrap "${HT_TASKMGR_WRAP-}"
  if [[ $timeout == *[!0-9]* || -z $timeout ]]; then
    printf 'httk v1: v1.timeout (%s) must be a whole number of seconds\n' "$timeout" >&2
    return 1
  fi
  V1_TIMEOUT=$((10#$timeout)) V1_ATTEMPTS=''
  # v1's counter: claims of a stale running task; here, the retries of every activation so far.
  V1_RESTARTS=$((V1_ORIGIN_RESTARTS + V1_TOTAL_ATTEMPTS - V1_ACTIVATION_ORDINAL))
}

# The v1 attempt limit into V1_ATTEMPTS (read once, when a restart is checked or a step runs).
# Returns 0, or 1 with a message.
_v1_attempts() {
  local attempts
  [[ -z $V1_ATTEMPTS ]] || return 0
  httk_workflow_setting attempts v1.attempts "${HT_TASKMGR_ATTEMPTS:-10}"
  if [[ $attempts == *[!0-9]* || -z $attempts ]]; then
    printf 'httk v1: v1.attempts (%s) must be a whole number\n' "$attempts" >&2
    return 1
  fi
  V1_ATTEMPTS=$((10#$attempts))
}

# This activation's id into V1_ACTIVATION (read once). Returns 0, or 1 with a message.
_v1_activation() {
  [[ -n $V1_ACTIVATION ]] || httk_workflow_context V1_ACTIVATION activation_id
}

# The program of the task directory into V1_PROGRAM (ht_steps first, then ht_run, else empty) and the
# directory it runs in into V1_RUN_DIR.
_v1_program() {
  V1_PROGRAM='' V1_RUN_DIR=$V1_TASK/ht.run.current
  if [[ -e $V1_TASK/ht_steps ]]; then
    V1_PROGRAM=ht_steps
  elif [[ -e $V1_TASK/ht_run ]]; then
    V1_PROGRAM=ht_run V1_RUN_DIR=$V1_TASK
  fi
}

# v1's claim-time replay (task directory, then ht.run.current), after adopting an ht.run.resume.
_v1_preflight() {
  _v1_replay "$V1_TASK" || :
  [[ ! -d $V1_TASK/ht.run.resume ]] || _v1_resume
  [[ ! -d $V1_TASK/ht.run.current ]] || _v1_replay "$V1_TASK/ht.run.current" || :
}

# Replay the transactions of BASE (lib/atomic.sh, sourced only when BASE holds an ht.atomic.* or
# ht.tmp.atomic.* entry: a step asks four times, and most steps leave none). Returns what the replay does.
_v1_replay() { # <base>
  local entry
  for entry in "$1"/ht.atomic.* "$1"/ht.tmp.atomic.*; do
    if [[ -e $entry || -L $entry ]]; then
      _v1_need atomic || return 1
      _ht_atomic_replay "$1"
      return
    fi
  done
}

# A decision that needs no program run into D_KIND / D_STEP; returns 1 when the program must run.
_v1_decide_before() {
  local active
  D_KIND='' D_STEP='' D_EXIT=-1
  if [[ $V1_ACTIVATION_ORDINAL == 1 && $V1_ATTEMPT_REASON != manual_continue ]]; then
    case $V1_ORIGIN_STATUS in
      finished | broken | timeout | stopped)
        D_KIND=imported
        return 0
        ;;
    esac
  fi
  if [[ $V1_ATTEMPT_REASON != manual_continue ]] && ((V1_RESTARTS > 0)); then
    _v1_attempts || exit 1
    if ((V1_RESTARTS > V1_ATTEMPTS)); then
      D_KIND=restarts
      return 0
    fi
  fi
  _v1_effective_step
  [[ -z $D_KIND ]] || return 0
  if [[ $V1_ACTIVATION_ORDINAL == 1 && $V1_ATTEMPT_REASON != manual_continue &&
    $V1_ORIGIN_STATUS == waitsubtasks ]]; then
    _v1_subtasks active
    if ((active > 0)); then
      D_KIND=wait D_STEP=$V1_EFFECTIVE
      return 0
    fi
  fi
  return 1
}

# The step to run into V1_EFFECTIVE: this activation's after an operator's override_step (its first
# attempt; written to ht.nextstep, as v1 scripts read it there), else ht.nextstep's when present, else
# this activation's.
# A sentinel, or another step than this activation's, is a decision already taken (D_KIND).
_v1_effective_step() {
  local nextstep=$V1_RUN_DIR/ht.nextstep active=0
  V1_EFFECTIVE=$V1_STEP
  if [[ $V1_ATTEMPT_REASON == override_step ]]; then
    command mkdir -p -- "$V1_RUN_DIR"
    printf '%s\n' "$V1_STEP" >"$nextstep"
    return 0
  fi
  if [[ -f $nextstep ]]; then
    IFS= read -r V1_EFFECTIVE <"$nextstep" || :
  fi
  case $V1_EFFECTIVE in
    ht_finished) D_KIND=finished ;;
    ht_broken) D_KIND=broken ;;
    "$V1_STEP") ;;
    *)
      # A decision an earlier run committed: the step after it, after its subtasks when it left any
      # waiting (the run that created them was cut off between its exit 3 and its outcome).
      _v1_next_step "$V1_EFFECTIVE" advance
      [[ $D_KIND != advance ]] || _v1_subtasks active
      ((active == 0)) || D_KIND='wait'
      _v1_say "ht.nextstep names $V1_EFFECTIVE, decided before this activation ($V1_STEP) ran: $D_KIND"
      ;;
  esac
}

# D_KIND := KIND with D_STEP := STEP when STEP is a valid step name, else D_KIND := invalid.
_v1_next_step() { # <step> <kind>
  if _v1_is_step "$1"; then
    D_KIND=$2 D_STEP=$1
  else
    D_KIND=invalid D_STEP=$1
  fi
}

# Run the program with the v1 environment under the watchdog: V1_EXIT (its status) and V1_TIMED_OUT.
# Returns 1 when this runner was asked to stop (the manager's cancellation): publish nothing then.
_v1_run() {
  local program log status=0
  local -a argv
  [[ $V1_PROGRAM != ht_steps || -d $V1_RUN_DIR ]] || command mkdir -p -- "$V1_RUN_DIR"
  log=$V1_TASK/ht.taskmgr.stdout
  cd -P -- "$V1_TASK" || return 1
  export HT_TASK_TOP_DIR=$PWD
  cd -P -- "$V1_RUN_DIR" || return 1
  export HT_TASK_CURRENT_DIR=$PWD HT_TASK_STEP=$V1_EFFECTIVE TASKMGRPID=$$ HTTK_DIR
  export HT_TASKMGR_TIMEOUT=$V1_TIMEOUT HT_TASKMGR_WRAP=$V1_WRAP HT_TASKMGR_SET=$V1_SET
  _v1_attempts || return 1
  export HT_TASKMGR_ROOTDIR=$HTTK_WORKFLOW_WORKSPACE_DIR HT_TASKMGR_ATTEMPTS=$V1_ATTEMPTS
  if [[ $V1_PROGRAM == ht_steps ]]; then
    export HT_TASK_RUN_NAME=ht.run.current
    program=../ht_steps
  else
    export HT_TASK_RUN_NAME=.
    program=./ht_run
  fi
  argv=("$program" "$V1_EFFECTIVE")
  [[ -z $V1_WRAP ]] || argv=("$V1_WRAP" "${argv[@]}")
  V1_TIMED_OUT=0 V1_STOP=0 V1_PID='' V1_SLEEPER=''
  trap _v1_on_stop TERM INT HUP
  if [[ -n $V1_CALLER_HAS_LC_ALL ]]; then
    LC_ALL=$V1_CALLER_LC_ALL "${argv[@]}" </dev/null >>"$log" 2>&1 &
  else
    "${argv[@]}" </dev/null >>"$log" 2>&1 &
  fi
  V1_PID=$!
  if ((V1_TIMEOUT > 0)); then
    trap _v1_on_child CHLD
    command sleep "$V1_TIMEOUT" &
    V1_SLEEPER=$!
  fi
  # `wait PID` has the program's status however early it ended (`wait -n` misses a job the shell has
  # already reaped and waits for the watchdog instead). A trapped signal interrupts it with a status
  # above 128 (V1_WOKEN says so) while the program may run on: wait again, which returns the status
  # the shell kept when the program has ended meanwhile. The manager's TERM reaches the program too.
  while :; do
    V1_WOKEN=0 status=0
    wait "$V1_PID" || status=$?
    ((status > 128 && V1_WOKEN)) || break
  done
  trap - CHLD
  [[ -z $V1_SLEEPER ]] || kill "$V1_SLEEPER" 2>/dev/null || :
  trap - TERM INT HUP
  V1_EXIT=$status
  cd -- "$V1_TASK" || return 1
  ((V1_STOP == 0))
}

# The TERM, INT and HUP trap while the program runs: this runner is asked to stop (V1_STOP).
_v1_on_stop() {
  V1_STOP=1 V1_WOKEN=1
}

# The CHLD trap while the program runs: when the watchdog's sleep (V1_SLEEPER) has ended and the
# program has not, stop the program (lib/rare.sh).
_v1_on_child() {
  V1_WOKEN=1
  if [[ -n $V1_SLEEPER ]] && ! kill -0 "$V1_SLEEPER" 2>/dev/null && kill -0 "$V1_PID" 2>/dev/null; then
    _v1_stop_program
  fi
}

# What the exit code means (reference §2.3) into D_KIND / D_STEP / D_EXIT.
_v1_decide_exit() {
  local next=unknown
  D_KIND='' D_STEP='' D_EXIT=$V1_EXIT
  if ((V1_TIMED_OUT)); then
    D_KIND=timeout
    return 0
  fi
  if [[ -f $V1_RUN_DIR/ht.nextstep ]]; then
    IFS= read -r next <"$V1_RUN_DIR/ht.nextstep" || :
  fi
  case $V1_EXIT in
    10) D_KIND=finished ;;
    0) [[ $V1_PROGRAM == ht_run ]] && D_KIND=finished || D_KIND=stopped ;;
    2) _v1_next_step "$next" advance ;;
    3) _v1_next_step "$next" wait ;;
    4) D_KIND=broken ;;
    99) D_KIND=timeout ;;
    *) D_KIND=stopped ;;
  esac
}

# Stubs of what an ordinary step never runs (lib/rare.sh holds them, sourced on the first call).
_v1_resume() { _v1_need rare && _v1_resume "$@"; }
_v1_free_stamp() { _v1_need rare && _v1_free_stamp "$@"; }
_v1_subtasks() { _v1_need rare && _v1_subtasks "$@"; }
_v1_stop_program() { _v1_need rare && _v1_stop_program "$@"; }
_v1_recorded() { _v1_need rare && _v1_recorded "$@"; }

# Source lib/LIBRARY.sh once: the end of a task, subtasks and the rare paths are not parsed for an
# ordinary step, whose runner pays every line it parses.
_v1_need() { # <library>
  [[ $_V1_LOADED != *" $1 "* ]] || return 0
  # shellcheck source=/dev/null # each library is checked on its own
  . "$HTTK_DIR/lib/$1.sh" || return 1
  _V1_LOADED+="$1 "
}
_V1_LOADED=' '
