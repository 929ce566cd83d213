# shellcheck shell=bash disable=SC2034,SC2153,SC2154 # V1_*, V1N_*, D_* and _ht_matches are shared by lib/*.sh
# task.sh: v1 task names, the task directory of a job, its status views, and JSON text for the runner.
#
# A top-level imported task's directory is the job's payload; its v1 name lives on as a symbolic link
# beside the payload (<placement>/ht.task.<...>.<status> -> <job key>). A subtask stays where its parent
# created it, inside the parent's run directory, so the parent's later steps find it where v1 left it;
# the child job names it by a locator: the top-level payload (input v1.anchor) and a path below it
# whose ht.task.<set>.<id> components stand for whatever status name that directory has now (input
# v1.task). Its directory name is its status view. Views are derived: the runner renames them once
# per step, after the decision (a running step shows the status it started from: renaming to
# *.running and back would cost every step two processes; `httk workflow job list` shows what runs),
# and never reads a status back from them.

# Split a v1 task basename into V1N_SET V1N_ID V1N_STEP V1N_RESTARTS V1N_OWNER V1N_PRIO V1N_STATUS.
# Returns 0 for the nine-field grammar (as _names.py accepts it), 1 otherwise.
_v1_parse_name() { # <basename>
  local rest=$1 dots=${1//[!.]/}
  local -a fields=()
  ((${#dots} == 8)) || return 1
  while [[ $rest == *.* ]]; do
    fields+=("${rest%%.*}")
    rest=${rest#*.}
  done
  fields+=("$rest")
  [[ ${fields[0]} == ht && ${fields[1]} == task ]] || return 1
  for rest in "${fields[@]:2}"; do
    [[ -n $rest && $rest != *[[:space:]]* ]] || return 1
  done
  [[ ${fields[5]} != *[!0-9]* && ${fields[7]} == [1-5] ]] || return 1
  case ${fields[8]} in
    waitstart | waitstep | waitsubtasks | running | finished | broken | timeout | stopped) ;;
    singlejob | waiting | subruns) ;;
    *) return 1 ;;
  esac
  V1N_SET=${fields[2]} V1N_ID=${fields[3]} V1N_STEP=${fields[4]} V1N_RESTARTS=$((10#${fields[5]}))
  V1N_OWNER=${fields[6]} V1N_PRIO=${fields[7]} V1N_STATUS=${fields[8]}
}

# Whether TEXT is a step name of the protocol (1-128 bytes of letters, digits, '.', '_', '-', not
# starting with '.' or '-'). Returns 0 or 1.
_v1_is_step() { # <text>
  [[ $1 == [A-Za-z0-9_]* && $1 != *[!A-Za-z0-9._-]* && ${#1} -le 128 ]]
}

# The protocol priority of v1 priority P (1 highest .. 5): 100, 300, 500 (v1's default 3), 700, 900.
_v1_priority() { # <var> <p>
  printf -v "$1" '%s' $((100 + (${2} - 1) * 200))
}

# Resolve the task directory of this job into V1_TASK: the payload of a top-level task, or the subtask
# directory the locator (v1.anchor, v1.task) names. Returns 0, or 1 with the reason in V1_ERROR.
_v1_locate() {
  local anchor='' path='' dir part candidate
  local -a parts=() found=()
  # A subtask's job is at the default child placement <parent placement>/<parent key>.children/<n>
  # (the runner spawns it there): any other job is a top-level task, and costs no input read here.
  if [[ $V1_PLACEMENT == *.children/* ]]; then
    httk_workflow_setting anchor v1.anchor '' 2>/dev/null || anchor=
  fi
  if [[ -z $anchor ]]; then
    V1_TASK=$HTTK_WORKFLOW_JOB_DIR
    V1_LOCATOR=
    V1_ANCHOR=$V1_PLACEMENT/$V1_JOB_KEY
    return 0
  fi
  httk_workflow_setting path v1.task ''
  V1_ANCHOR=$anchor V1_LOCATOR=$path
  dir=$HTTK_WORKFLOW_WORKSPACE_DIR/$anchor
  IFS=/ read -r -a parts <<<"$path"
  for part in "${parts[@]}"; do
    if [[ $part == ht.task.* && ${part//[!.]/} == ... ]]; then
      _ht_glob "$dir" "$part."
      found=()
      for candidate in "${_ht_matches[@]}"; do
        if [[ -d $candidate && ! -L $candidate ]] && _v1_parse_name "${candidate##*/}"; then
          found+=("$candidate")
        fi
      done
      if ((${#found[@]} != 1)); then
        V1_ERROR="${#found[@]} task directories match $part.* in $dir (exactly one must)"
        return 1
      fi
      dir=${found[0]}
    else
      dir=$dir/$part
    fi
  done
  if [[ ! -d $dir ]]; then
    V1_ERROR="the subtask directory $dir is gone"
    return 1
  fi
  V1_TASK=$dir
}

# The first of the symbolic links PATH... that is this job's status view into V1_VIEW (empty if none).
_v1_find_view() { # <path>...
  local view
  V1_VIEW=''
  for view in "$@"; do
    if [[ -L $view && $view -ef $HTTK_WORKFLOW_JOB_DIR ]]; then
      V1_VIEW=$view
      return 0
    fi
  done
}

# Rename this task's status view to NAME: the symbolic link beside a top-level payload (created when it
# is missing), or a subtask's own directory (V1_TASK follows it). A view that cannot be renamed only
# costs a warning: it is derived, never read back. The link is looked for under the names the import or
# an earlier step gave it (v1.name; waitstep or waitsubtasks at this step) before the placement is read:
# a glob costs a millisecond per thousand entries of the placement directory.
_v1_set_view() { # <name>
  local dir waitstep waitsubtasks
  if [[ -n $V1_LOCATOR ]]; then
    [[ ${V1_TASK##*/} != "$1" ]] || return 0
    if command mv -T -- "$V1_TASK" "${V1_TASK%/*}/$1" 2>/dev/null; then
      V1_TASK=${V1_TASK%/*}/$1
    else
      printf 'httk v1: cannot rename the view %s to %s\n' "$V1_TASK" "$1" >&2
    fi
    return 0
  fi
  dir=$HTTK_WORKFLOW_WORKSPACE_DIR/$V1_PLACEMENT
  _v1_view_name waitstep waitstep "$V1_STEP"
  _v1_view_name waitsubtasks waitsubtasks "$V1_STEP"
  _v1_find_view "$dir/$V1_NAME" "$dir/$waitstep" "$dir/$waitsubtasks"
  if [[ -z $V1_VIEW ]]; then
    _ht_glob "$dir" "ht.task.$V1_SET.$V1_ID."
    _v1_find_view ${_ht_matches[@]+"${_ht_matches[@]}"}
  fi
  if [[ $V1_VIEW == "$dir/$1" ]]; then
    return 0
  elif [[ -n $V1_VIEW ]]; then
    LC_ALL=C command mv -T -- "$V1_VIEW" "$dir/$1" 2>/dev/null && return 0
  elif command ln -s -- "$V1_JOB_KEY" "$dir/$1" 2>/dev/null; then
    return 0
  fi
  printf 'httk v1: cannot update the status view %s/%s\n' "$dir" "$1" >&2
}

# Print one line about this task on the runner's output (the attempt log): "httk v1 <set>.<id>: TEXT".
_v1_say() { # <text>
  printf 'httk v1 %s.%s: %s\n' "$V1_SET" "$V1_ID" "$1"
}

# Stop this process with SIGKILL when HTTK_V1_CRASH_AT is <decision>:<point> (D_KIND and POINT) and
# the file HTTK_V1_CRASH_ONCE can still be created: the crash tests' seam, one crash per file
# (tests/v1/test_runner_crash.py).
_v1_crash_point() { # <point>
  [[ ${D_KIND-}:$1 == "${HTTK_V1_CRASH_AT-}" && -n ${HTTK_V1_CRASH_ONCE-} ]] || return 0
  (set -o noclobber && : >"$HTTK_V1_CRASH_ONCE") 2>/dev/null || return 0
  kill -KILL "$$"
}

# The view name of this task in STATUS with STEP and OWNER into VAR.
_v1_view_name() { # <var> <status> <step> [owner]
  printf -v "$1" 'ht.task.%s.%s.%s.%s.%s.%s.%s' "$V1_SET" "$V1_ID" "$3" "$V1_RESTARTS" "${4:-unclaimed}" \
    "$V1_PRIO" "$2"
}
