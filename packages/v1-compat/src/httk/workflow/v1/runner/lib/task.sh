# shellcheck shell=bash disable=SC2034,SC2153,SC2154 # V1_*, V1N_*, D_* and _ht_matches are shared by lib/*.sh
# task.sh: v1 task names, the task directory of a job, its status view, and JSON text for the runner.
#
# A task directory keeps its v1 name, and that name is its status view: the runner renames the
# directory once per step, after the decision (a running step shows the status it started from:
# renaming to *.running and back would cost every step two processes; `httk workflow job list` shows
# what runs), and never reads a status back from it. A top-level imported task's directory is
# task/<its v1 name> in the job's payload (task/ is the job's workdir), never the payload itself: a
# confined runner may write its workdir, never the payload beside it, which holds job.json. A subtask
# stays where its parent created it, inside the parent's run directory, so the parent's later steps
# find it where v1 left it. Either is found by a locator: a payload (input v1.anchor for a subtask,
# the job's own for a top-level task) and a path below it whose ht.task.<set>.<id> components stand for
# whatever status name that directory has now (input v1.task; task/ht.task.<set>.<id> for a top-level
# task). The manager lets a confined subtask write its parent's run directory (the v1 package declares
# it: httk.workflow.v1._confinement).

V1_TASKS=task # the directory of a top-level task's payload holding its task directory (its workdir)

# Split a v1 task basename into V1N_SET V1N_ID V1N_STEP V1N_RESTARTS V1N_OWNER V1N_PRIO V1N_STATUS.
# Returns 0 for the nine-field grammar (as _names.py accepts it), 1 otherwise.
_v1_parse_name() { # <basename>
  local IFS=. dots=${1//[!.]/}
  local -a fields
  ((${#dots} == 8)) || return 1
  [[ $1 == ht.task.* && $1 != *..* && $1 != *. && $1 != *[[:space:]]* ]] || return 1
  set -f # the runner globs, and a name may hold a glob character: split it as it is
  # shellcheck disable=SC2206 # split at IFS (.), with globbing off
  fields=($1)
  set +f
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

# Resolve the task directory of this job into V1_TASK, V1_ANCHOR and V1_LOCATOR, and whether it is a
# subtask into V1_CHILD (1 or 0). Returns 0, or 1 with the reason in V1_ERROR.
_v1_locate() {
  local anchor='' path='' dir part candidate
  local -a parts=() found=()
  # A subtask's job is at the default child placement <parent placement>/<parent key>.children/<n>
  # (the runner spawns it there): any other job is a top-level task, and costs no input read here.
  if [[ $V1_PLACEMENT == *.children/* ]]; then
    httk_workflow_setting anchor v1.anchor '' 2>/dev/null || anchor=
  fi
  if [[ -z $anchor ]]; then
    V1_CHILD=0 anchor=$V1_PLACEMENT/$V1_JOB_KEY path=$V1_TASKS/ht.task.$V1_SET.$V1_ID
  else
    V1_CHILD=1
    httk_workflow_setting path v1.task ''
  fi
  V1_ANCHOR=$anchor V1_LOCATOR=$path
  dir=$HTTK_WORKFLOW_WORKSPACE_DIR/$anchor
  IFS=/ read -r -a parts <<<"$path"
  for part in "${parts[@]}"; do
    if [[ $part == ht.task.* && ${part//[!.]/} == ... ]]; then
      found=()
      # The runner's glob options are Bash's defaults and its locale is C (run): the matches come in C
      # order, and a pattern that matches nothing stays a word that names no task directory.
      for candidate in "$dir/$part."*; do
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
    V1_ERROR="the task directory $dir is gone"
    return 1
  fi
  V1_TASK=$dir
}

# Rename this task's directory, its status view, to NAME (V1_TASK follows it). A view that cannot be
# renamed only costs a warning: it is derived, never read back.
_v1_set_view() { # <name>
  [[ ${V1_TASK##*/} != "$1" ]] || return 0
  if LC_ALL=C command mv -T -- "$V1_TASK" "${V1_TASK%/*}/$1" 2>/dev/null; then
    V1_TASK=${V1_TASK%/*}/$1
  else
    printf 'httk v1: cannot rename the view %s to %s\n' "$V1_TASK" "$1" >&2
  fi
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
