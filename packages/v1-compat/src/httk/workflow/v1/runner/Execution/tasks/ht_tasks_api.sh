# shellcheck shell=bash disable=SC2154 # _ht_matches is the result array of _ht_glob (lib/atomic.sh)
# ht_tasks_api.sh: the httk v1 step-script API, reimplemented for the httk-workflow v1 runner.
#
#   #!/bin/bash
#   . "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh      # HTTK_DIR is exported by the v1 runner
#   HT_TASK_INIT "$@"
#   case "$STEP" in
#     start) ...; HT_TASK_NEXT relax ;;
#     relax) HT_TASK_ATOMIC_SECTION_START; ...; HT_TASK_ATOMIC_SECTION_END_FINISHED ;;
#   esac
#
# Every function the httk v1 API offers is here, with the names, arguments, files and exit codes
# unmodified v1 scripts rely on (reference §2.8): the exit helpers write ht.nextstep and exit 2 (next
# step), 3 (wait for subtasks), 10 (finished) or 4 (broken); transactions are ht.tmp.atomic.<N> ->
# ht.atomic.<M> directories replayed by HT_TASK_INIT and by the runner (lib/atomic.sh). What v1 did by
# accident is kept where a script could depend on it and written down where it is not:
#   - HT_TASK_CREATE sets the caller's STEP, TASKSET, PRIO, LOCATION and CALLBACK, as v1 did; it skips a
#     subtask when any ht.task.<set>.<id>.* exists (v1's test broke on two matches).
#   - HT_TASK_RUN_CONTROLLED returns 0 when the command ended by itself: the command's own status is
#     lost, exactly as in v1, because success is judged by the checkers' messages.
#   - HT_TASK_STORE_VAR writes KEY=VALUE verbatim; ht.vars is sourced as shell code by HT_TASK_INIT.
#   - HT_TASK_SET_PRIORITY writes ht.priority, which the v1 runner turns into the job's priority (v1's
#     own task manager read it nowhere).
#   - With HTTK_WORKFLOW_DURABLE=1 a transaction commit and a subtask publication are synchronized to
#     storage before their rename (v1 never synchronized anything).
# Sourcing defines HT_* and _ht_* functions only. Like v1's, the functions work in the caller's shell
# (HT_TASK_INIT sets STEP and sources ht.vars there; the exit helpers exit the script) but none changes
# a shell option, and the one that traps signals (HT_TASK_RUN_CONTROLLED) does so in a subshell.

# shellcheck source=/dev/null # checked on its own
. "${BASH_SOURCE[0]%/*}/../../lib/atomic.sh"

_HT_AWK_FUNCTIONS='function abs(x) { return x < 0 ? -x : x }
function max(a, b) { return a > b ? a : b }
function min(a, b) { return a < b ? a : b }'

# ---- small utilities -------------------------------------------------------------------------------

# Print the floating-point value of an awk EXPRESSION (abs, max and min are available) as %.6g.
HT_FCALC() { # <expression...>
  command awk "$_HT_AWK_FUNCTIONS
BEGIN { printf(\"%.6g\\n\", ($*)) }"
}

# Print the value of an awk EXPRESSION as %.14e.
HT_ECALC() { # <expression...>
  command awk "$_HT_AWK_FUNCTIONS
BEGIN { printf(\"%.14e\\n\", ($*)) }"
}

# Return 0 when the awk CONDITION holds, 1 when it does not.
HT_FTEST() { # <condition...>
  command awk "$_HT_AWK_FUNCTIONS
BEGIN { exit (($*) ? 0 : 1) }"
}

# Return 0 when some entry directly in DIR (hidden ones included) matches GLOB, given as DIR/GLOB.
HT_FILE_MATCH() { # <dir/glob>
  local dir=. glob=$1
  if [[ $1 == */* ]]; then
    dir=${1%/*}
    glob=${1##*/}
  fi
  [[ -n $(command find "$dir" -mindepth 1 -maxdepth 1 -name "$glob" -print -quit 2>/dev/null) ]]
}

# Create (-d a directory, -f a file) or rename SOURCE to the first free PREFIX<N>, N from 0, and print
# its name. Returns the status of the mkdir, touch or mv.
HT_PATH_PREFIX() { # -d|-f|<source> <prefix>
  local target
  _ht_first_free target "$2"
  case $1 in
    -d) command mkdir -- "$target" || return ;;
    -f) command touch -- "$target" || return ;;
    *) command mv -- "$1" "$target" || return ;;
  esac
  printf '%s\n' "$target"
}

# Print field INDEX (from 1) of STRING split at SEPARATOR (an awk field separator).
HT_SPLIT_FIELDS() { # <separator> <index> <string>
  command awk -v separator="$1" -v index_="$2" '{ split($0, fields, separator); print fields[index_] }' \
    <<<"$3"
}

# Print the number of MPI ranks `mpirun -q` starts (each rank prints one marker), or 1 when it cannot
# tell: no mpirun, a failure, or counts that disagree.
HT_FIND_NBR_NODES() {
  local output tildes carets
  if ! command -v mpirun >/dev/null 2>&1 || ! output=$(command mpirun -q echo '~^' 2>/dev/null); then
    printf '1\n'
    return 0
  fi
  tildes=${output//[!~]/}
  carets=${output//[!^]/}
  if ((${#tildes} == ${#carets} && ${#tildes} > 1)); then
    printf '%s\n' "${#tildes}"
  else
    printf '1\n'
  fi
}

# ---- the step protocol -----------------------------------------------------------------------------

# Start a step: STEP := the first argument; replay transactions in the current directory; ht.nextstep,
# when present, overrides STEP; ht_finished / ht_broken end the script at once (exit 10 / 4); ht.vars is
# sourced; HT_NBR_NODES is probed and exported when unset.
HT_TASK_INIT() { # "$@"
  STEP=${1-}
  _ht_atomic_replay . || :
  if [[ -e ht.nextstep ]]; then
    IFS= read -r STEP <ht.nextstep || :
  fi
  [[ $STEP != ht_finished ]] || HT_TASK_FINISHED
  [[ $STEP != ht_broken ]] || HT_TASK_BROKEN
  if [[ -e ht.vars ]]; then
    # shellcheck source=/dev/null
    . ./ht.vars
  fi
  if [[ -z ${HT_NBR_NODES-} ]]; then
    HT_NBR_NODES=$(HT_FIND_NBR_NODES)
    export HT_NBR_NODES
  fi
}

# Record STEP as the next step and exit 2.
HT_TASK_NEXT() { # <step>
  printf '%s\n' "$1" >ht.nextstep
  exit 2
}

# Record STEP as the step after the subtasks and exit 3.
HT_TASK_SUBTASKS() { # <step>
  printf '%s\n' "$1" >ht.nextstep
  exit 3
}

# Declare the task finished (ht.nextstep = ht_finished) and exit 10.
HT_TASK_FINISHED() {
  printf 'ht_finished\n' >ht.nextstep
  exit 10
}

# Declare the task broken (ht.nextstep = ht_broken) and exit 4.
HT_TASK_BROKEN() {
  printf 'ht_broken\n' >ht.nextstep
  exit 4
}

# Append TEXT to ht.log.
HT_TASK_LOG() { # <text>
  printf '%s\n' "$1" >>ht.log
}

# Write ht.priority (1 highest .. 5): the v1 runner gives the job that priority from its next step.
HT_TASK_SET_PRIORITY() { # <priority>
  printf '%s\n' "$1" >ht.priority
}

# Replace or append KEY=VALUE in ./ht.vars (written verbatim: ht.vars is sourced as shell code).
HT_TASK_STORE_VAR() { # <key> <value>
  local line trimmed
  {
    if [[ -e ht.vars ]]; then
      while IFS= read -r line || [[ -n $line ]]; do
        trimmed=${line#"${line%%[! ]*}"}
        trimmed=${trimmed%%=*}
        trimmed=${trimmed%"${trimmed##*[! ]}"}
        [[ $line == *=* && $trimmed == "$1" ]] || printf '%s\n' "$line"
      done <ht.vars
    fi
    printf '%s=%s\n' "$1" "$2"
  } >ht.tmp.vars && command mv -f -- ht.tmp.vars ht.vars
}

# Remove ht.vars, ht.controlled.msgs and every ht.tmp.* of the current directory.
HT_TASK_CLEANUP() {
  command rm -f -- ht.vars ht.controlled.msgs
  _ht_glob . ht.tmp.
  ((${#_ht_matches[@]} == 0)) || command rm -rf -- "${_ht_matches[@]}"
}

# bzip2 every regular file below the current directory whose name does not start with "ht." (subtask
# directories included), then ht.RUNLOG.
HT_TASK_COMPRESS() {
  command find . -type f ! -name 'ht.*' ! -name '*.bz2' -exec bzip2 -- {} +
  [[ ! -e ht.RUNLOG ]] || command bzip2 -- ht.RUNLOG
}

# bunzip2 every *.bz2 below the current directory.
HT_TASK_UNCOMPRESS() {
  command find . -type f -name '*.bz2' -exec bunzip2 -- {} +
}

# Write OUTPUT from the file TEMPLATE with its shell variables and command substitutions expanded.
# A missing TEMPLATE ends the script (exit 1), as in v1.
HT_TEMPLATE() { # <template> <output>
  local text
  if [[ ! -e $1 ]]; then
    printf 'HT_TEMPLATE: Template file missing.\n'
    exit 1
  fi
  text=$(<"$1")
  eval "command cat <<HT_TEMPLATE_END_OF_TEXT
$text
HT_TEMPLATE_END_OF_TEXT" >"$2"
}

# Create subtasks in LOCATION (default ./), one per line on stdin whose first word is the subtask's id:
# ht.task.<set>.<id>.<step>.0.none.<prio>.waitstart, built as ht.tmp.task.* (a stale one is removed),
# filled by `CALLBACK <line words>` run inside it (or the line written to task_data when CALLBACK is
# empty), then published by one rename. A subtask whose ht.task.<set>.<id>.* already exists is left
# alone (its parent was restarted). Defaults: step start, set any, priority 3. Sets the caller's
# CALLBACK, LOCATION, STEP, TASKSET and PRIO, as v1 does. A directory it cannot create or rename ends
# the script (exit 1).
HT_TASK_CREATE() { # <callback> [location] [step] [set] [prio] <lines
  local line id tmp
  CALLBACK=${1-}
  LOCATION=${2:-./}
  STEP=${3:-start}
  TASKSET=${4:-any}
  PRIO=${5:-3}
  while read -r line; do
    id=${line%%[[:space:]]*}
    [[ -n $id ]] || continue
    _ht_glob "$LOCATION" "ht.task.$TASKSET.$id."
    ((${#_ht_matches[@]} == 0)) || continue
    tmp=$LOCATION/ht.tmp.task.$TASKSET.$id.$STEP.0.none.$PRIO.waitstart
    [[ ! -e $tmp ]] || command rm -rf -- "$tmp"
    if ! command mkdir -- "$tmp"; then
      printf 'Could not create directory: %s\n' "$tmp"
      exit 1
    fi
    (
      cd "$tmp" || exit 1
      if [[ -n $CALLBACK ]]; then
        eval "$CALLBACK $line"
      else
        printf '%s\n' "$line" >task_data
      fi
    )
    if ! _ht_sync_tree "$tmp" || ! command mv -T -- "$tmp" "$LOCATION/ht.task.${tmp##*/ht.tmp.task.}"; then
      printf 'Error: could not move directory?: %s\n' "$tmp"
      exit 1
    fi
  done
  ! _ht_durable || command sync -- "$LOCATION"
}

# ---- transactions ----------------------------------------------------------------------------------

# Open a transaction in the current directory and change into it; its files are published into that
# directory on commit (reach the originals through ..).
HT_TASK_ATOMIC_SECTION_START() {
  local txn
  _ht_atomic_open txn . || exit 1
  cd "$txn" || exit 1
}

# Commit the transaction the current directory is (scripts use the END_* forms, which also replay it
# and end the step). Returns 0; 1 when the current directory is no open transaction.
HT_TASK_ATOMIC_SECTION_END() {
  local here
  here=$(pwd -P)
  if [[ ${here##*/} != ht.tmp.atomic.* ]]; then
    printf 'HT_TASK_ATOMIC_SECTION_END: %s is not an open transaction (ht.tmp.atomic.*)\n' "$here" >&2
    return 1
  fi
  cd .. || return 1
  _ht_atomic_commit "./${here##*/}"
}

# The four ways to end a transaction: ht.nextstep joins it, it is committed and replayed, the step ends.
_ht_atomic_end() { # <nextstep text> <exit helper> [step]
  printf '%s\n' "$1" >ht.nextstep
  HT_TASK_ATOMIC_SECTION_END || exit 1
  _ht_atomic_replay . || :
  "$2" "${@:3}"
}

# Commit the transaction with STEP as the next step, replay it, and exit 2.
HT_TASK_ATOMIC_SECTION_END_NEXT() { # <step>
  _ht_atomic_end "$1" HT_TASK_NEXT "$1"
}

# Commit with STEP as the step after the subtasks, replay, and exit 3.
HT_TASK_ATOMIC_SECTION_END_SUBTASKS() { # <step>
  _ht_atomic_end "$1" HT_TASK_SUBTASKS "$1"
}

# Commit declaring the task finished, replay, and exit 10.
HT_TASK_ATOMIC_SECTION_END_FINISHED() {
  _ht_atomic_end ht_finished HT_TASK_FINISHED
}

# Commit declaring the task broken, replay, and exit 4.
HT_TASK_ATOMIC_SECTION_END_BROKEN() {
  _ht_atomic_end ht_broken HT_TASK_BROKEN
}

# Inside a transaction: on commit, rename SOURCE (a name in the transaction's base) to DESTINATION (a
# path relative to the base).
HT_TASK_ATOMIC_MV() { # <source> <destination>
  printf '%s\n' "$2" >"ht.atommv.$1"
}

# Replay the committed transactions of the current directory (lib/atomic.sh).
HT_TASK_ATOMIC_EXEC() {
  _ht_atomic_replay .
}

# Rebuild ./ht.RUNLOG from ./ht.RUNLOG, or else ../ht.RUNLOG (inside a transaction), followed by TEXT,
# through ht.tmp.RUNLOG and one rename.
_ht_runlog() { # <text>
  {
    if [[ -e ht.RUNLOG ]]; then
      command cat -- ht.RUNLOG
    elif [[ -e ../ht.RUNLOG ]]; then
      command cat -- ../ht.RUNLOG
    fi
    printf '%s' "$1"
  } >ht.tmp.RUNLOG && command mv -f -- ht.tmp.RUNLOG ht.RUNLOG
}

_HT_RULE='====================================================='
_HT_BANNER='*****************************************************'

# Append each existing FILE to ht.RUNLOG under its name, between rule lines.
HT_TASK_ATOMIC_RUNLOG_APPEND() { # <file>...
  local file text=''
  for file in "$@"; do
    [[ -e $file ]] || continue
    text+="$_HT_RULE"$'\n'"${file##*/}"$'\n'"$_HT_RULE"$'\n'"$(command cat -- "$file")"$'\n'
    text+="$_HT_RULE"$'\n\n'
  done
  _ht_runlog "$text"
}

# Append a dated banner line with TEXT to ht.RUNLOG.
HT_TASK_ATOMIC_RUNLOG_HEADLINE() { # <text...>
  _ht_runlog "$_HT_BANNER"$'\n'"$(command date -R): $*"$'\n'"$_HT_BANNER"$'\n\n'
}

# Append one line of TEXT to ht.RUNLOG.
HT_TASK_ATOMIC_RUNLOG_NOTE() { # <text...>
  _ht_runlog "$*"$'\n'
}

# ---- supervised runs -------------------------------------------------------------------------------

# Print FILE from its beginning and follow it (waiting for it to appear) until the process PID has
# exited, then print what was added last. Without PID it follows forever.
HT_TASK_FOLLOW_FILE() { # <file> [pid]
  if [[ -n ${2-} ]]; then
    command tail -n +1 -F --pid="$2" -- "$1" 2>/dev/null
  else
    command tail -n +1 -F -- "$1" 2>/dev/null
  fi
  return 0
}

# Run COMMAND in its own session, its output (stdout and stderr) through STDOUT_CHECKER (when given)
# into stdout.out and this function's stdout, under a TIMEOUT watchdog and beside each CHECKER. A checker
# is called as `CHECKER <message file ht.tmp.msgs.<i>> <watchdog pid>` (the stdout checker with
# ht.tmp.msgs.stdout, reading the output on stdin) and stops the run by exiting 2; a checker follows
# its files until the watchdog pid is gone. At the end the messages (and TIMEOUT after a timeout) are
# gathered into ht.controlled.msgs, and a command still alive is sent SIGTERM, then SIGKILL 10 s later.
# Returns 0 (the command ended by itself; its own status is lost, as in v1), 2 (a checker stopped it),
# 99 (timeout), 3 (SIGTERM), 100 (SIGINT), 1 (no -- separates the checkers from the command).
HT_TASK_RUN_CONTROLLED() { # <timeout> [stdout-checker [checker...]] -- <command...>
  local timeout=$1 stdout_checker=${2-}
  local -a checkers=()
  shift
  if [[ $stdout_checker == -- ]]; then
    stdout_checker=
  else
    shift
    while (($# > 0)) && [[ $1 != -- ]]; do
      checkers+=("$1")
      shift
    done
    if (($# == 0)); then
      printf "HT_TASK_RUN_CONTROLLED needs one argument '--' to separate the checkers from the command.\n"
      return 1
    fi
    shift
  fi
  (_ht_run_controlled "$timeout" "$stdout_checker" "${#checkers[@]}" ${checkers[@]+"${checkers[@]}"} "$@")
}

# The body of HT_TASK_RUN_CONTROLLED, in its own subshell: its traps and children stay there.
_ht_run_controlled() { # <timeout> <stdout checker> <n> <checker>*n <command...>
  local timeout=$1 stdout_checker=$2 count=$3 self=$BASHPID watchdog command i status=0 stopped=''
  local -a checkers=("${@:4:count}")
  shift $((3 + count))
  _ht_glob . ht.tmp.msgs.
  ((${#_ht_matches[@]} == 0)) || command rm -f -- "${_ht_matches[@]}"
  command rm -f -- ht.tmp.run.fifo
  command mkfifo -- ht.tmp.run.fifo || return 1
  trap 'stopped=checker status=2' USR1
  trap 'stopped=timeout status=99' USR2
  trap 'stopped=term status=3' TERM
  trap 'stopped=int status=100' INT
  (
    trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
    command sleep "$timeout" &
    sleeper=$!
    wait "$sleeper" && kill -USR2 "$self"
  ) &
  watchdog=$!
  for ((i = 0; i < count; i++)); do
    (
      "${checkers[i]}" "ht.tmp.msgs.$((i + 1))" "$watchdog"
      [[ $? != 2 ]] || kill -USR1 "$self"
    ) &
  done
  setsid "$@" >ht.tmp.run.fifo 2>&1 &
  command=$!
  if [[ -n $stdout_checker ]]; then
    {
      "$stdout_checker" ht.tmp.msgs.stdout "$watchdog"
      [[ $? != 2 ]] || kill -USR1 "$self"
      command cat
    } <ht.tmp.run.fifo | command tee stdout.out &
  else
    command tee stdout.out <ht.tmp.run.fifo &
  fi
  while kill -0 "$command" 2>/dev/null && [[ -z $stopped ]]; do
    wait "$command" 2>/dev/null || :
  done
  [[ $stopped != timeout ]] || printf 'TIMEOUT\n' >ht.tmp.msgs.timeout
  kill -TERM "$watchdog" 2>/dev/null || :
  if kill -0 -- "-$command" 2>/dev/null; then
    kill -TERM -- "-$command" 2>/dev/null || :
    # The definite SIGKILL comes from a grandchild, so the wait below is not held for its 10 s.
    ( (
      command sleep 10
      kill -KILL -- "-$command"
    ) >/dev/null 2>&1 &)
  fi
  trap - USR1 USR2 TERM INT
  wait
  _ht_glob . ht.tmp.msgs.
  if ((${#_ht_matches[@]} > 0)); then
    command cat -- "${_ht_matches[@]}" >ht.controlled.msgs
    command rm -f -- "${_ht_matches[@]}"
  else
    : >ht.controlled.msgs
  fi
  command rm -f -- ht.tmp.run.fifo
  return "$status"
}
