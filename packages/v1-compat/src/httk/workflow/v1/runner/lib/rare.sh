# shellcheck shell=bash disable=SC2034,SC2153,SC2154 # V1_*, V1N_*, D_* and _ht_matches are shared by lib/*.sh
# rare.sh: what an ordinary step of a v1 task never needs: adopting ht.run.resume, the stamp of an
# archive, the search for subtasks, stopping a program the watchdog timed out, and loading the decision
# an earlier attempt recorded (an unclean restart). step.sh holds stubs that source this file on their
# first call, so the runner of an ordinary step never parses it.

# ht.run.resume becomes ht.run.current in one v1 transaction of the task directory; a nonempty
# ht.run.current is archived as ht.run.<stamp> first, an empty one dropped.
_v1_resume() {
  local txn stamp current=$V1_TASK/ht.run.current note
  _v1_need atomic || return 1
  _ht_atomic_open txn "$V1_TASK" || return 1
  if [[ -d $current ]]; then
    if [[ -n $(command find "$current" -mindepth 1 -print -quit) ]]; then
      _v1_free_stamp stamp
      printf 'ht.run.%s\n' "$stamp" >"$txn/ht.atommv.ht.run.current"
      note="; the previous ht.run.current is now ht.run.$stamp"
    else
      printf 'ht.tmp.atomic.empty\n' >"$txn/ht.atommv.ht.run.current"
    fi
  fi
  printf 'ht.run.current\n' >"$txn/ht.atommv.ht.run.resume"
  _ht_atomic_commit "$txn" && _ht_atomic_replay "$V1_TASK"
  _v1_activation || return 1
  printf 'httk v1: resuming from ht.run.resume (activation %s)%s\n' "$V1_ACTIVATION" "${note-}" |
    command tee -a -- "$V1_TASK/ht.taskmgr.stdout"
}

# The first ht.run.<%Y-%m-%d_%H.%M.%S> stamp from now on that names no directory of the task, into VAR.
_v1_free_stamp() { # <var>
  local _v1s_now _v1s_stamp
  printf -v _v1s_now '%(%s)T' -1
  while :; do
    printf -v _v1s_stamp '%(%Y-%m-%d_%H.%M.%S)T' "$_v1s_now"
    [[ -e $V1_TASK/ht.run.$_v1s_stamp ]] || break
    _v1s_now=$((_v1s_now + 1))
  done
  printf -v "$1" '%s' "$_v1s_stamp"
}

# The active subtasks directly below the task directory (not below ht.tmp.*, a transaction, or another
# task) into V1_SUBTASKS (task-relative paths, in C order); their count into VAR.
_v1_subtasks() { # <var>
  local _v1t_path
  V1_SUBTASKS=()
  while IFS= read -r -d '' _v1t_path; do
    _v1_parse_name "${_v1t_path##*/}" || continue
    case $V1N_STATUS in
      waitstart | waitstep | waitsubtasks | running) V1_SUBTASKS+=("${_v1t_path#"$V1_TASK"/}") ;;
    esac
  done < <(command find "$V1_TASK" -mindepth 1 \( -name 'ht.tmp.*' -o -name 'ht.atomic.*' \) -prune -o \
    -name 'ht.task.*' -prune -type d -print0 | LC_ALL=C command sort -z)
  printf -v "$1" '%s' "${#V1_SUBTASKS[@]}"
}

# The watchdog fired (called by _v1_on_child when V1_SLEEPER has ended and the program V1_PID has not):
# the first time, SIGTERM to the runner's process group (the runner itself ignoring it) and v1's 10 s
# grace as the next V1_SLEEPER; when the grace has ended too, SIGKILL to every process the runner
# started that is left, as v1's wrapper did.
_v1_stop_program() {
  local line rest pid
  if ((V1_TIMED_OUT == 0)); then
    V1_TIMED_OUT=1
    _v1_say "the step ran longer than $V1_TIMEOUT s: SIGTERM to its processes"
    trap '' TERM
    kill -TERM 0 2>/dev/null || :
    trap _v1_on_stop TERM
    command sleep 10 &
    V1_SLEEPER=$!
    return 0
  fi
  V1_SLEEPER=''
  _v1_say "the step outlived SIGTERM by 10 s: SIGKILL"
  for line in /proc/[0-9]*/stat; do
    IFS= read -r line 2>/dev/null <"$line" || continue
    pid=${line%% *}
    rest=${line##*) }
    rest=${rest#* * } # state and ppid
    if [[ ${rest%% *} == "$$" && $pid != "$$" ]]; then
      kill -KILL "$pid" 2>/dev/null || :
    fi
  done
}

# Load the decision this activation recorded into D_*. Returns 0, or 1 when there is none.
_v1_recorded() {
  local text rest
  _v1_activation || return 1
  httk_workflow_state_load text || return 1
  [[ $text == *"\"activation\":\"$V1_ACTIVATION\""* ]] || return 1
  rest=${text#*\"decision\":\"}
  D_KIND=${rest%%\"*} D_STEP=''
  rest=${text#*\"stamp\":\"}
  D_STAMP=${rest%%\"*}
  rest=${text#*\"exit\":}
  D_EXIT=${rest%%[,\}]*}
  rest=${text#*\"reason_size\":}
  D_REASON_SIZE=${rest%%[,\}]*}
  if [[ $D_KIND == invalid && -f $V1_RUN_DIR/ht.nextstep ]]; then
    IFS= read -r D_STEP <"$V1_RUN_DIR/ht.nextstep" || :
  fi
  [[ -n $D_KIND ]]
}
