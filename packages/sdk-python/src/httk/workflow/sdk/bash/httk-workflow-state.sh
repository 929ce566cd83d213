# shellcheck shell=bash disable=SC2154 # the globals are httk-workflow.sh's (its state block)
# httk-workflow-state.sh: the job's runner-private state, its observed declarations and its
# runner-reported events (.httk-job/), of the Bash API. httk-workflow.sh sources it on the first call
# of httk_workflow_state_save, httk_workflow_state_load, httk_workflow_declare or
# httk_workflow_record_event; a runner never sources it itself. Why a separate file: every Bash attempt
# parses what the library it sources holds (these functions cost 3 M instructions, valgrind), and most
# steps of most runners call none of them.
# Sourcing defines only functions.

# Replace DIRECTORY/NAME by TEXT plus a newline atomically: a temporary file in DIRECTORY, sync when
# durable, rename, sync DIRECTORY when durable. Missing directories are created (and their parents
# synchronized when durable). Returns 0, or 1 with a message.
_httk_workflow_replace_file() { # <function> <job dir> <directory> <name> <text>
  local _hwr_tmp=$3/.$4.tmp.$BASHPID.$RANDOM$RANDOM _hwr_durable=0
  ! _httk_workflow_durable "$1" || _hwr_durable=1
  if [[ ! -d $3 ]]; then
    if ! command mkdir -p -- "$3"; then
      _httk_workflow_error "$1" "cannot create $3"
      return 1
    fi
    if ((_hwr_durable)) && ! command sync -- "$2" "$2/.httk-job"; then
      _httk_workflow_error "$1" "cannot synchronize $2"
      return 1
    fi
  fi
  if ! printf '%s\n' "$5" >"$_hwr_tmp"; then
    _httk_workflow_error "$1" "cannot write $_hwr_tmp"
    command rm -f -- "$_hwr_tmp"
    return 1
  fi
  if ((_hwr_durable)) && ! command sync -- "$_hwr_tmp"; then
    _httk_workflow_error "$1" "cannot synchronize $_hwr_tmp"
    command rm -f -- "$_hwr_tmp"
    return 1
  fi
  if ! command mv -f -T -- "$_hwr_tmp" "$3/$4"; then
    _httk_workflow_error "$1" "cannot rename $_hwr_tmp to $3/$4"
    command rm -f -- "$_hwr_tmp"
    return 1
  fi
  if ((_hwr_durable)) && ! command sync -- "$3"; then
    _httk_workflow_error "$1" "cannot synchronize $3"
    return 1
  fi
  return 0
}

# Save the job's runner-private state: replace .httk-job/state.json by JSON_OBJECT (compact one-line
# JSON object text, inserted verbatim after a light check) atomically, durably when durable.
# Returns 0; 1 (filesystem); 2 (invalid argument).
httk_workflow_state_save() { # <json object>
  local -x LC_ALL=C _hw_job
  if (($# != 1)); then
    _httk_workflow_error httk_workflow_state_save "usage: httk_workflow_state_save JSON_OBJECT"
    return 2
  fi
  _httk_workflow_check_object httk_workflow_state_save JSON_OBJECT "$1" || return 2
  _httk_workflow_path _hw_job httk_workflow_state_save HTTK_WORKFLOW_JOB_DIR job_dir || return 1
  _httk_workflow_replace_file httk_workflow_state_save "$_hw_job" "$_hw_job/.httk-job" state.json "$1"
}

# Load the job's runner-private state into VAR: the JSON text of .httk-job/state.json without its final
# newline, or {} when no state was saved yet.
# Returns 0; 1 (unreadable file); 2 (wrong call).
httk_workflow_state_load() { # <var>
  local -x LC_ALL=C _hw_job _hw_file _hw_text=''
  if (($# != 1)); then
    _httk_workflow_error httk_workflow_state_load "usage: httk_workflow_state_load VAR"
    return 2
  fi
  _httk_workflow_check_var httk_workflow_state_load "$1" || return 2
  _httk_workflow_path _hw_job httk_workflow_state_load HTTK_WORKFLOW_JOB_DIR job_dir || return 1
  _hw_file=$_hw_job/.httk-job/state.json
  if [[ ! -e $_hw_file ]]; then
    printf -v "$1" '%s' '{}'
    return 0
  fi
  if [[ ! -f $_hw_file || ! -r $_hw_file ]]; then
    _httk_workflow_error httk_workflow_state_load "cannot read $_hw_file"
    return 1
  fi
  IFS= read -r -d '' _hw_text <"$_hw_file" || : # read reports end of file as status 1
  printf -v "$1" '%s' "${_hw_text%$'\n'}"
}

# Record the observed workflow declaration NAME: replace .httk-job/declarations/NAME.json by JSON_OBJECT
# (compact one-line JSON object text, verbatim) atomically. The last write of a name wins.
# Returns 0; 1 (filesystem); 2 (invalid argument).
httk_workflow_declare() { # <name> <json object>
  local -x LC_ALL=C _hw_job
  if (($# != 2)); then
    _httk_workflow_error httk_workflow_declare "usage: httk_workflow_declare NAME JSON_OBJECT"
    return 2
  fi
  if ! _httk_workflow_name "$1" 64; then
    _httk_workflow_error httk_workflow_declare \
      "NAME '$1' must be 1-64 bytes of letters, digits, '.', '_' and '-', not starting with '.' or '-'"
    return 2
  fi
  _httk_workflow_check_object httk_workflow_declare JSON_OBJECT "$2" || return 2
  _httk_workflow_path _hw_job httk_workflow_declare HTTK_WORKFLOW_JOB_DIR job_dir || return 1
  _httk_workflow_replace_file httk_workflow_declare "$_hw_job" "$_hw_job/.httk-job/declarations" \
    "$1.json" "$2"
}

# Append one runner-reported event to the job's record (.httk-job/events.jsonl, docs/runner-events.md):
# {"format":"httk-workflow-runner-event","format_version":1,"time":T,"step":S,"attempt_id":A,
# "attempt_ordinal":N,"kind":KIND,"message":MESSAGE[,"details":JSON_OBJECT]} on one line, the bytes
# Python's Attempt.record_event writes (the time aside). KIND is 1-128 letters, digits, '.', '_', ':'
# and '-', starting with a letter or digit; JSON_OBJECT is compact one-line JSON, inserted verbatim. The
# line holds at most 8192 bytes. Before an append that would make the file larger than 65536 bytes it
# is renamed over events.1.jsonl. Not synchronized, even when durable: an event is diagnostics.
# Returns 0; 1 (context or filesystem); 2 (invalid argument, or an event too long).
httk_workflow_record_event() { # <kind> <message> [--details JSON_OBJECT]
  local -x LC_ALL=C _hw_job _hw_message _hw_details='' _hw_step _hw_attempt _hw_ordinal _hw_now _hw_time
  local _hw_line _hw_file _hw_text=''
  if (($# != 2 && $# != 4)) || { (($# == 4)) && [[ $3 != --details ]]; }; then
    _httk_workflow_error httk_workflow_record_event \
      "usage: httk_workflow_record_event KIND MESSAGE [--details JSON_OBJECT]"
    return 2
  fi
  if [[ $1 != [A-Za-z0-9]* || $1 == *[!A-Za-z0-9._:-]* || ${#1} -gt 128 ]]; then
    _httk_workflow_error httk_workflow_record_event "KIND '$1' must be 1-128 letters, digits, '.', '_', ':'" \
      "or '-', starting with a letter or digit (such as vasp.remedy)"
    return 2
  fi
  _httk_workflow_text_arg _hw_message httk_workflow_record_event MESSAGE "$2" || return 2
  if (($# == 4)); then
    _httk_workflow_check_object httk_workflow_record_event JSON_OBJECT "$4" || return 2
    _hw_details=,\"details\":$4
  fi
  _httk_workflow_load_context httk_workflow_record_event || return 1
  if ! { _httk_workflow_lookup _hw_step context step && _httk_workflow_lookup _hw_attempt context attempt_id &&
    _httk_workflow_lookup _hw_ordinal context attempt_ordinal; }; then
    _httk_workflow_error httk_workflow_record_event "$HTTK_WORKFLOW_CONTEXT lacks step, attempt_id or attempt_ordinal"
    return 1
  fi
  if [[ -n ${EPOCHREALTIME-} ]]; then
    _hw_now=$EPOCHREALTIME
    TZ=UTC0 printf -v _hw_time '%(%Y-%m-%dT%H:%M:%S)T' "${_hw_now%.*}"
    _hw_time+=.${_hw_now#*.}Z
  elif ! _hw_time=$(command date -u +%Y-%m-%dT%H:%M:%S.%6NZ); then
    _httk_workflow_error httk_workflow_record_event "cannot read the clock"
    return 1
  fi
  _hw_line="{\"format\":\"httk-workflow-runner-event\",\"format_version\":1,\"time\":\"$_hw_time\","
  _hw_line+="\"step\":$_hw_step,\"attempt_id\":$_hw_attempt,\"attempt_ordinal\":$_hw_ordinal,"
  _hw_line+="\"kind\":\"$1\",\"message\":$_hw_message$_hw_details}"$'\n'
  if ((${#_hw_line} > 8192)); then
    _httk_workflow_error httk_workflow_record_event \
      "the event is ${#_hw_line} bytes; an event line holds at most 8192 (shorten the message or the details)"
    return 2
  fi
  _httk_workflow_path _hw_job httk_workflow_record_event HTTK_WORKFLOW_JOB_DIR job_dir || return 1
  _hw_file=$_hw_job/.httk-job/events.jsonl
  if ! command mkdir -p -- "$_hw_job/.httk-job"; then
    _httk_workflow_error httk_workflow_record_event "cannot create $_hw_job/.httk-job"
    return 1
  fi
  if [[ -f $_hw_file ]]; then
    IFS= read -r -d '' _hw_text <"$_hw_file" || : # read reports end of file as status 1
  fi
  if ((${#_hw_text} > 0 && ${#_hw_text} + ${#_hw_line} > 65536)); then
    if ! command mv -f -T -- "$_hw_file" "$_hw_job/.httk-job/events.1.jsonl"; then
      _httk_workflow_error httk_workflow_record_event "cannot rotate $_hw_file"
      return 1
    fi
    _hw_text=''
  fi
  # A write cut short leaves a line without its newline: start this event on a line of its own.
  [[ -z $_hw_text || ${_hw_text: -1} == $'\n' ]] || _hw_line=$'\n'$_hw_line
  if ! printf '%s' "$_hw_line" >>"$_hw_file"; then
    _httk_workflow_error httk_workflow_record_event "cannot append to $_hw_file"
    return 1
  fi
}

