# shellcheck shell=bash disable=SC2154 # the globals are httk-workflow.sh's (its state block)
# httk-workflow-fail.sh: the outcomes fail, retry and pause of the Bash API, which a step publishes when
# it cannot go on. httk-workflow.sh sources it on the first call of one of them; a runner never sources
# it itself. Why a separate file: every Bash attempt parses what the library it sources holds (these
# cost 1.4 M instructions, valgrind), and an attempt that advances or succeeds never calls them.
# Sourcing defines only functions.

# A failure code: one token of 1-128 bytes of UTF-8 without whitespace or control characters (the
# manager's rule, Python's \s included). Returns 0, or 2 with a message.
_httk_workflow_check_code() { # <function> <code>
  local _hwk_c=$2
  if [[ -z $_hwk_c || ${#_hwk_c} -gt 128 ]]; then
    _httk_workflow_error "$1" "CODE '$_hwk_c' must be 1 to 128 bytes"
    return 2
  fi
  if [[ $_hwk_c == *["$_httk_workflow_ctl"$' \x7f']* || $_hwk_c == *$'\xc2'[$'\x80'-$'\xa0']* ||
    $_hwk_c == *$'\xe2\x80'[$'\x80'-$'\x8a\xa8\xa9\xaf']* || $_hwk_c == *$'\xe1\x9a\x80'* ||
    $_hwk_c == *$'\xe2\x81\x9f'* || $_hwk_c == *$'\xe3\x80\x80'* ]]; then
    _httk_workflow_error "$1" "CODE '$_hwk_c' must be one token without whitespace or control characters"
    return 2
  fi
  if ! _httk_workflow_utf8 "$_hwk_c"; then
    _httk_workflow_error "$1" "CODE is not valid UTF-8"
    return 2
  fi
  return 0
}

# Publish a fail outcome: the job is declared broken with failure {code, message[, details][, retryable]}.
# CODE is one token without whitespace (at most 128 bytes; namespace it, e.g. vasp.nonconvergent),
# MESSAGE one nonempty sentence, --details a JSON object text inserted verbatim.
# Returns 0; 1 (context/filesystem); 2 (invalid argument); 3 (second outcome).
httk_workflow_fail() { # <code> <message> [--details JSON_OBJECT] [--retryable|--not-retryable]
  local -x LC_ALL=C _hw_priority='' _hw_resources='' _hw_message='' _hw_details='' _hw_retryable=''
  local _hw_text _hw_code
  if (($# < 2)); then
    _httk_workflow_error httk_workflow_fail \
      "usage: httk_workflow_fail CODE MESSAGE [--details JSON_OBJECT] [--retryable|--not-retryable]"
    return 2
  fi
  _httk_workflow_check_code httk_workflow_fail "$1" || return 2
  _httk_workflow_json_string _hw_code "$1" || return 2
  _httk_workflow_text_arg _hw_text httk_workflow_fail MESSAGE "$2" || return 2
  _httk_workflow_options httk_workflow_fail ' details retryable not-retryable ' "${@:3}" || return 2
  _httk_workflow_finish httk_workflow_fail fail \
    ",\"failure\":{\"code\":$_hw_code,\"message\":$_hw_text$_hw_details$_hw_retryable}"
}

# Publish a retry outcome: run this activation again under the retry policy, because of REASON.
# Options (beyond the Python signature): --priority N, --message TEXT.
# Returns 0; 1 (context/filesystem); 2 (invalid argument); 3 (second outcome).
httk_workflow_retry() { _httk_workflow_because retry "$@"; } # <reason> [--priority N] [--message TEXT]

# Publish a pause outcome: the job waits for an operator, because of REASON.
# Options (beyond the Python signature): --priority N, --message TEXT.
# Returns 0; 1 (context/filesystem); 2 (invalid argument); 3 (second outcome).
httk_workflow_pause() { _httk_workflow_because pause "$@"; } # <reason> [--priority N] [--message TEXT]

# Publish ACTION (retry or pause), whose member is {"reason": REASON}, for httk_workflow_ACTION.
_httk_workflow_because() { # <action> <reason> [--priority N] [--message TEXT]
  local -x LC_ALL=C _hw_priority='' _hw_resources='' _hw_message='' _hw_details='' _hw_retryable='' _hw_text
  local _hw_function=httk_workflow_$1
  if (($# < 2)); then
    _httk_workflow_error "$_hw_function" "usage: $_hw_function REASON [--priority N] [--message T]"
    return 2
  fi
  _httk_workflow_text_arg _hw_text "$_hw_function" REASON "$2" || return 2
  _httk_workflow_options "$_hw_function" ' priority message ' "${@:3}" || return 2
  _httk_workflow_finish "$_hw_function" "$1" ",\"$1\":{\"reason\":$_hw_text}$_hw_priority$_hw_message"
}
