# shellcheck shell=bash disable=SC2034,SC2153,SC2154 # V1_*, V1N_*, D_* and _ht_matches are shared by lib/*.sh
# finish.sh: the end of a v1 task: ht.reason, the freeze hook, the ht.run.<stamp> archive, the failure
# outcomes and the first activation of a task imported terminal. Sourced by apply.sh when a decision
# ends the task, so the runner of an ordinary step never parses it.

_V1_STOPPED_TEXT='This usually means something unexpected have returned an error.'

# The last nonblank line of FILE into VAR (empty when there is none).
_v1_last_line() { # <var> <file>
  local _v1l_line _v1l_last=''
  if [[ -f $2 ]]; then
    while IFS= read -r _v1l_line || [[ -n $_v1l_line ]]; do
      [[ -z ${_v1l_line//[[:space:]]/} ]] || _v1l_last=$_v1l_line
    done <"$2"
  fi
  printf -v "$1" '%s' "$_v1l_last"
}

# The size in bytes of the text file FILE into VAR (no subprocess).
_v1_size() { # <var> <file>
  local -x LC_ALL=C
  local _v1z_content=''
  IFS= read -r -d '' _v1z_content <"$2" || :
  printf -v "$1" '%s' "${#_v1z_content}"
}

# Append LINE to ht.reason, once: only while ht.reason still has the size recorded with the decision.
_v1_reason() { # <line>
  local size=-1
  [[ ! -f $V1_TASK/ht.reason ]] || _v1_size size "$V1_TASK/ht.reason"
  ((size == D_REASON_SIZE)) || return 0
  printf '%s\n' "$1" >>"$V1_TASK/ht.reason"
}

# v1's freeze hook after broken, timeout and too many restarts: ht.nextstep removed, then
# `../ht_steps freeze` in ht.run.current, synchronously, without the watchdog; its output is the
# runner's (v1 sent it to the task manager's own output).
_v1_freeze() {
  [[ $V1_PROGRAM == ht_steps && -d $V1_TASK/ht.run.current ]] || return 0
  printf 'httk v1: running the freeze hook of %s\n' "${V1_TASK##*/}"
  (
    cd -P -- "$V1_TASK" || exit 0
    export HT_TASK_TOP_DIR=$PWD
    cd -P -- ht.run.current || exit 0
    command rm -f -- ht.nextstep
    export HT_TASK_CURRENT_DIR=$PWD HT_TASK_STEP=freeze HT_TASK_RUN_NAME=ht.run.current TASKMGRPID=$$ HTTK_DIR
    [[ -z $V1_CALLER_HAS_LC_ALL ]] || export LC_ALL=$V1_CALLER_LC_ALL
    ../ht_steps freeze </dev/null || :
  )
}

# Remove ht.run.current when it is an empty directory (the workdir the manager made for a task that
# has none, or after the archive).
_v1_drop_empty_run_dir() {
  [[ ! -d $V1_TASK/ht.run.current ]] || command rmdir -- "$V1_TASK/ht.run.current" 2>/dev/null || :
}

# v1's end of a finished ht_steps task: the log copied (bzip2ed unless v1.bzip2log is false) into
# ht.run.current, then one transaction renames ht.run.current to ht.run.<stamp> and drops the log.
_v1_archive() {
  local current=$V1_TASK/ht.run.current log=$V1_TASK/ht.taskmgr.stdout txn bzip2=true
  if [[ $V1_PROGRAM != ht_steps || -z $D_STAMP || -d $V1_TASK/ht.run.$D_STAMP || ! -d $current ]]; then
    _v1_drop_empty_run_dir
    return 0
  fi
  if [[ -f $log ]]; then
    command cp -f -- "$log" "$current/ht.taskmgr.stdout"
    httk_workflow_setting bzip2 v1.bzip2log true
    [[ $bzip2 == false ]] || command bzip2 -f -- "$current/ht.taskmgr.stdout"
  fi
  _v1_need atomic || return 1
  _ht_atomic_open txn "$V1_TASK"
  printf 'ht.run.%s\n' "$D_STAMP" >"$txn/ht.atommv.ht.run.current"
  [[ ! -f $log ]] || printf 'ht.tmp.atomic.log\n' >"$txn/ht.atommv.ht.taskmgr.stdout"
  _ht_atomic_commit "$txn"
  _ht_atomic_replay "$V1_TASK"
}

# Publish a fail outcome with CODE and MESSAGE, details naming the v1 status and the exit status.
_v1_fail() { # <code> <message> <v1 status> [extra details]
  local details="{\"v1_status\":\"$3\""
  ((D_EXIT < 0)) || details+=",\"exit_status\":$D_EXIT"
  details+="${4-}}"
  httk_workflow_fail "$1" "$2" --details "$details" --not-retryable
}

# The view and the fail outcome of a failed decision; the reason LINE is the failure message.
_v1_end_failed() { # <line>
  local view status=stopped code=v1.stopped extra=''
  case $D_KIND in
    broken) status=broken code=declared_failure ;;
    timeout) status=timeout code=timeout extra=",\"timeout_seconds\":$V1_TIMEOUT" ;;
    restarts) extra=",\"restarts\":$V1_RESTARTS,\"attempts\":$V1_ATTEMPTS" ;;
    invalid) code=v1.invalid_step ;;
  esac
  _v1_crash_point side_effects
  _v1_view_name view "$status" "$V1_STEP"
  _v1_set_view "$view"
  _v1_crash_point view
  _v1_say "$status: $1"
  _v1_fail "$code" "$1" "$status" "$extra"
}

# The first activation of a task imported terminal: its v1 end, published as is (nothing runs, nothing
# of the task changes but an empty ht.run.current the manager made).
_v1_apply_imported() {
  local reason
  _v1_last_line reason "$V1_TASK/ht.reason"
  case $V1_ORIGIN_STATUS in
    finished)
      _v1_drop_empty_run_dir
      httk_workflow_succeed --message "imported v1 task was finished"
      ;;
    broken)
      [[ -n $reason ]] || reason="Task gave 'broken' as return code."
      _v1_fail declared_failure "$reason" broken ',"imported":true'
      ;;
    timeout) _v1_fail timeout "${reason:-Task timed out.}" timeout ',"imported":true' ;;
    *)
      if [[ $reason == *'non-defined error code (43)'* ]]; then
        _v1_fail timeout "$reason" stopped ',"imported":true,"watchdog":true'
      else
        _v1_fail v1.stopped "${reason:-Task stopped in httk v1.}" stopped ',"imported":true'
      fi
      ;;
  esac
}

# Carry out a decision that ends the task (finished, failed, or imported terminal) and publish it.
_v1_finish() {
  local view line
  case $D_KIND in
    finished)
      _v1_archive
      _v1_crash_point side_effects
      _v1_view_name view finished "$V1_STEP"
      _v1_set_view "$view"
      _v1_crash_point view
      _v1_say finished
      httk_workflow_succeed --message "v1 task finished"
      ;;
    broken | timeout | restarts)
      case $D_KIND in
        broken) line="Task gave 'broken' as return code." ;;
        timeout) line='Task timed out.' ;;
        restarts) line='Too many restarts!' ;;
      esac
      _v1_reason "$line"
      _v1_freeze
      _v1_end_failed "$line"
      ;;
    stopped)
      line="Task returned non-defined error code ($D_EXIT). $_V1_STOPPED_TEXT"
      _v1_reason "$line"
      _v1_end_failed "$line"
      ;;
    invalid)
      line="Task asked for the next step '$D_STEP', which is not a step name (letters, digits, '.', '_', '-')."
      _v1_reason "$line"
      _v1_end_failed "$line"
      ;;
    imported) _v1_apply_imported ;;
  esac
}
