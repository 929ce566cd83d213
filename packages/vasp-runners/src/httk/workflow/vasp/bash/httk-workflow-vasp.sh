# shellcheck shell=bash
# httk-workflow-vasp.sh: the Bash VASP API, sourced by Bash runners after httk-workflow.sh.
#
#   #!/usr/bin/env bash
#   set -euo pipefail
#   source "$HTTK_WORKFLOW_BASH_API"
#   source "$HTTK_WORKFLOW_VASP_BASH_API"     # exported by the manager (see below when it is not)
#   relax() {
#     local action
#     httk_workflow_vasp_step action vasp-relax   # prepare, run VASP, judge, remedy: one attempt
#     httk_workflow_vasp_publish                   # the decision, through httk-workflow.sh
#   }
#   httk_workflow_register_step relax
#   httk_workflow_dispatch "$@"
#
# What it is
#   A thin shell over `python -m httk.workflow.vasp` (the interpreter is $HTTK_WORKFLOW_PYTHON, the
#   manager's), so a Bash runner and the Python runners share one error catalog, one set of remedies,
#   one restart rule and one record of runs, remedies and events in job state: a step written with this
#   API ends with the same documents as the packaged Python workflow. Outcomes are published by the
#   workflow Bash API (httk-workflow.sh), which must be sourced first.
#
#   The manager exports this file's path as HTTK_WORKFLOW_VASP_BASH_API (it finds it through the entry
#   point group httk.workflow.bash_apis). A runner started by a manager that does not export it can ask
#   Python: source "$("${HTTK_WORKFLOW_PYTHON:-python3}" -P -m httk.workflow.vasp bash-api-path)".
#
# Like httk-workflow.sh, sourcing defines functions and _httk_workflow_vasp_* globals only: no set,
# shopt or trap, nothing changed in the caller's shell options; every value is returned with printf -v.
#
# Return codes, for every public function
#   0  done
#   1  the VASP library or the environment failed (the message on stderr says what)
#   2  a wrong call
#   3  the attempt has already published its outcome (httk_workflow_vasp_publish)
#   4  httk_workflow_vasp_remedy: the problem's ladder is spent

_httk_workflow_vasp_fields=()

# Run `python -m httk.workflow.vasp SUBCOMMAND ARG...` with --out, and read its NUL-ended fields into
# _httk_workflow_vasp_fields. Returns the subcommand's status.
_httk_workflow_vasp_call() { # <function> <subcommand> [argument...]
  local _hwv_out _hwv_status=0 _hwv_function=$1
  shift
  if ! _hwv_out=$(command mktemp "${TMPDIR:-/tmp}/httk-workflow-vasp.XXXXXX"); then
    printf '%s: %s\n' "$_hwv_function" "cannot create a temporary file" >&2
    return 1
  fi
  "${HTTK_WORKFLOW_PYTHON:-python3}" -P -m httk.workflow.vasp "$@" --out "$_hwv_out" || _hwv_status=$?
  _httk_workflow_vasp_fields=()
  if ((_hwv_status == 0 || _hwv_status == 4)); then
    mapfile -d '' -t _httk_workflow_vasp_fields <"$_hwv_out"
  fi
  command rm -f -- "$_hwv_out"
  return "$_hwv_status"
}

# Check that VAR can receive a value (a shell name, not one of this library's locals).
_httk_workflow_vasp_var() { # <function> <var>
  if [[ $2 != [A-Za-z_]* || $2 == *[!A-Za-z0-9_]* || $2 == _hwv* ]]; then
    printf '%s: %s\n' "$1" "VAR '$2' must be a shell variable name (not starting with _hwv)" >&2
    return 2
  fi
}

_httk_workflow_vasp_decision_members=(action message next_step reason code details results structure)

# One whole attempt of the current step ($HTTK_WORKFLOW_STEP, relax or static) of WORKFLOW (vasp-relax,
# vasp-static, vasp-relax-static or vasp-relax-bash): recover what an earlier attempt left, prepare the
# inputs once per stage, run VASP supervised, detect problems, apply a remedy or decide a repeat, and
# write the results. VAR receives the decided action (advance, retry, succeed or fail); the rest of the
# decision is read with httk_workflow_vasp_decision and published with httk_workflow_vasp_publish.
# Returns 0, 1 or 2.
httk_workflow_vasp_step() { # <var> <workflow>
  if (($# != 2)); then
    printf '%s\n' "httk_workflow_vasp_step: usage: httk_workflow_vasp_step VAR WORKFLOW" >&2
    return 2
  fi
  _httk_workflow_vasp_var httk_workflow_vasp_step "$1" || return 2
  _httk_workflow_vasp_call httk_workflow_vasp_step step "$2" || return
  if ((${#_httk_workflow_vasp_fields[@]} != ${#_httk_workflow_vasp_decision_members[@]})); then
    printf '%s\n' "httk_workflow_vasp_step: python -m httk.workflow.vasp step wrote no decision" >&2
    return 1
  fi
  _httk_workflow_vasp_decision=("${_httk_workflow_vasp_fields[@]}")
  printf -v "$1" '%s' "${_httk_workflow_vasp_decision[0]}"
}

# Read MEMBER of the last decision into VAR: action, message, next_step, reason, code, details (compact
# JSON), results and structure (the files a succeed puts into data/). Returns 0, 1 (no decision yet) or 2.
httk_workflow_vasp_decision() { # <var> <member>
  local _hwv_i
  if (($# != 2)); then
    printf '%s\n' "httk_workflow_vasp_decision: usage: httk_workflow_vasp_decision VAR MEMBER" >&2
    return 2
  fi
  _httk_workflow_vasp_var httk_workflow_vasp_decision "$1" || return 2
  if ((${#_httk_workflow_vasp_decision[@]} == 0)); then
    printf '%s\n' "httk_workflow_vasp_decision: no decision: call httk_workflow_vasp_step first" >&2
    return 1
  fi
  for ((_hwv_i = 0; _hwv_i < ${#_httk_workflow_vasp_decision_members[@]}; _hwv_i++)); do
    if [[ ${_httk_workflow_vasp_decision_members[_hwv_i]} == "$2" ]]; then
      printf -v "$1" '%s' "${_httk_workflow_vasp_decision[_hwv_i]}"
      return 0
    fi
  done
  printf '%s\n' "httk_workflow_vasp_decision: MEMBER '$2' is not one of ${_httk_workflow_vasp_decision_members[*]}" >&2
  return 2
}
_httk_workflow_vasp_decision=()

# Publish the last decision as this attempt's outcome through httk-workflow.sh: advance, retry or fail
# with its members, or succeed with results.json and CONTCAR put into the job's data/ by a transaction.
# Returns what the httk-workflow.sh function returns (0, 1, 2 or 3), or 1 when there is no decision.
httk_workflow_vasp_publish() { # (no arguments)
  local _hwv_action _hwv_message _hwv_next _hwv_reason _hwv_code _hwv_details _hwv_results _hwv_structure
  if ((${#_httk_workflow_vasp_decision[@]} == 0)); then
    printf '%s\n' "httk_workflow_vasp_publish: no decision: call httk_workflow_vasp_step first" >&2
    return 1
  fi
  if ! declare -F httk_workflow_succeed >/dev/null; then
    printf '%s\n' "httk_workflow_vasp_publish: source \$HTTK_WORKFLOW_BASH_API (httk-workflow.sh) first" >&2
    return 1
  fi
  _hwv_action=${_httk_workflow_vasp_decision[0]} _hwv_message=${_httk_workflow_vasp_decision[1]}
  _hwv_next=${_httk_workflow_vasp_decision[2]} _hwv_reason=${_httk_workflow_vasp_decision[3]}
  _hwv_code=${_httk_workflow_vasp_decision[4]} _hwv_details=${_httk_workflow_vasp_decision[5]}
  _hwv_results=${_httk_workflow_vasp_decision[6]} _hwv_structure=${_httk_workflow_vasp_decision[7]}
  case $_hwv_action in
    succeed)
      httk_workflow_transaction_begin || return
      httk_workflow_put_file results.json "$_hwv_results" || return
      httk_workflow_put_file CONTCAR "$_hwv_structure" || return
      httk_workflow_succeed --message "$_hwv_message"
      ;;
    advance) httk_workflow_advance "$_hwv_next" --message "$_hwv_message" ;;
    retry) httk_workflow_retry "${_hwv_reason:-$_hwv_message}" --message "$_hwv_message" ;;
    fail) httk_workflow_fail "$_hwv_code" "$_hwv_message" --details "$_hwv_details" ;;
    *)
      printf '%s\n' "httk_workflow_vasp_publish: the decision's action '$_hwv_action' is unknown" >&2
      return 1
      ;;
  esac
}

# The flow-level functions below keep job state as httk_workflow_vasp_step does: a step composed of
#   httk_workflow_vasp_prepare provenance relax        # once per stage
#   httk_workflow_vasp_run problems                    # or start VASP yourself, then _check
#   httk_workflow_vasp_remedy remedy "${problems%% *}"  # and httk_workflow_retry
# leaves the same record of runs, remedies and events as the step would.

# Write the inputs of STAGE (relax or static) into the workdir from the job's inputs, settings and
# defaults, and record their provenance in job state (and the vasp.prepared event); VAR receives the
# provenance (compact JSON). Returns 0, 1 or 2.
httk_workflow_vasp_prepare() { # <var> <stage>
  if (($# != 2)); then
    printf '%s\n' "httk_workflow_vasp_prepare: usage: httk_workflow_vasp_prepare VAR STAGE" >&2
    return 2
  fi
  _httk_workflow_vasp_var httk_workflow_vasp_prepare "$1" || return 2
  _httk_workflow_vasp_call httk_workflow_vasp_prepare prepare "$2" || return
  printf -v "$1" '%s' "${_httk_workflow_vasp_fields[0]-}"
}

# The body of httk_workflow_vasp_run and _check: SUBCOMMAND's problems, space-separated, into VAR.
_httk_workflow_vasp_problems() { # <function> <subcommand> [<var>...]
  local _hwv_function=$1 _hwv_subcommand=$2 _hwv_problems
  shift 2
  if (($# != 1)); then
    printf '%s\n' "$_hwv_function: usage: $_hwv_function VAR" >&2
    return 2
  fi
  _httk_workflow_vasp_var "$_hwv_function" "$1" || return 2
  _httk_workflow_vasp_call "$_hwv_function" "$_hwv_subcommand" || return
  _hwv_problems="${_httk_workflow_vasp_fields[*]}"
  printf -v "$1" '%s' "$_hwv_problems"
}

# Run VASP once for the current step ($HTTK_WORKFLOW_STEP, whose inputs httk_workflow_vasp_prepare
# wrote), supervised as the step runs it (vasp.command, vasp.timeout, the STOPCAR-then-signals stop, a
# VASP an earlier attempt left stopped first), and record the run in job state: its ionic steps, its
# problems, its outputs archived into run/runs/<NN>-<stage>/. VAR receives the problems, in priority
# order, space-separated (empty when there is none). Returns 0, 1 or 2.
httk_workflow_vasp_run() { # <var>
  _httk_workflow_vasp_problems httk_workflow_vasp_run run "$@"
}

# The catalog's problems of the run whose outputs are in the workdir -- a run the caller started -- which
# is recorded in job state as httk_workflow_vasp_run records one (its outputs archived); without such
# outputs, the problems of the last recorded run. VAR receives them in priority order, space-separated
# (empty when there is none). Returns 0, 1 (no run at all) or 2.
httk_workflow_vasp_check() { # <var>
  _httk_workflow_vasp_problems httk_workflow_vasp_check check "$@"
}

# Apply the next rung of PROBLEM's ladder to the workdir's inputs for the last recorded run (backed up
# first, recorded in job state, in the run's record and as vasp.error and vasp.remedy events, as the
# step does); VAR receives the remedy's name. Returns 0; 4 when the ladder or vasp.max_remedies is spent
# (VAR empty; the vasp.failed event says why); 1 (no run recorded) or 2.
httk_workflow_vasp_remedy() { # <var> <problem>
  local _hwv_status=0
  if (($# != 2)); then
    printf '%s\n' "httk_workflow_vasp_remedy: usage: httk_workflow_vasp_remedy VAR PROBLEM" >&2
    return 2
  fi
  _httk_workflow_vasp_var httk_workflow_vasp_remedy "$1" || return 2
  _httk_workflow_vasp_call httk_workflow_vasp_remedy remedy "$2" || _hwv_status=$?
  printf -v "$1" '%s' "${_httk_workflow_vasp_fields[0]-}"
  return "$_hwv_status"
}
