# shellcheck shell=bash disable=SC2154 # the globals are httk-workflow.sh's (its state block)
# httk-workflow-children.sh: children and joins of the Bash API (docs/outcome-documents.md "Children and
# joins"; the reference at the end of httk-workflow.sh says how they behave). httk-workflow.sh sources it on the first call
# of httk_workflow_spawn, httk_workflow_wait, httk_workflow_children or httk_workflow_child, and when
# an outcome publishes what spawn kept; a runner never sources it itself.
#
# Why a separate file: every Bash attempt parses what the library it sources holds, and these functions
# are nearly a third of it (valgrind: 8.6 M of the 28.4 M instructions sourcing httk-workflow.sh cost,
# a fifth of a bare Python start), which a step that spawns nothing and follows no join never calls.
# Sourcing defines only functions; their globals are httk-workflow.sh's.

# Split the JSON object TEXT into its top-level members, dropping the whitespace outside strings: the
# raw key tokens ("runner", quotes included) go to _httk_workflow_split_keys and the compact value text
# to _httk_workflow_split_values. Strings are copied as written. Needs LC_ALL=C.
# Returns 0, or 1 when TEXT is not one JSON object.
_httk_workflow_split_object() { # <text>
  local _hws_rest=$1 _hws_seg _hws_part _hws_run _hws_acc='' _hws_key='' _hws_c _hws_i _hws_depth=0
  local _hws_closed='' _hws_quoted
  _httk_workflow_split_keys=() _httk_workflow_split_values=()
  while [[ -n $_hws_rest ]]; do
    _hws_quoted=
    if [[ $_hws_rest == *'"'* ]]; then
      _hws_seg=${_hws_rest%%'"'*}
      _hws_rest=${_hws_rest#*'"'}
      _hws_quoted=1
    else
      _hws_seg=$_hws_rest
      _hws_rest=
    fi
    _hws_seg=${_hws_seg//[$' \t\n\r']/}
    for ((_hws_i = 0; _hws_i < ${#_hws_seg}; _hws_i++)); do
      _hws_c=${_hws_seg:_hws_i:1}
      [[ -z $_hws_closed ]] || return 1 # something after the object
      case $_hws_c in
        '{' | '[')
          _hws_depth=$((_hws_depth + 1))
          if ((_hws_depth == 1)); then
            [[ $_hws_c == '{' ]] || return 1
            continue
          fi
          ;;
        '}' | ']')
          _hws_depth=$((_hws_depth - 1))
          if ((_hws_depth < 0)); then
            return 1
          elif ((_hws_depth == 0)); then
            [[ $_hws_c == '}' ]] || return 1
            if [[ -n $_hws_key ]]; then
              _httk_workflow_split_keys+=("$_hws_key")
              _httk_workflow_split_values+=("$_hws_acc")
            elif [[ -n $_hws_acc ]]; then
              return 1
            fi
            _hws_closed=1
            continue
          fi
          ;;
        ':' | ',')
          if ((_hws_depth == 1)); then
            if [[ $_hws_c == : ]]; then
              _hws_key=$_hws_acc
            else
              [[ -n $_hws_key ]] || return 1
              _httk_workflow_split_keys+=("$_hws_key")
              _httk_workflow_split_values+=("$_hws_acc")
              _hws_key=
            fi
            _hws_acc=
            continue
          fi
          ;;
      esac
      ((_hws_depth > 0)) || return 1
      _hws_acc+=$_hws_c
    done
    [[ -n $_hws_quoted ]] || break
    # A string: up to the next quote that an even run of backslashes (none included) precedes.
    if ((_hws_depth == 0)) || [[ -n $_hws_closed ]]; then
      return 1
    fi
    _hws_acc+='"'
    while :; do
      [[ $_hws_rest == *'"'* ]] || return 1
      _hws_part=${_hws_rest%%'"'*}
      _hws_rest=${_hws_rest#*'"'}
      _hws_acc+=$_hws_part'"'
      _hws_run=${_hws_part##*[!\\]}
      if ((${#_hws_run} % 2 == 0)); then
        break
      fi
    done
  done
  [[ -n $_hws_closed ]]
}

# Read and cache the top-level members of this job's job.json (once per process and path).
# Returns 0, or 1 with a message.
_httk_workflow_load_job() { # <function>
  local _hwk_dir _hwk_file _hwk_text=''
  _httk_workflow_path _hwk_dir "$1" HTTK_WORKFLOW_JOB_DIR job_dir || return 1
  _hwk_file=$_hwk_dir/job.json
  [[ $_hwk_file != "$_httk_workflow_job_file" ]] || return 0
  if [[ ! -f $_hwk_file || ! -r $_hwk_file ]]; then
    _httk_workflow_error "$1" "cannot read the job definition $_hwk_file"
    return 1
  fi
  IFS= read -r -d '' _hwk_text <"$_hwk_file" || : # read reports end of file as status 1
  if ! _httk_workflow_split_object "$_hwk_text"; then
    _httk_workflow_error "$1" "$_hwk_file is not one JSON object"
    return 1
  fi
  _httk_workflow_job_keys=("${_httk_workflow_split_keys[@]}")
  _httk_workflow_job_values=("${_httk_workflow_split_values[@]}")
  _httk_workflow_job_file=$_hwk_file
}

# The compact value text of the member NAME of the cached job.json. Returns 0 found, 1 absent.
_httk_workflow_job_member() { # <var> <name>
  local _hwm_i
  for ((_hwm_i = 0; _hwm_i < ${#_httk_workflow_job_keys[@]}; _hwm_i++)); do
    if [[ ${_httk_workflow_job_keys[_hwm_i]} == "\"$2\"" ]]; then
      printf -v "$1" '%s' "${_httk_workflow_job_values[_hwm_i]}"
      return 0
    fi
  done
  return 1
}

# Whether TEXT has the tag syntax (labels and tags): 1-48 bytes of a-z, 0-9, '.', '_', '-', starting
# with a letter or digit, without '--'. Returns 0, or 2 with a message naming WHAT.
_httk_workflow_check_label() { # <function> <what> <text>
  if [[ $3 != [a-z0-9]* || $3 == *[!a-z0-9._-]* || ${#3} -gt 48 || $3 == *--* ]]; then
    _httk_workflow_error "$1" \
      "$2 '$3' must be 1-48 bytes of a-z, 0-9, '.', '_' and '-', starting with a letter or digit, no '--'"
    return 2
  fi
  return 0
}

# Whether TEXT is a placement (a normalized relative path of components of at most 255 bytes, none '.',
# '..' or .httk-workflow, in UTF-8) outside the parent's payload PARENT. Returns 0, or 2 with a message.
_httk_workflow_check_placement() { # <function> <text> <parent payload placement>
  local _hwl_part _hwl_rest=$2/
  if [[ -z $2 || $2 == /* ]] || ! _httk_workflow_utf8 "$2"; then
    _httk_workflow_error "$1" "--placement '$2' must be a nonempty relative UTF-8 path"
    return 2
  fi
  while [[ -n $_hwl_rest ]]; do
    _hwl_part=${_hwl_rest%%/*}
    _hwl_rest=${_hwl_rest#*/}
    if [[ -z $_hwl_part || $_hwl_part == . || $_hwl_part == .. || $_hwl_part == .httk-workflow ||
      ${#_hwl_part} -gt 255 ]]; then
      _httk_workflow_error "$1" \
        "--placement '$2' must be normalized: no empty, '.', '..' or .httk-workflow components, each <= 255 bytes"
      return 2
    fi
  done
  if [[ $2 == "$3" || $2 == "$3"/* ]]; then
    _httk_workflow_error "$1" "--placement '$2' lies inside the parent's own payload"
    return 2
  fi
  return 0
}

# Learn, once per process, how children copy this job's runner (RUNNER is its compact job.json member):
# _httk_workflow_runner_path is the payload-relative path of a payload runner ('' for a runner outside
# the payload), _httk_workflow_runner_text its bytes when they hold no NUL (else the copy falls back to
# cp), and _httk_workflow_runner_mode the mode of a copy (the runner's, less the umask, as Python's).
# Returns 0, or 1 with a message.
_httk_workflow_learn_runner() { # <function> <runner json>
  local _hwy_i _hwy_source='"payload"' _hwy_path='' _hwy_job _hwy_from _hwy_mode _hwy_mask
  [[ -z $_httk_workflow_runner_known ]] || return 0
  _httk_workflow_runner_path='' _httk_workflow_runner_text='' _httk_workflow_runner_mode=''
  if _httk_workflow_split_object "$2"; then
    for ((_hwy_i = 0; _hwy_i < ${#_httk_workflow_split_keys[@]}; _hwy_i++)); do
      case ${_httk_workflow_split_keys[_hwy_i]} in
        '"source"') _hwy_source=${_httk_workflow_split_values[_hwy_i]} ;;
        '"path"') _hwy_path=${_httk_workflow_split_values[_hwy_i]} ;;
      esac
    done
  fi
  if [[ $_hwy_source == '"payload"' && -n $_hwy_path ]]; then
    _httk_workflow_decode _hwy_path "$_hwy_path" "$1" "the parent's runner.path" || return 1
    _httk_workflow_path _hwy_job "$1" HTTK_WORKFLOW_JOB_DIR job_dir || return 1
    _hwy_from=$_hwy_job/$_hwy_path
    if [[ ! -f $_hwy_from || -L $_hwy_from ]] || ! _hwy_mode=$(command stat -c %a -- "$_hwy_from"); then
      _httk_workflow_error "$1" "the payload runner $_hwy_from is not a regular file to copy into children"
      return 1
    fi
    _hwy_mask=$(umask)
    printf -v _httk_workflow_runner_mode '%o' $((8#$_hwy_mode & ~8#$_hwy_mask & 8#7777))
    if IFS= read -r -d '' _httk_workflow_runner_text <"$_hwy_from"; then
      _httk_workflow_runner_text='' # it holds a NUL byte, which no Bash string can: copy it with cp
      _httk_workflow_runner_binary=1
    fi
    _httk_workflow_runner_path=$_hwy_path
  fi
  _httk_workflow_runner_known=1
}

# Write the spawn set into a new draft: every bundle directory with one mkdir, each job.json and runner
# copy with printf (cp for a runner holding NUL), the copies' mode with one chmod, then
# children/spawn.json. Every file and directory is recorded for synchronization.
# Returns 0, or 1 with a message (the draft is removed then).
_httk_workflow_write_children() { # <function>
  local _hwb_i _hwb_draft _hwb_key _hwb_bundle _hwb_sub _hwb_rest _hwb_entries='' _hwb_runner
  local -a _hwb_dirs=() _hwb_copies=()
  _httk_workflow_new_draft _hwb_draft "$1" || return 1
  _httk_workflow_draft=$_hwb_draft _httk_workflow_draft_files=()
  _httk_workflow_draft_dirs=("$_hwb_draft" "$_hwb_draft/children" "$_hwb_draft/children/jobs")
  _hwb_runner=$_httk_workflow_runner_path
  for _hwb_key in "${_httk_workflow_bundle_keys[@]}"; do
    _hwb_bundle=$_hwb_draft/children/jobs/$_hwb_key
    _hwb_dirs+=("$_hwb_bundle")
    _hwb_sub=$_hwb_bundle _hwb_rest=$_hwb_runner
    while [[ $_hwb_rest == */* ]]; do # the runner's own directories, parents first
      _hwb_sub+=/${_hwb_rest%%/*}
      _hwb_rest=${_hwb_rest#*/}
      _hwb_dirs+=("$_hwb_sub")
    done
  done
  if ! command mkdir -- "$_hwb_draft/children" "$_hwb_draft/children/jobs" "${_hwb_dirs[@]}"; then
    _httk_workflow_error "$1" "cannot create the children's bundles in $_hwb_draft"
    _httk_workflow_discard_children
    return 1
  fi
  _httk_workflow_draft_dirs+=("${_hwb_dirs[@]}")
  for ((_hwb_i = 0; _hwb_i < ${#_httk_workflow_bundle_keys[@]}; _hwb_i++)); do
    _hwb_bundle=$_hwb_draft/children/jobs/${_httk_workflow_bundle_keys[_hwb_i]}
    _httk_workflow_draft_file "$1" "${_hwb_bundle#"$_hwb_draft"/}/job.json" \
      "${_httk_workflow_bundle_docs[_hwb_i]}" || return 1
    [[ -n $_hwb_runner ]] || continue
    if [[ -n $_httk_workflow_runner_binary ]]; then
      if ! command cp -- "${_httk_workflow_job_file%/job.json}/$_hwb_runner" "$_hwb_bundle/$_hwb_runner"; then
        _httk_workflow_error "$1" "cannot copy the payload runner into $_hwb_bundle"
        _httk_workflow_discard_children
        return 1
      fi
    elif ! printf '%s' "$_httk_workflow_runner_text" >"$_hwb_bundle/$_hwb_runner"; then
      _httk_workflow_error "$1" "cannot copy the payload runner into $_hwb_bundle"
      _httk_workflow_discard_children
      return 1
    fi
    _hwb_copies+=("$_hwb_bundle/$_hwb_runner")
  done
  if ((${#_hwb_copies[@]} > 0)); then
    if ! command chmod -- "$_httk_workflow_runner_mode" "${_hwb_copies[@]}"; then
      _httk_workflow_error "$1" "cannot set the mode of the runner copies"
      _httk_workflow_discard_children
      return 1
    fi
    _httk_workflow_draft_files+=("${_hwb_copies[@]}")
  fi
  for _hwb_key in "${_httk_workflow_spawn_entries[@]}"; do
    _hwb_entries+="${_hwb_entries:+,}$_hwb_key"
  done
  _httk_workflow_draft_file "$1" children/spawn.json \
    "{\"format\":\"httk-workflow-spawn\",\"format_version\":1,\"children\":[$_hwb_entries]}"
}

# Write TEXT plus a newline to the new file RELATIVE of the draft. Returns 0, or 1 with a message (the
# draft is removed then).
_httk_workflow_draft_file() { # <function> <relative> <text>
  if ! printf '%s\n' "$3" >"$_httk_workflow_draft/$2"; then
    _httk_workflow_error "$1" "cannot write $_httk_workflow_draft/$2"
    _httk_workflow_discard_children
    return 1
  fi
  _httk_workflow_draft_files+=("$_httk_workflow_draft/$2")
}

# Spawn a child job that starts at STEP, labelled LABEL (tag syntax, unique among this shell's
# children). Its job.json is composed now and written, with every other bundle of this shell, into the
# outcome draft when this attempt publishes advance, succeed or wait (fail, retry and pause discard
# it); the manager registers it while committing that outcome. The child's job.json takes runner,
# workdir, data, claim, priority and retry_policy from this job's; a payload runner is copied into its
# bundle. --input NAME=JSON (repeatable, JSON text inserted verbatim) builds its inputs, --tag its tag
# (default LABEL), --placement where it goes (default <placement>/<job key>.children/<n / 1000> for the
# n-th child from 0), --name its name, --priority and --resource NAME=INT (repeatable) its priority and
# resources.
# Returns 0; 1 (context/job.json unreadable); 2 (invalid argument); 3 (the outcome is already published).
httk_workflow_spawn() { # <label> <step> [--input NAME=JSON]... [--tag T] [--placement P] [--name TEXT] [--priority N] [--resource NAME=INT]...
  local -x LC_ALL=C _hw_priority='' _hw_resources='' _hw_message='' _hw_details='' _hw_retryable=''
  local _hw_inputs='' _hw_name='' _hw_tag='' _hw_placement='' _hw_condition='' _hw_count='' _hw_on_impossible=''
  local _hw_member _hw_raw _hw_parent='' _hw_ws _hw_pkey _hw_pplace _hw_place _hw_id _hw_spawn _hw_key _hw_doc
  local _hw_runner _hw_workdir _hw_data _hw_prio _hw_claim _hw_policy=''
  if (($# < 2)); then
    _httk_workflow_error httk_workflow_spawn "usage: httk_workflow_spawn LABEL STEP [--input NAME=JSON]... \
[--tag T] [--placement P] [--name TEXT] [--priority N] [--resource NAME=INT]..."
    return 2
  fi
  _httk_workflow_check_label httk_workflow_spawn LABEL "$1" || return 2
  if [[ $_httk_workflow_spawn_label_set == *" $1 "* ]]; then # one glob match, not a loop per child
    _httk_workflow_error httk_workflow_spawn "LABEL '$1' is already the label of another child of this attempt"
    return 2
  fi
  if ! _httk_workflow_name "$2" 128; then
    _httk_workflow_error httk_workflow_spawn \
      "STEP '$2' must be 1-128 bytes of letters, digits, '.', '_' and '-', not starting with '.' or '-'"
    return 2
  fi
  _httk_workflow_options httk_workflow_spawn ' input tag placement name priority resource ' "${@:3}" || return 2
  _hw_tag=${_hw_tag:-$1}
  _httk_workflow_check_label httk_workflow_spawn --tag "$_hw_tag" || return 2
  if [[ -n $_httk_workflow_published || -e ${HTTK_WORKFLOW_CONTROL_DIR-}/outcome.ready ]]; then
    _httk_workflow_error httk_workflow_spawn "this attempt has already published its outcome; spawn before it"
    return 3
  fi
  _httk_workflow_load_context httk_workflow_spawn || return 1
  for _hw_member in workspace_id job_id job_key placement activation_id; do
    if ! _httk_workflow_lookup _hw_raw context "$_hw_member" || [[ $_hw_raw != '"'*'"' ]]; then
      _httk_workflow_error httk_workflow_spawn "$HTTK_WORKFLOW_CONTEXT has no string member '$_hw_member'"
      return 1
    fi
    _hw_parent+="${_hw_parent:+,}\"$_hw_member\":$_hw_raw"
    case $_hw_member in
      workspace_id) _hw_ws=$_hw_raw ;;
      job_key) _httk_workflow_decode _hw_pkey "$_hw_raw" httk_workflow_spawn job_key || return 1 ;;
      placement) _httk_workflow_decode _hw_pplace "$_hw_raw" httk_workflow_spawn placement || return 1 ;;
    esac
  done
  _httk_workflow_load_job httk_workflow_spawn || return 1
  for _hw_member in runner workdir data priority claim; do
    if ! _httk_workflow_job_member "_hw_raw" "$_hw_member"; then
      _httk_workflow_error httk_workflow_spawn "$_httk_workflow_job_file has no member '$_hw_member' to inherit"
      return 1
    fi
    printf -v "_hw_${_hw_member/priority/prio}" '%s' "$_hw_raw"
  done
  if _httk_workflow_job_member _hw_raw retry_policy; then
    _hw_policy=",\"retry_policy\":$_hw_raw"
  fi
  _hw_place=${_hw_placement:-$_hw_pplace/$_hw_pkey.children/$((${#_httk_workflow_spawn_labels[@]} / 1000))}
  _httk_workflow_check_placement httk_workflow_spawn "$_hw_place" "$_hw_pplace/$_hw_pkey" || return 2
  _httk_workflow_json_string _hw_place "$_hw_place" || return 2
  _httk_workflow_uuid _hw_id httk_workflow_spawn || return 1
  _httk_workflow_uuid _hw_spawn httk_workflow_spawn || return 1
  _hw_key=$_hw_tag--$_hw_id
  _hw_doc="{\"format\":\"httk-workflow-job\",\"format_version\":1,\"id\":\"$_hw_id\",\"tag\":\"$_hw_tag\"$_hw_name"
  _hw_doc+=",\"runner\":$_hw_runner,\"workdir\":$_hw_workdir,\"data\":$_hw_data,\"initial_step\":\"$2\""
  _hw_doc+="${_hw_priority:-,\"priority\":$_hw_prio},\"claim\":$_hw_claim$_hw_policy$_hw_resources$_hw_inputs"
  _hw_doc+=",\"parent\":{$_hw_parent,\"spawn_id\":\"$_hw_spawn\"}}"
  _httk_workflow_learn_runner httk_workflow_spawn "$_hw_runner" || return 1
  _httk_workflow_bundle_keys+=("$_hw_key")
  _httk_workflow_bundle_docs+=("$_hw_doc")
  _httk_workflow_spawn_labels+=("$1")
  _httk_workflow_spawn_label_set+="$1 "
  _httk_workflow_spawn_entries+=("{\"workspace_id\":$_hw_ws,\"job_id\":\"$_hw_id\",\"job_key\":\"$_hw_key\",\
\"label\":\"$1\",\"placement\":$_hw_place,\"spawn_id\":\"$_hw_spawn\"}")
  _httk_workflow_join_refs+=("{\"workspace_id\":$_hw_ws,\"job_id\":\"$_hw_id\",\"job_key\":\"$_hw_key\",\
\"placement_hint\":$_hw_place}")
  return 0
}

# Publish a wait outcome joining every child spawned in this shell: once they are registered the job
# waits until --condition (all_succeeded, the default; all_terminal; any_succeeded; at_least with
# --count N) holds, then continues with a new activation of STEP that reads them with
# httk_workflow_children and httk_workflow_child. When success becomes impossible it continues at
# --on-impossible STEP, or fails with dependency_failure without it.
# Returns 0; 1 (context/filesystem); 2 (invalid argument, or no child spawned); 3 (second outcome).
httk_workflow_wait() { # <step> [--condition C] [--count N] [--on-impossible STEP] [--priority N] [--message TEXT]
  local -x LC_ALL=C _hw_priority='' _hw_resources='' _hw_message='' _hw_details='' _hw_retryable=''
  local _hw_inputs='' _hw_name='' _hw_tag='' _hw_placement='' _hw_condition='' _hw_count='' _hw_on_impossible=''
  local _hw_refs='' _hw_ref _hw_join
  if (($# < 1)); then
    _httk_workflow_error httk_workflow_wait "usage: httk_workflow_wait STEP [--condition C] [--count N] \
[--on-impossible STEP] [--priority N] [--message TEXT]"
    return 2
  fi
  if ! _httk_workflow_name "$1" 128; then
    _httk_workflow_error httk_workflow_wait \
      "STEP '$1' must be 1-128 bytes of letters, digits, '.', '_' and '-', not starting with '.' or '-'"
    return 2
  fi
  _httk_workflow_options httk_workflow_wait ' condition count on-impossible priority message ' "${@:2}" ||
    return 2
  if ((${#_httk_workflow_join_refs[@]} == 0)); then
    _httk_workflow_error httk_workflow_wait "there is no child to wait for: spawn one first"
    return 2
  fi
  _hw_condition=${_hw_condition:-all_succeeded}
  case $_hw_condition in
    all_succeeded | all_terminal | any_succeeded | at_least) ;;
    *)
      _httk_workflow_error httk_workflow_wait \
        "--condition must be all_succeeded, all_terminal, any_succeeded or at_least, not '$_hw_condition'"
      return 2
      ;;
  esac
  if [[ $_hw_condition == at_least ]]; then
    if [[ -z $_hw_count ]] || ((_hw_count > ${#_httk_workflow_join_refs[@]})); then
      _httk_workflow_error httk_workflow_wait \
        "--count must be an integer from 1 to ${#_httk_workflow_join_refs[@]} for at_least"
      return 2
    fi
  elif [[ -n $_hw_count ]]; then
    _httk_workflow_error httk_workflow_wait "--count applies only to --condition at_least"
    return 2
  fi
  if [[ -n $_hw_on_impossible ]] && ! _httk_workflow_name "$_hw_on_impossible" 128; then
    _httk_workflow_error httk_workflow_wait "--on-impossible '$_hw_on_impossible' is not a valid step name"
    return 2
  fi
  for _hw_ref in "${_httk_workflow_join_refs[@]}"; do
    _hw_refs+="${_hw_refs:+,}$_hw_ref"
  done
  _hw_join="{\"children\":[$_hw_refs],\"condition\":\"$_hw_condition\"${_hw_count:+,\"count\":$_hw_count}"
  if [[ -n $_hw_on_impossible ]]; then
    _hw_join+=",\"on_impossible\":{\"action\":\"advance\",\"next_step\":\"$_hw_on_impossible\"}"
  fi
  _httk_workflow_finish httk_workflow_wait wait ",\"next_step\":\"$1\",\"join\":$_hw_join}$_hw_priority" \
    "$_hw_message"
}

# The slot of an observation MEMBER in _httk_workflow_child_values. Returns 0, or 1 for another member.
_httk_workflow_child_slot() { # <var> <member>
  local _hwz_n
  case $2 in
    workspace_id) _hwz_n=0 ;;
    label) _hwz_n=1 ;;
    job_id) _hwz_n=2 ;;
    job_key) _hwz_n=3 ;;
    placement) _hwz_n=4 ;;
    kind) _hwz_n=5 ;;
    state_generation) _hwz_n=6 ;;
    record_ref) _hwz_n=7 ;;
    failure) _hwz_n=8 ;;
    data_generation) _hwz_n=9 ;;
    payload_path) _hwz_n=10 ;;
    workdir_path) _hwz_n=11 ;;
    failure.code) _hwz_n=12 ;;
    failure.message) _hwz_n=13 ;;
    failure.retryable) _hwz_n=14 ;;
    *) return 1 ;;
  esac
  printf -v "$1" '%s' "$_hwz_n"
}

# One option of spawn or wait that _httk_workflow_options hands over (--input, --name, --tag,
# --placement, --condition, --on-impossible, --count): it reads and sets that function's locals
# (_hwo_name, _hwo_value, _hwo_function, _hwo_key, _hwo_text, _hwo_inputs) and its caller's _hw_*.
# Returns 0, or 2 with a message.
_httk_workflow_child_option() {
  case $_hwo_name in
    input)
      _hwo_name=${_hwo_value%%=*}
      if [[ $_hwo_value != *=* ]] || ! _httk_workflow_json_string _hwo_key "$_hwo_name"; then
        _httk_workflow_error "$_hwo_function" "--input '$_hwo_value' must be NAME=JSON with a UTF-8 NAME"
        return 2
      fi
      _hwo_text=${_hwo_value#*=}
      if [[ -z $_hwo_text || $_hwo_text == *["$_httk_workflow_ctl"]* ]] || ! _httk_workflow_utf8 "$_hwo_text"
      then
        _httk_workflow_error "$_hwo_function" \
          "--input $_hwo_name: the value must be one line of UTF-8 JSON text (no raw control characters)"
        return 2
      fi
      if [[ $_hwo_inputs == *$'\n'"$_hwo_key"$'\n'* ]]; then
        _httk_workflow_error "$_hwo_function" "--input $_hwo_name is given twice"
        return 2
      fi
      _hwo_inputs+="$_hwo_key"$'\n'
      _hw_inputs+="${_hw_inputs:+,}$_hwo_key:$_hwo_text"
      ;;
    name)
      _httk_workflow_text_arg _hwo_text "$_hwo_function" --name "$_hwo_value" || return 2
      _hw_name=",\"name\":$_hwo_text"
      ;;
    tag | placement | condition | on-impossible) printf -v "_hw_${_hwo_name//-/_}" '%s' "$_hwo_value" ;;
    count)
      if ! _httk_workflow_decimal "$_hwo_value" 5 || [[ $_hwo_value == 0 ]]; then
        _httk_workflow_error "$_hwo_function" "--count must be a positive integer, not '$_hwo_value'"
        return 2
      fi
      _hw_count=$_hwo_value
      ;;
  esac
}

# Read the observations of context.json "children" (the join this activation follows) into
# _httk_workflow_child_count and _httk_workflow_child_values, once per context file: one object per
# observation at 4 spaces, its members at 6, the members of its failure at 8.
# Returns 0, or 1 with a message (context.json cannot be read).
_httk_workflow_load_children() { # <function>
  local _hwh_line _hwh_rest _hwh_key _hwh_value _hwh_in='' _hwh_sub='' _hwh_slot
  local -a _hwh_lines=()
  _httk_workflow_load_context "$1" || return 1
  [[ $_httk_workflow_children_file != "$_httk_workflow_context_file" ]] || return 0
  _httk_workflow_child_count=0 _httk_workflow_child_values=()
  mapfile -t _hwh_lines <"$_httk_workflow_context_file" || return 1 # the file the cached text is of
  for _hwh_line in "${_hwh_lines[@]}"; do
    if [[ -z $_hwh_in ]]; then
      [[ $_hwh_line != '  "children": [' ]] || _hwh_in=1
      continue
    fi
    case $_hwh_line in
      '  ]' | '  ],') break ;;
      '    {') _httk_workflow_child_count=$((_httk_workflow_child_count + 1)) _hwh_sub= ;;
      '      }' | '      },') _hwh_sub= ;;
      '      "'*'": '* | '        "'*'": '*)
        _hwh_rest=${_hwh_line#*'"'}
        _hwh_key=${_hwh_rest%%'": '*}
        _hwh_value=${_hwh_rest#*'": '}
        _hwh_value=${_hwh_value%,}
        if [[ $_hwh_line == '        '* ]]; then
          [[ -n $_hwh_sub ]] || continue
          _hwh_key=$_hwh_sub.$_hwh_key
        elif [[ $_hwh_value == '{' ]]; then
          _hwh_sub=$_hwh_key
        fi
        if _httk_workflow_child_slot _hwh_slot "$_hwh_key"; then
          _httk_workflow_child_values[(_httk_workflow_child_count - 1) * 16 + _hwh_slot]=$_hwh_value
        fi
        ;;
    esac
  done
  _httk_workflow_children_file=$_httk_workflow_context_file
  return 0
}

# The children of the join this activation follows, as names separated by single spaces in the join's
# order (a label, or the job key of a child without one), into VAR; with KIND only those observed in
# that state kind (succeeded, failed, cancelled, ...). Empty for an activation that follows no join.
# Returns 0; 1 (unreadable context); 2 (wrong call).
httk_workflow_children() { # <var> [kind]
  local -x LC_ALL=C _hw_i _hw_raw _hw_names=''
  if (($# < 1 || $# > 2)); then
    _httk_workflow_error httk_workflow_children "usage: httk_workflow_children VAR [KIND]"
    return 2
  fi
  _httk_workflow_check_var httk_workflow_children "$1" || return 2
  _httk_workflow_load_children httk_workflow_children || return 1
  for ((_hw_i = 0; _hw_i < _httk_workflow_child_count; _hw_i++)); do
    if (($# == 2)) && [[ ${_httk_workflow_child_values[_hw_i * 16 + 5]-} != "\"$2\"" ]]; then
      continue
    fi
    _hw_raw=${_httk_workflow_child_values[_hw_i * 16 + 1]-null}
    [[ $_hw_raw != null ]] || _hw_raw=${_httk_workflow_child_values[_hw_i * 16 + 3]-}
    _hw_raw=${_hw_raw#\"}
    _hw_names+="${_hw_names:+ }${_hw_raw%\"}"
  done
  printf -v "$1" '%s' "$_hw_names"
}

# One member of the observation of the join child CHILD (its label or job key) into VAR: workspace_id,
# label, job_id, job_key, placement, kind, state_generation, record_ref, data_generation,
# payload_path and workdir_path (workspace-relative: "$HTTK_WORKFLOW_WORKSPACE_DIR/$path"),
# failure.code, failure.message, failure.retryable. A JSON null is returned as the text null.
# Returns 0; 1 (no such child, or unreadable context); 2 (wrong call or unknown MEMBER).
httk_workflow_child() { # <var> <child> <member>
  local -x LC_ALL=C _hw_i _hw_slot _hw_found=
  if (($# != 3)); then
    _httk_workflow_error httk_workflow_child "usage: httk_workflow_child VAR CHILD MEMBER"
    return 2
  fi
  _httk_workflow_check_var httk_workflow_child "$1" || return 2
  if ! _httk_workflow_child_slot _hw_slot "$3" || [[ $3 == failure ]]; then
    _httk_workflow_error httk_workflow_child "MEMBER '$3' is not a scalar member of a child observation"
    return 2
  fi
  _httk_workflow_load_children httk_workflow_child || return 1
  for ((_hw_i = 0; _hw_i < _httk_workflow_child_count; _hw_i++)); do
    if [[ ${_httk_workflow_child_values[_hw_i * 16 + 1]-} == "\"$2\"" ||
      ${_httk_workflow_child_values[_hw_i * 16 + 3]-} == "\"$2\"" ]]; then
      _hw_found=1
      break
    fi
  done
  if [[ -z $_hw_found ]]; then
    _httk_workflow_error httk_workflow_child "the join this activation follows has no child '$2'"
    return 1
  fi
  if [[ $3 == failure.* && ${_httk_workflow_child_values[_hw_i * 16 + 8]-null} == null ]]; then
    printf -v "$1" '%s' null # no failure object: each of its members is null too
    return 0
  fi
  if [[ -z ${_httk_workflow_child_values[_hw_i * 16 + _hw_slot]+set} ]]; then
    _httk_workflow_error httk_workflow_child "the observation of child '$2' has no member '$3'"
    return 1
  fi
  _httk_workflow_decode "$1" "${_httk_workflow_child_values[_hw_i * 16 + _hw_slot]}" httk_workflow_child \
    "member '$3' of child '$2'"
}
