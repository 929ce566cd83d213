# shellcheck shell=bash disable=SC2154 # the globals are httk-workflow.sh's (its state block)
# httk-workflow-dispatch.sh: the step dispatcher of the Bash API (httk_workflow_register_step,
# httk_workflow_dispatch). httk-workflow.sh sources it on the first call of either; a runner never
# sources it itself. Why a separate file: every Bash attempt parses what the library it sources holds
# (the dispatcher costs 1.4 M instructions, valgrind), and a runner that publishes without it (the v1
# runner) never calls it. Sourcing defines only functions; their globals are httk-workflow.sh's.

# Register FUNCTION (default: a function named STEP) as the handler of STEP. The registration order is
# the runner_steps every outcome of this process carries.
# Returns 0; 2 for an invalid step name, an undefined function, or a step registered twice.
httk_workflow_register_step() { # <step> [function]
  local -x LC_ALL=C _hw_function=${2-${1-}} _hw_step
  if (($# < 1 || $# > 2)); then
    _httk_workflow_error httk_workflow_register_step "usage: httk_workflow_register_step STEP [FUNCTION]"
    return 2
  fi
  if ! _httk_workflow_name "$1" 128; then
    _httk_workflow_error httk_workflow_register_step \
      "STEP '$1' must be 1-128 bytes of letters, digits, '.', '_' and '-', not starting with '.' or '-'"
    return 2
  fi
  if ! declare -F -- "$_hw_function" >/dev/null; then
    _httk_workflow_error httk_workflow_register_step \
      "FUNCTION '$_hw_function' is not a defined shell function"
    return 2
  fi
  for _hw_step in ${_httk_workflow_steps[@]+"${_httk_workflow_steps[@]}"}; do
    if [[ $_hw_step == "$1" ]]; then
      _httk_workflow_error httk_workflow_register_step "STEP '$1' is already registered"
      return 2
    fi
  done
  _httk_workflow_steps+=("$1")
  _httk_workflow_step_functions+=("$_hw_function")
  return 0
}

# Publish the dispatcher's own failure, worded and detailed as the Python SDK's dispatcher does:
#   unknown_step  "this runner does not implement step 'S'; its steps are: 'a', 'b'" (or: none),
#                 details {"step":S,"runner_steps":[...]}
#   no_outcome    "step 'S' returned without publishing an outcome", details {"step":S,"function":F}
# and note it on stderr (the manager keeps it in the attempt's log). Returns what httk_workflow_fail does.
_httk_workflow_dispatch_fail() { # <code> <step> [function]
  local -x LC_ALL=C _hwx_step _hwx_name _hwx_known='' _hwx_steps='' _hwx_message _hwx_details
  _httk_workflow_json_string _hwx_step "$2" || _hwx_step='""'
  if [[ $1 == unknown_step ]]; then
    for _hwx_name in ${_httk_workflow_steps[@]+"${_httk_workflow_steps[@]}"}; do
      _hwx_known+="${_hwx_known:+, }'$_hwx_name'"
      _hwx_steps+="${_hwx_steps:+,}\"$_hwx_name\""
    done
    _hwx_message="this runner does not implement step '$2'; its steps are: ${_hwx_known:-none}"
    _hwx_details="{\"step\":$_hwx_step,\"runner_steps\":[$_hwx_steps]}"
  else
    _httk_workflow_json_string _hwx_name "$3" || _hwx_name='""'
    _hwx_message="step '$2' returned without publishing an outcome"
    _hwx_details="{\"step\":$_hwx_step,\"function\":$_hwx_name}"
  fi
  _httk_workflow_error httk_workflow_dispatch "$_hwx_message (publishing fail/$1)"
  httk_workflow_fail "$1" "$_hwx_message" --details "$_hwx_details"
}

# Run the function registered for the current step ($HTTK_WORKFLOW_STEP) with ARGUMENTs, and make sure
# the attempt ends with exactly one outcome:
#   - an unknown step publishes fail unknown_step (naming the step and the registered ones);
#   - a function that returns 0 without publishing gets fail no_outcome;
#   - a function that returns nonzero without publishing makes dispatch return that status (the manager
#     records process_failure); under set -e the shell exits with it at once, which is the same.
# Call it as a plain command (not in `if` or `||`), so that the runner's set -e applies in the steps.
# Returns 0 once an outcome is published; the step's status when it failed without one; otherwise the
# status of publishing the fail outcome (1 or 3).
httk_workflow_dispatch() { # [argument...]
  local _hwd_step=${HTTK_WORKFLOW_STEP-} _hwd_function='' _hwd_i _hwd_status _hwd_control=''
  _httk_workflow_dispatching=1
  if [[ -z $_hwd_step ]]; then
    _httk_workflow_path _hwd_step httk_workflow_dispatch HTTK_WORKFLOW_STEP step || return 1
  fi
  for ((_hwd_i = 0; _hwd_i < ${#_httk_workflow_steps[@]}; _hwd_i++)); do
    if [[ ${_httk_workflow_steps[_hwd_i]} == "$_hwd_step" ]]; then
      _hwd_function=${_httk_workflow_step_functions[_hwd_i]}
    fi
  done
  if [[ -z $_hwd_function ]]; then
    _httk_workflow_dispatch_fail unknown_step "$_hwd_step"
    return
  fi
  "$_hwd_function" "$@"
  _hwd_status=$?
  [[ -z $_httk_workflow_published ]] || return 0
  # An outcome published by a subshell or a child process counts as well.
  _httk_workflow_path _hwd_control httk_workflow_dispatch HTTK_WORKFLOW_CONTROL_DIR control_dir \
    2>/dev/null || :
  [[ -z $_hwd_control || ! -e $_hwd_control/outcome.ready ]] || return 0
  ((_hwd_status == 0)) || return "$_hwd_status"
  _httk_workflow_dispatch_fail no_outcome "$_hwd_step" "$_hwd_function"
}
