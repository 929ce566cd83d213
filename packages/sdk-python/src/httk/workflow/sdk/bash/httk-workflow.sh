# shellcheck shell=bash
# httk-workflow.sh: the Bash API of the httk workflow protocol, sourced by Bash runners.
#
#   #!/usr/bin/env bash
#   set -euo pipefail
#   source "$HTTK_WORKFLOW_BASH_API"           # exported by the manager as an absolute path
#   prepare() { # ...
#     httk_workflow_advance collect --message "inputs written" --resource procs=4
#   }
#   collect() { httk_workflow_succeed; }
#   httk_workflow_register_step prepare
#   httk_workflow_register_step collect
#   httk_workflow_dispatch "$@"                # a plain command, so that set -e applies inside steps
#
#
# The reference (what it guarantees, return codes, context, settings, parity with the Python SDK,
# children, transactions, state) is at the end of this file, after the `return` that ends sourcing:
# Bash parses every line it reaches, comments too (some 14 k instructions a line, valgrind), and every
# attempt of a Bash runner pays for what it parses.

# -- state of this process (kept when the file is sourced again) -------------------------------------
if [[ -z ${_httk_workflow_sourced-} ]]; then
  _httk_workflow_sourced=1
  _httk_workflow_published=           # the action this process published, once it has
  _httk_workflow_steps=()             # registered step names, in registration order (runner_steps)
  _httk_workflow_step_functions=()    # the function of each registered step
  _httk_workflow_dispatching=         # set by httk_workflow_dispatch: outcomes then always declare
                                      # runner_steps, [] included, as the Python dispatcher's do
  _httk_workflow_context_file=        # the context.json whose text is cached below
  _httk_workflow_context_text=        # its text, where a top-level member is a line at two spaces
  _httk_workflow_setting_text=        # the member lines of its "settings" object and of its "inputs"
  _httk_workflow_input_text=          # object (the job's), each after a newline, at four spaces
  _httk_workflow_children_file=       # the context.json whose "children" are cached below (read on
  _httk_workflow_child_count=0        # first use): the observations, how many, and their members' raw
  _httk_workflow_child_values=()      # JSON value text at child * 16 + member slot
  _httk_workflow_job_file=            # the parent job.json whose top-level members are cached below
  _httk_workflow_job_keys=()          # raw key tokens ("runner") and compact value text
  _httk_workflow_job_values=()
  _httk_workflow_split_keys=()        # what _httk_workflow_split_object found last
  _httk_workflow_split_values=()
  _httk_workflow_draft=               # the outcome draft the children's bundles were written into
  _httk_workflow_draft_files=()       # every file and directory written into it (synchronized when
  _httk_workflow_draft_dirs=()        # durable), the directories parents first
  _httk_workflow_spawn_label_set=' ' # its labels between spaces (a label holds no space)
  _httk_workflow_spawn_labels=()      # the spawn set of this shell: labels, spawn.json entries and
  _httk_workflow_spawn_entries=()     # join children as compact JSON text, bundle directory names
  _httk_workflow_join_refs=()         # (job keys) and job.json texts, written at publication
  _httk_workflow_bundle_keys=()
  _httk_workflow_bundle_docs=()
  _httk_workflow_runner_known=        # how children copy this job's runner (_httk_workflow_learn_runner)
  _httk_workflow_runner_path=
  _httk_workflow_runner_text=
  _httk_workflow_runner_mode=
  _httk_workflow_runner_binary=
fi

# The parts of the library sourced on first use (_httk_workflow_load_part), between spaces: none yet
# whenever this file is sourced, since sourcing it defines their stubs again.
_httk_workflow_parts_sourced=' '

# Where this file is, made absolute now (a runner may cd later): the parts sourced on first use
# (httk-workflow-children.sh, httk-workflow-transaction.sh) are beside it.
_httk_workflow_library_dir=${BASH_SOURCE[0]-}
[[ $_httk_workflow_library_dir == /* ]] || _httk_workflow_library_dir=$PWD/$_httk_workflow_library_dir
_httk_workflow_library_dir=${_httk_workflow_library_dir%/*}

# Constants. Every pattern in this file is a glob (never =~, which would overwrite the caller's
# BASH_REMATCH) matched under LC_ALL=C, which each public function sets locally.
_httk_workflow_ctl=$'\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f' # every control byte
_httk_workflow_ctl+=$'\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f' # but NUL
_httk_workflow_count_max=9223372036854775807 # 2**63 - 1, compared as a string of 19 digits

# ====================================================================================================
# Small helpers
# ====================================================================================================

# Print "FUNCTION: TEXT" on stderr. Returns 0.
_httk_workflow_error() { # <function> <text>
  printf '%s: %s\n' "$1" "$2" >&2
}

# Check that VAR can receive a value: a shell name, and not one of this library's own locals (_hw*,
# LC_ALL), which printf -v would assign instead of the caller's variable. Returns 0, or 2 with a message.
_httk_workflow_check_var() { # <function> <var>
  if [[ $2 != [A-Za-z_]* || $2 == *[!A-Za-z0-9_]* || $2 == _hw* || $2 == LC_ALL ]]; then
    _httk_workflow_error "$1" "VAR '$2' must be a shell variable name (not LC_ALL, not starting with _hw)"
    return 2
  fi
  return 0
}

# Whether TEXT is 1 to MAX bytes of letters, digits, '.', '_' and '-', not starting with '.' or '-' (the
# syntax of step and declaration names). Returns 0 or 1.
_httk_workflow_name() { # <text> <max bytes>
  [[ $1 == [A-Za-z0-9_]* && $1 != *[!A-Za-z0-9._-]* && ${#1} -le $2 ]]
}

# Whether TEXT is a decimal integer of at most MAX digits without a leading zero. Returns 0 or 1.
_httk_workflow_decimal() { # <text> <max digits>
  [[ $1 == 0 || ($1 == [1-9]* && $1 != *[!0-9]* && ${#1} -le $2) ]]
}

# Whether TEXT is valid UTF-8 (no overlong form, no surrogate, nothing above U+10FFFF). Each valid
# multibyte sequence is replaced by one ASCII byte, longest first, so that no replacement can join two
# invalid neighbours; the text is valid exactly when no byte >= 0x80 remains. Returns 0 valid, 1 invalid.
_httk_workflow_utf8() { # <text>
  local _hw8_s=$1
  [[ $_hw8_s == *[$'\x80'-$'\xff']* ]] || return 0
  _hw8_s=${_hw8_s//$'\xf0'[$'\x90'-$'\xbf'][$'\x80'-$'\xbf'][$'\x80'-$'\xbf']/x}
  _hw8_s=${_hw8_s//[$'\xf1'-$'\xf3'][$'\x80'-$'\xbf'][$'\x80'-$'\xbf'][$'\x80'-$'\xbf']/x}
  _hw8_s=${_hw8_s//$'\xf4'[$'\x80'-$'\x8f'][$'\x80'-$'\xbf'][$'\x80'-$'\xbf']/x}
  _hw8_s=${_hw8_s//$'\xe0'[$'\xa0'-$'\xbf'][$'\x80'-$'\xbf']/x}
  _hw8_s=${_hw8_s//[$'\xe1'-$'\xec\xee\xef'][$'\x80'-$'\xbf'][$'\x80'-$'\xbf']/x}
  _hw8_s=${_hw8_s//$'\xed'[$'\x80'-$'\x9f'][$'\x80'-$'\xbf']/x}
  _hw8_s=${_hw8_s//[$'\xc2'-$'\xdf'][$'\x80'-$'\xbf']/x}
  [[ $_hw8_s != *[$'\x80'-$'\xff']* ]]
}

# Whether TEXT is empty or only whitespace in Python's sense (str.isspace: ASCII space, \t \n \v \f \r,
# \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
# Returns 0 blank, 1 not blank.
_httk_workflow_blank() { # <text>
  local _hwb_s=$1
  _hwb_s=${_hwb_s//[$' \t\n\v\f\r\x1c\x1d\x1e\x1f']/}
  if [[ $_hwb_s == *[$'\x80'-$'\xff']* ]]; then
    _hwb_s=${_hwb_s//$'\xc2'[$'\x85\xa0']/}
    _hwb_s=${_hwb_s//$'\xe1\x9a\x80'/}
    _hwb_s=${_hwb_s//$'\xe2\x80'[$'\x80'-$'\x8a\xa8\xa9\xaf']/}
    _hwb_s=${_hwb_s//$'\xe2\x81\x9f'/}
    _hwb_s=${_hwb_s//$'\xe3\x80\x80'/}
  fi
  [[ -z $_hwb_s ]]
}

# Escape TEXT as a JSON string token, quotes included, exactly as Python's
# json.dumps(text, ensure_ascii=False): \" \\ \b \t \n \f \r, \u00XX (lowercase) for every other byte
# 0x01-0x1F, everything else (0x7F and non-ASCII included) unchanged. Needs LC_ALL=C (byte patterns).
# Returns 0, or 1 when TEXT is not valid UTF-8 (VAR is then left alone).
_httk_workflow_json_string() { # <var> <text>
  local _hwj_s=$2 _hwj_code _hwj_char
  _httk_workflow_utf8 "$_hwj_s" || return 1
  if [[ $_hwj_s == *["$_httk_workflow_ctl"\"\\]* ]]; then
    _hwj_s=${_hwj_s//"\\"/"\\\\"}
    _hwj_s=${_hwj_s//"\""/"\\\""}
    if [[ $_hwj_s == *["$_httk_workflow_ctl"]* ]]; then
      _hwj_s=${_hwj_s//$'\n'/"\\n"}
      _hwj_s=${_hwj_s//$'\t'/"\\t"}
      _hwj_s=${_hwj_s//$'\r'/"\\r"}
      _hwj_s=${_hwj_s//$'\b'/"\\b"}
      _hwj_s=${_hwj_s//$'\f'/"\\f"}
      if [[ $_hwj_s == *["$_httk_workflow_ctl"]* ]]; then
        for _hwj_code in 01 02 03 04 05 06 07 0b 0e 0f 10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f; do
          # shellcheck disable=SC2059 # the format is the escape sequence of one control byte
          printf -v _hwj_char "\\x$_hwj_code"
          _hwj_s=${_hwj_s//"$_hwj_char"/"\\u00$_hwj_code"}
        done
      fi
    fi
  fi
  printf -v "$1" '"%s"' "$_hwj_s"
}

# Validate one human text argument (nonblank, UTF-8) and escape it into VAR. Returns 0, or 2.
_httk_workflow_text_arg() { # <var> <function> <argument name> <text>
  if _httk_workflow_blank "$4"; then
    _httk_workflow_error "$2" "$3 must be a nonempty text, not blank"
    return 2
  fi
  if ! _httk_workflow_json_string "$1" "$4"; then
    _httk_workflow_error "$2" "$3 is not valid UTF-8"
    return 2
  fi
  return 0
}

# The light check of a JSON object given as text: it starts with { and ends with }, is valid UTF-8 and
# holds no raw control character (so the document stays one line). Returns 0, or 2 with a message.
_httk_workflow_check_object() { # <function> <argument name> <text>
  if [[ $3 != '{'*'}' ]]; then
    _httk_workflow_error "$1" "$2 must be a JSON object text starting with { and ending with }"
    return 2
  fi
  if [[ $3 == *["$_httk_workflow_ctl"]* ]] || ! _httk_workflow_utf8 "$3"; then
    _httk_workflow_error "$1" "$2 must be one line of valid UTF-8 JSON (no raw control characters)"
    return 2
  fi
  return 0
}

# ====================================================================================================
# context.json
# ====================================================================================================

# Read and cache the text of context.json (once per process and path), and the member lines of its
# "settings" and "inputs" objects. Members are found in the text when they are looked up: the manager's
# layout puts each member of a level on its own line at a known indentation, and a string holds no raw
# newline, so a key is found with one pattern, where a loop over the lines would cost Bash some 20 k
# instructions a statement. The children part reads "children" on first use
# (_httk_workflow_load_children). Returns 0, or 1 with a message.
_httk_workflow_load_context() { # <function>
  [[ -z ${HTTK_WORKFLOW_CONTEXT-} || $HTTK_WORKFLOW_CONTEXT != "$_httk_workflow_context_file" ]] || return 0
  local _hwc_file=${HTTK_WORKFLOW_CONTEXT-} _hwc_text=''
  if [[ -z $_hwc_file ]]; then
    _httk_workflow_error "$1" "HTTK_WORKFLOW_CONTEXT is not set: no workflow manager started this process"
    return 1
  fi
  _httk_workflow_context_file='' _httk_workflow_children_file=''
  if [[ ! -f $_hwc_file || ! -r $_hwc_file ]]; then
    _httk_workflow_error "$1" "cannot read the attempt context $_hwc_file"
    return 1
  fi
  IFS= read -r -d '' _hwc_text <"$_hwc_file" || : # read reports end of file as status 1
  if [[ $_hwc_text != $'{\n'*$'\n'?* ]]; then # "{" alone on the first line, and at least three lines
    _httk_workflow_error "$1" \
      "$_hwc_file is not in the layout the manager writes (indented JSON, one member per line)"
    return 1
  fi
  _httk_workflow_context_text=$_hwc_text
  _httk_workflow_object_lines _httk_workflow_setting_text settings
  _httk_workflow_object_lines _httk_workflow_input_text inputs
  _httk_workflow_context_file=$_hwc_file
  return 0
}

# The member lines of the top-level object member NAME of the cached context text into VAR, from the
# newline before its first member to its closing "  }" (empty when it is {} or absent). Returns 0.
_httk_workflow_object_lines() { # <var> <name>
  local _hwm_head=$'\n  "'$2$'": {\n' _hwm_text
  _hwm_text=${_httk_workflow_context_text%%"$_hwm_head"*}
  if ((${#_hwm_text} == ${#_httk_workflow_context_text})); then
    printf -v "$1" '%s' ''
    return 0
  fi
  _hwm_text=${_httk_workflow_context_text:${#_hwm_text}+${#_hwm_head}-1}
  printf -v "$1" '%s' "${_hwm_text%%$'\n  }'*}"
}

# The raw JSON value text of a cached member. TABLE is context (a top-level member), settings or
# inputs. Returns 0 found, 1 absent.
_httk_workflow_lookup() { # <var> <table> <key>
  local _hwl_key=$'\n  "'$3'": ' _hwl_text=$_httk_workflow_context_text _hwl_value
  if [[ $2 == inputs ]]; then
    _hwl_key=$'\n    "'$3'": ' _hwl_text=$_httk_workflow_input_text
  elif [[ $2 != context ]]; then
    _hwl_key=$'\n    "'$3'": ' _hwl_text=$_httk_workflow_setting_text
  fi
  _hwl_value=${_hwl_text%%"$_hwl_key"*}
  ((${#_hwl_value} < ${#_hwl_text})) || return 1
  _hwl_value=${_hwl_text:${#_hwl_value}+${#_hwl_key}}
  _hwl_value=${_hwl_value%%$'\n'*}
  printf -v "$1" '%s' "${_hwl_value%,}"
}

# Decode one raw scalar JSON value: a string is unescaped to its UTF-8 text, a number, true, false or
# null is returned as written. Needs LC_ALL=C. Returns 0; 1 (message naming WHAT) for an object, an
# array, or a string that cannot be decoded (bad escape, NUL, lone surrogate).
_httk_workflow_decode() { # <var> <raw value> <function> <what>
  if [[ $2 == '"'*'"' && $2 != *\\* ]]; then # a string without escapes (most are): its text as written
    printf -v "$1" '%s' "${2:1:${#2}-2}"
    return 0
  fi
  local _hwu_raw=$2
  case $_hwu_raw in
    '{'* | '['*)
      _httk_workflow_error "$3" "$4 is a JSON object or array, not a scalar"
      return 1
      ;;
    true | false | null)
      printf -v "$1" '%s' "$_hwu_raw"
      return 0
      ;;
    '"'*'"') ;;
    *)
      if [[ $_hwu_raw == [-0-9]* && $_hwu_raw != *[!0-9eE.+-]* ]]; then # a number, as written
        printf -v "$1" '%s' "$_hwu_raw"
        return 0
      fi
      _httk_workflow_error "$3" "$4 is not a JSON value this reader understands: $_hwu_raw"
      return 1
      ;;
  esac
  # A string with escapes: decoded by httk-workflow-escapes.sh, sourced on first use (few values have one).
  _httk_workflow_load_part escapes "$3" || return 1
  _httk_workflow_unescape "$@"
}

# A path of the attempt: the environment variable when set, else the context member. Returns 0 or 1.
_httk_workflow_path() { # <var> <function> <environment variable> <context member>
  local _hwq_raw
  if [[ -n ${!3-} ]]; then
    printf -v "$1" '%s' "${!3}"
    return 0
  fi
  _httk_workflow_load_context "$2" || return 1
  if ! _httk_workflow_lookup _hwq_raw context "$4"; then
    _httk_workflow_error "$2" "neither $3 nor the context member '$4' is set"
    return 1
  fi
  _httk_workflow_decode "$1" "$_hwq_raw" "$2" "context member '$4'"
}

# Whether publication must be durable: HTTK_WORKFLOW_DURABLE=1, or (when the variable is unset) the
# context member durable is true. Returns 0 durable, 1 not.
_httk_workflow_durable() { # <function>
  local _hwv_raw
  if [[ -n ${HTTK_WORKFLOW_DURABLE+set} ]]; then
    if [[ $HTTK_WORKFLOW_DURABLE == 1 ]]; then
      return 0
    fi
    return 1
  fi
  if _httk_workflow_load_context "$1" 2>/dev/null && _httk_workflow_lookup _hwv_raw context durable &&
    [[ $_hwv_raw == true ]]; then
    return 0
  fi
  return 1
}

# Read a top-level scalar member of the attempt's context.json into VAR: a string unescaped to UTF-8
# text, a number, true, false or null as written.
# Returns 0; 1 when context.json cannot be read, has no such member, or the member is an object or
# array (or a string holding NUL); 2 for a wrong call.
httk_workflow_context() { # <var> <member>
  local -x LC_ALL=C _hw_raw
  if (($# != 2)); then
    _httk_workflow_error httk_workflow_context "usage: httk_workflow_context VAR MEMBER"
    return 2
  fi
  _httk_workflow_check_var httk_workflow_context "$1" || return 2
  [[ -n $_httk_workflow_context_file && ${HTTK_WORKFLOW_CONTEXT-} == "$_httk_workflow_context_file" ]] ||
    _httk_workflow_load_context httk_workflow_context || return 1
  if ! _httk_workflow_lookup _hw_raw context "$2"; then
    _httk_workflow_error httk_workflow_context "$HTTK_WORKFLOW_CONTEXT has no member '$2'"
    return 1
  fi
  # VAR is no local of decode's (_hw* is refused), which assigns it only once the value decodes.
  _httk_workflow_decode "$1" "$_hw_raw" httk_workflow_context "context member '$2'"
}

# Resolve the application setting NAME (dotted, e.g. vasp.command) into VAR, in layers: the job's
# inputs, the environment variable HTTK_<NAME>, the scalar in context.json "settings", DEFAULT.
# Returns 0; 1 when no layer has it and no DEFAULT is given, or the setting is an array or object, or
# context.json cannot be read; 2 for an invalid NAME or a wrong call.
httk_workflow_setting() { # <var> <name> [default]
  local -x LC_ALL=C _hw_variable _hw_raw
  if (($# < 2 || $# > 3)); then
    _httk_workflow_error httk_workflow_setting "usage: httk_workflow_setting VAR NAME [DEFAULT]"
    return 2
  fi
  _httk_workflow_check_var httk_workflow_setting "$1" || return 2
  if [[ $2 != [a-z]* || $2 == *[!a-z0-9_.]* || $2 == *..* || $2 == *. || ${#2} -gt 128 ]]; then
    _httk_workflow_error httk_workflow_setting \
      "NAME '$2' must be a dotted lowercase setting name such as vasp.command (a-z, 0-9, _; 1-128 bytes)"
    return 2
  fi
  if [[ -n ${HTTK_WORKFLOW_CONTEXT-} ]]; then
    [[ $HTTK_WORKFLOW_CONTEXT == "$_httk_workflow_context_file" ]] ||
      _httk_workflow_load_context httk_workflow_setting || return 1
    if _httk_workflow_lookup _hw_raw inputs "$2" && [[ $_hw_raw != null ]]; then
      _httk_workflow_decode "$1" "$_hw_raw" httk_workflow_setting "the job input $2" # VAR: as in context
      return
    fi
  fi
  _hw_variable=${2//./_}
  _hw_variable=HTTK_${_hw_variable^^}
  # The manager never exports a setting into the protocol's own HTTK_WORKFLOW_ namespace.
  if [[ $_hw_variable != HTTK_WORKFLOW_* && -n ${!_hw_variable+set} ]]; then
    printf -v "$1" '%s' "${!_hw_variable}"
    return 0
  fi
  if [[ -n ${HTTK_WORKFLOW_CONTEXT-} ]] && _httk_workflow_lookup _hw_raw settings "$2" &&
    [[ $_hw_raw != null ]]; then
    _httk_workflow_decode "$1" "$_hw_raw" httk_workflow_setting "the setting $2"
    return
  fi
  if (($# == 3)); then
    printf -v "$1" '%s' "$3"
    return 0
  fi
  _httk_workflow_error httk_workflow_setting \
    "the setting $2 is not set (no job input, $_hw_variable unset, not in the workspace settings, no default)"
  return 1
}

# ====================================================================================================
# Outcomes
# ====================================================================================================

# Parse the options of an outcome function into the caller's locals (which it declares empty), each a
# ready JSON fragment: _hw_priority (,"priority":N), _hw_resources (,"resources":{...}), _hw_message
# (,"message":"..."), _hw_details (,"details":{...}), _hw_retryable (,"retryable":true|false); for
# spawn and wait also _hw_inputs (,"inputs":{...}), _hw_name (,"name":"..."), _hw_tag, _hw_placement,
# _hw_condition, _hw_on_impossible (checked text) and _hw_count (a decimal), which
# _httk_workflow_child_option parses (httk-workflow-children.sh: only spawn and wait allow them).
# ALLOWED lists the accepted option names between spaces. Returns 0, or 2 with a message.
_httk_workflow_options() { # <function> <allowed> [option...]
  local _hwo_function=$1 _hwo_allowed=$2 _hwo_option _hwo_value _hwo_name _hwo_key _hwo_amount _hwo_text
  local _hwo_seen=' ' _hwo_inputs=$'\n'
  shift 2
  while (($# > 0)); do
    _hwo_option=$1
    shift
    case $_hwo_option in
      --*=*)
        _hwo_value=${_hwo_option#*=}
        _hwo_option=${_hwo_option%%=*}
        ;;
      --retryable | --not-retryable) _hwo_value= ;;
      --*)
        if (($# == 0)); then
          _httk_workflow_error "$_hwo_function" "$_hwo_option needs a value"
          return 2
        fi
        _hwo_value=$1
        shift
        ;;
      *)
        _httk_workflow_error "$_hwo_function" "unexpected argument '$_hwo_option'"
        return 2
        ;;
    esac
    _hwo_name=${_hwo_option#--}
    [[ $_hwo_name != resources ]] || _hwo_name=resource
    if [[ $_hwo_allowed != *" $_hwo_name "* ]]; then
      _hwo_allowed=${_hwo_allowed% }
      _httk_workflow_error "$_hwo_function" "unknown option $_hwo_option (accepted:${_hwo_allowed// / --})"
      return 2
    fi
    _hwo_key=$_hwo_name
    [[ $_hwo_key != not-retryable ]] || _hwo_key=retryable
    if [[ $_hwo_key != resource && $_hwo_key != input && $_hwo_seen == *" $_hwo_key "* ]]; then
      _httk_workflow_error "$_hwo_function" "$_hwo_option is given twice (or with its opposite)"
      return 2
    fi
    _hwo_seen+="$_hwo_key "
    case $_hwo_name in
      priority)
        if ! _httk_workflow_decimal "$_hwo_value" 3; then
          _httk_workflow_error "$_hwo_function" \
            "--priority must be an integer from 0 through 999, not '$_hwo_value'"
          return 2
        fi
        _hw_priority=",\"priority\":$_hwo_value"
        ;;
      message)
        _httk_workflow_text_arg _hwo_text "$_hwo_function" --message "$_hwo_value" || return 2
        _hw_message=",\"message\":$_hwo_text"
        ;;
      resource)
        _hwo_name=${_hwo_value%%=*}
        _hwo_amount=${_hwo_value#*=}
        if [[ $_hwo_value != *=* || $_hwo_name != [a-z0-9]* || $_hwo_name == *[!a-z0-9._-]* ||
          ${#_hwo_name} -gt 48 || $_hwo_name == *--* ]]; then
          _httk_workflow_error "$_hwo_function" \
            "--resource '$_hwo_value' must be NAME=INT, NAME of a-z, 0-9, '.', '_', '-' (1-48 bytes, no '--')"
          return 2
        fi
        # shellcheck disable=SC2071 # a string comparison on purpose: two strings of 19 digits
        if ! _httk_workflow_decimal "$_hwo_amount" 19 ||
          [[ ${#_hwo_amount} -eq 19 && $_hwo_amount > "$_httk_workflow_count_max" ]]; then
          _httk_workflow_error "$_hwo_function" \
            "--resource $_hwo_name: '$_hwo_amount' must be a non-negative integer below 2**63, no leading 0"
          return 2
        fi
        if [[ $_hw_resources == *"\"$_hwo_name\":"* ]]; then
          _httk_workflow_error "$_hwo_function" "--resource $_hwo_name is given twice"
          return 2
        fi
        _hw_resources+="${_hw_resources:+,}\"$_hwo_name\":$_hwo_amount"
        ;;
      details)
        _httk_workflow_check_object "$_hwo_function" --details "$_hwo_value" || return 2
        _hw_details=",\"details\":$_hwo_value"
        ;;
      retryable) _hw_retryable=',"retryable":true' ;;
      not-retryable) _hw_retryable=',"retryable":false' ;;
      *) _httk_workflow_child_option || return 2 ;; # spawn's and wait's own (the children part)
    esac
  done
  [[ -z $_hw_resources ]] || _hw_resources=",\"resources\":{$_hw_resources}"
  [[ -z ${_hw_inputs-} ]] || _hw_inputs=",\"inputs\":{$_hw_inputs}"
  return 0
}

# Compose the outcome around MEMBERS (the JSON fragment after "action", already in contract order) and
# TAIL (the message member, which follows expected_data_generation) and publish it.
# Returns 0, 1 (context or filesystem), 2 (a transaction source refused at staging), or 3 (already
# published).
_httk_workflow_finish() { # <function> <action> <members> [tail]
  local _hwf_ids='' _hwf_raw _hwf_member _hwf_steps='' _hwf_step _hwf_tx=''
  _httk_workflow_load_context "$1" || return 1
  for _hwf_member in job_id activation_id attempt_id; do
    if ! _httk_workflow_lookup _hwf_raw context "$_hwf_member" || [[ $_hwf_raw != '"'*'"' ]]; then
      _httk_workflow_error "$1" "$HTTK_WORKFLOW_CONTEXT has no string member '$_hwf_member'"
      return 1
    fi
    # The context was written with the same escaping, so its token is already what json.dumps writes.
    _hwf_ids+=",\"$_hwf_member\":$_hwf_raw"
  done
  if ((${#_httk_workflow_steps[@]} > 0)) || [[ -n $_httk_workflow_dispatching ]]; then
    for _hwf_step in ${_httk_workflow_steps[@]+"${_httk_workflow_steps[@]}"}; do # names need no escaping
      _hwf_steps+="${_hwf_steps:+,}\"$_hwf_step\""
    done
    _hwf_steps=",\"runner_steps\":[$_hwf_steps]"
  fi
  # Children spawned in this shell: advance, succeed and wait write their bundles and spawn.json into
  # the draft, the other actions discard them. So with a transaction: its bundle joins the draft and its
  # expected_data_generation the outcome (httk-workflow-transaction.sh, loaded once one was begun).
  if ((${#_httk_workflow_bundle_keys[@]} > 0)); then
    case $2 in
      advance | succeed | wait) _httk_workflow_write_children "$1" || return 1 ;;
      *) _httk_workflow_discard_children ;;
    esac
  fi
  if [[ -n ${_httk_workflow_tx_open-} ]]; then
    case $2 in
      advance | succeed | wait) _httk_workflow_tx_publishing "$1" _hwf_tx || return ;;
      *) _httk_workflow_tx_discard ;;
    esac
  fi
  _httk_workflow_publish "$1" "$2" \
    "{\"format\":\"httk-workflow-outcome\",\"format_version\":1$_hwf_ids,\"action\":\"$2\"$3$_hwf_tx${4-}$_hwf_steps}"
}

# Make a new outcome draft outcome.tmp.<nonce> in the control directory and name it in VAR.
# Returns 0, or 1 with a message.
_httk_workflow_new_draft() { # <var> <function>
  local _hwn_control _hwn_draft _hwn_tries=0
  _httk_workflow_path _hwn_control "$2" HTTK_WORKFLOW_CONTROL_DIR control_dir || return 1
  while :; do
    _hwn_draft=$_hwn_control/outcome.tmp.$BASHPID.$RANDOM$RANDOM
    if command mkdir -- "$_hwn_draft"; then
      break
    fi
    _hwn_tries=$((_hwn_tries + 1))
    if [[ ! -e $_hwn_draft || $_hwn_tries -ge 3 ]]; then
      _httk_workflow_error "$2" "cannot create an outcome draft in $_hwn_control"
      return 1
    fi
  done
  printf -v "$1" '%s' "$_hwn_draft"
}

# Publish DOCUMENT as this attempt's outcome (docs/outcome-documents.md "Publication"): mkdir
# outcome.tmp.<nonce> (or take the draft spawned children were written into), write outcome.json, when
# durable sync every file and then every directory of the draft, rename the draft to outcome.ready
# (never replacing one), when durable sync the control directory.
# Returns 0; 1 for a filesystem failure (the draft is removed); 3 when an outcome already exists.
_httk_workflow_publish() { # <function> <action> <document>
  local _hwp_control _hwp_draft _hwp_ready _hwp_what _hwp_i
  local -a _hwp_sync=()
  _httk_workflow_path _hwp_control "$1" HTTK_WORKFLOW_CONTROL_DIR control_dir || return 1
  _hwp_ready=$_hwp_control/outcome.ready
  if [[ -n $_httk_workflow_published || -e $_hwp_ready ]]; then
    _httk_workflow_discard_children
    _hwp_what=${_httk_workflow_published:+($_httk_workflow_published) }
    _httk_workflow_error "$1" \
      "this attempt has already published its outcome ${_hwp_what}in $_hwp_ready; an attempt publishes one"
    return 3
  fi
  if [[ -n $_httk_workflow_draft ]]; then
    _hwp_draft=$_httk_workflow_draft
    _hwp_sync=("${_httk_workflow_draft_files[@]}")
    for ((_hwp_i = ${#_httk_workflow_draft_dirs[@]} - 1; _hwp_i >= 0; _hwp_i--)); do # deepest first
      _hwp_sync+=("${_httk_workflow_draft_dirs[_hwp_i]}")
    done
  else
    _httk_workflow_new_draft _hwp_draft "$1" || return 1
    _hwp_sync=("$_hwp_draft")
  fi
  _httk_workflow_draft='' _httk_workflow_draft_files=() _httk_workflow_draft_dirs=()
  if ! printf '%s\n' "$3" >"$_hwp_draft/outcome.json"; then
    _httk_workflow_error "$1" "cannot write $_hwp_draft/outcome.json"
    command rm -rf -- "$_hwp_draft"
    return 1
  fi
  if _httk_workflow_durable "$1"; then # in batches: a staged tree may name more than one command line holds
    _hwp_sync=("$_hwp_draft/outcome.json" "${_hwp_sync[@]}")
    for ((_hwp_i = 0; _hwp_i < ${#_hwp_sync[@]}; _hwp_i += 1000)); do
      if ! command sync -- "${_hwp_sync[@]:_hwp_i:1000}"; then
        _httk_workflow_error "$1" "cannot synchronize the outcome draft $_hwp_draft"
        command rm -rf -- "$_hwp_draft"
        return 1
      fi
    done
  fi
  if ! command mv -T -- "$_hwp_draft" "$_hwp_ready"; then
    command rm -rf -- "$_hwp_draft"
    if [[ -e $_hwp_ready ]]; then
      _httk_workflow_error "$1" "another outcome appeared in $_hwp_ready first; an attempt publishes one"
      return 3
    fi
    _httk_workflow_error "$1" "cannot rename the outcome draft to $_hwp_ready"
    return 1
  fi
  _httk_workflow_published=$2
  if _httk_workflow_durable "$1" && ! command sync -- "$_hwp_control"; then
    _httk_workflow_error "$1" "published $_hwp_ready but cannot synchronize $_hwp_control"
    return 1
  fi
  return 0
}

# Publish an advance outcome: the job continues with STEP (a new activation).
# Options: --priority N (0-999), --message TEXT, --resource NAME=INT (repeatable, kept in order;
# --resources is an alias). Returns 0; 1 (context/filesystem); 2 (invalid argument); 3 (second outcome).
httk_workflow_advance() { # <step> [--priority N] [--message TEXT] [--resource NAME=INT]...
  local -x LC_ALL=C _hw_priority='' _hw_resources='' _hw_message='' _hw_details='' _hw_retryable=''
  if (($# < 1)); then
    _httk_workflow_error httk_workflow_advance \
      "usage: httk_workflow_advance STEP [--resource NAME=INT]... [--priority N] [--message TEXT]"
    return 2
  fi
  if ! _httk_workflow_name "$1" 128; then
    _httk_workflow_error httk_workflow_advance \
      "STEP '$1' must be 1-128 bytes of letters, digits, '.', '_' and '-', not starting with '.' or '-'"
    return 2
  fi
  _httk_workflow_options httk_workflow_advance ' priority message resource ' "${@:2}" || return 2
  _httk_workflow_finish httk_workflow_advance advance \
    ",\"next_step\":\"$1\"$_hw_priority$_hw_resources" "$_hw_message"
}

# Publish a succeed outcome: the job ends successfully.
# Returns 0; 1 (context/filesystem); 2 (invalid argument); 3 (second outcome).
httk_workflow_succeed() { # [--message TEXT] [--priority N]
  local -x LC_ALL=C _hw_priority='' _hw_resources='' _hw_message='' _hw_details='' _hw_retryable=''
  _httk_workflow_options httk_workflow_succeed ' priority message ' "$@" || return 2
  _httk_workflow_finish httk_workflow_succeed succeed "$_hw_priority" "$_hw_message"
}

# fail, retry and pause: the outcomes a step publishes when it cannot go on (stubs: httk-workflow-fail.sh
# holds them, sourced on first use).
httk_workflow_fail() { _httk_workflow_load_part fail httk_workflow_fail && httk_workflow_fail "$@"; }
httk_workflow_retry() { _httk_workflow_load_part fail httk_workflow_retry && httk_workflow_retry "$@"; }
httk_workflow_pause() { _httk_workflow_load_part fail httk_workflow_pause && httk_workflow_pause "$@"; }

# ====================================================================================================
# Children and joins (the functions are stubs: httk-workflow-children.sh holds them, sourced on first use)
# ====================================================================================================

# Forget this shell's spawn set and remove its draft (nothing of it was published). Returns 0.
_httk_workflow_discard_children() {
  [[ -z $_httk_workflow_draft ]] || command rm -rf -- "$_httk_workflow_draft"
  _httk_workflow_draft='' _httk_workflow_draft_files=() _httk_workflow_draft_dirs=()
  _httk_workflow_spawn_labels=() _httk_workflow_spawn_entries=() _httk_workflow_join_refs=()
  _httk_workflow_bundle_keys=() _httk_workflow_bundle_docs=() _httk_workflow_spawn_label_set=' '
  return 0
}

# A random (version 4) UUID in lowercase canonical form into VAR: the kernel's, else od of /dev/urandom.
# Returns 0, or 1 with a message.
_httk_workflow_uuid() { # <var> <function>
  local _hwi_u='' _hwi_h
  if [[ -r /proc/sys/kernel/random/uuid ]]; then
    IFS= read -r _hwi_u </proc/sys/kernel/random/uuid || _hwi_u=
  fi
  if [[ ${#_hwi_u} -ne 36 || $_hwi_u == *[!0-9a-f-]* ]]; then
    if ! _hwi_h=$(command od -An -N16 -tx1 /dev/urandom); then
      _httk_workflow_error "$2" "cannot read random bytes for a UUID"
      return 1
    fi
    _hwi_h=${_hwi_h//[$' \n']/}
    printf -v _hwi_u '%s-%s-4%s-%x%s-%s' "${_hwi_h:0:8}" "${_hwi_h:8:4}" "${_hwi_h:13:3}" \
      $((0x8 | (0x${_hwi_h:16:1} & 0x3))) "${_hwi_h:17:3}" "${_hwi_h:20:12}"
  fi
  printf -v "$1" '%s' "$_hwi_u"
}

# The stubs: each sources httk-workflow-children.sh, which redefines it, and calls the definition.
httk_workflow_spawn() { _httk_workflow_load_part children httk_workflow_spawn && httk_workflow_spawn "$@"; }
httk_workflow_wait() { _httk_workflow_load_part children httk_workflow_wait && httk_workflow_wait "$@"; }
httk_workflow_children() { _httk_workflow_load_part children httk_workflow_children && httk_workflow_children "$@"; }
httk_workflow_child() { _httk_workflow_load_part children httk_workflow_child && httk_workflow_child "$@"; }
_httk_workflow_write_children() {
  _httk_workflow_load_part children "$1" && _httk_workflow_write_children "$@"
}

# Source httk-workflow-PART.sh once, from beside this file, else from beside $HTTK_WORKFLOW_BASH_API.
# Returns 0, or 1 with a message naming FUNCTION.
_httk_workflow_load_part() { # <part> <function>
  local _hwg_dir
  [[ $_httk_workflow_parts_sourced != *" $1 "* ]] || return 0
  for _hwg_dir in "$_httk_workflow_library_dir" ${HTTK_WORKFLOW_BASH_API:+"${HTTK_WORKFLOW_BASH_API%/*}"}; do
    if [[ -f $_hwg_dir/httk-workflow-$1.sh ]]; then
      # shellcheck source=/dev/null # checked on its own
      source "$_hwg_dir/httk-workflow-$1.sh" || break
      _httk_workflow_parts_sourced+="$1 "
      return 0
    fi
  done
  _httk_workflow_error "$2" "cannot load httk-workflow-$1.sh from $_httk_workflow_library_dir"
  return 1
}

# ====================================================================================================
# Transactions (the functions are stubs: httk-workflow-transaction.sh holds them, sourced on first use)
# ====================================================================================================

# Run the operation OP of the function FUNCTION (httk-workflow-transaction.sh). Returns what it returns.
_httk_workflow_transaction_call() { # <function> <op> [argument...]
  local -x LC_ALL=C
  _httk_workflow_load_part transaction "$1" || return 1
  _httk_workflow_tx_operation "$@"
}

# Open this attempt's transaction into the job's committed data/ (Python: a.transaction()). The
# operations below add to it, in the order the manager applies them; advance, succeed and wait publish
# a nonempty one with the outcome (staged in its draft, expected_data_generation in outcome.json), and
# fail, retry and pause discard it. A second call keeps the open transaction.
# Returns 0; 1 (context unreadable or malformed); 2 (the job is not transactional, or a wrong call); 3 (the
# outcome is already published: the transaction went out with it or was discarded).
httk_workflow_transaction_begin() { # (no arguments)
  local -x LC_ALL=C
  if (($# != 0)); then
    _httk_workflow_error httk_workflow_transaction_begin "usage: httk_workflow_transaction_begin"
    return 2
  fi
  _httk_workflow_load_part transaction httk_workflow_transaction_begin || return 1
  _httk_workflow_tx_begin httk_workflow_transaction_begin
}

# The operations. PATH is a normalized relative path below data/; every operation takes --op-id ID
# (default op<position>) and --var VAR (receives the operation id). Each is checked when added, as in
# Python; a source is read when the outcome is published, so it must stay unchanged until then.
# Returns, for each: 0; 1 (the transaction functions cannot be loaded); 2 (a refused argument, a wrong
# call, or no transaction open); 3 (the outcome is already published, so the operation would be lost).

# make-dir: create the directory PATH (--parents: and its missing parents); an existing one is kept.
httk_workflow_make_dir() { # <path> [--parents] [--op-id ID] [--var VAR]
  _httk_workflow_transaction_call httk_workflow_make_dir make-dir "$@"
}

# put-file: install or replace the regular file PATH with a copy of the file SOURCE (its permission
# bits kept) or with TEXT (mode 0644 less the umask). A put never creates parents: make_dir them first.
httk_workflow_put_file() { # <path> <source>|--content TEXT [--op-id ID] [--require-absent] [--expected-sha256 HEX] [--var VAR]
  _httk_workflow_transaction_call httk_workflow_put_file put-file "$@"
}

# put-tree: install a copy of the directory tree SOURCE_DIR at PATH, which must be absent or empty.
httk_workflow_put_tree() { # <path> <source_dir> [--op-id ID] [--require-absent] [--var VAR]
  _httk_workflow_transaction_call httk_workflow_put_tree put-tree "$@"
}

# replace-tree: replace the tree at PATH (whose canonical digest is --expected-sha256, when given) by a
# copy of SOURCE_DIR; the old tree goes to transaction trash.
httk_workflow_replace_tree() { # <path> <source_dir> [--expected-sha256 HEX] [--op-id ID] [--var VAR]
  _httk_workflow_transaction_call httk_workflow_replace_tree replace-tree "$@"
}

# remove: move PATH (a file or a tree; absent only with --missing-ok) into transaction trash.
httk_workflow_remove() { # <path> [--missing-ok] [--expected-sha256 HEX] [--op-id ID] [--var VAR]
  _httk_workflow_transaction_call httk_workflow_remove remove "$@"
}

# The operation ids of the open transaction into VAR, in order, separated by single spaces ('' for none).
# Returns 0; 1 (the transaction functions cannot be loaded); 2 (wrong call).
httk_workflow_transaction_operation_ids() { # <var>
  local -x LC_ALL=C
  if (($# != 1)); then
    _httk_workflow_error httk_workflow_transaction_operation_ids \
      "usage: httk_workflow_transaction_operation_ids VAR"
    return 2
  fi
  _httk_workflow_check_var httk_workflow_transaction_operation_ids "$1" || return 2
  _httk_workflow_load_part transaction httk_workflow_transaction_operation_ids || return 1
  _httk_workflow_tx_operation_ids "$1"
}

# ====================================================================================================
# Job state, declarations and events (stubs: httk-workflow-state.sh holds them, sourced on first use)
# ====================================================================================================

httk_workflow_state_save() { _httk_workflow_load_part state httk_workflow_state_save && httk_workflow_state_save "$@"; }
httk_workflow_state_load() { _httk_workflow_load_part state httk_workflow_state_load && httk_workflow_state_load "$@"; }
httk_workflow_declare() { _httk_workflow_load_part state httk_workflow_declare && httk_workflow_declare "$@"; }
httk_workflow_record_event() {
  _httk_workflow_load_part state httk_workflow_record_event && httk_workflow_record_event "$@"
}

# ====================================================================================================
# The step dispatcher (stubs: httk-workflow-dispatch.sh holds it, sourced on first use)
# ====================================================================================================

httk_workflow_register_step() {
  _httk_workflow_load_part dispatch httk_workflow_register_step && httk_workflow_register_step "$@"
}
httk_workflow_dispatch() { _httk_workflow_load_part dispatch httk_workflow_dispatch && httk_workflow_dispatch "$@"; }

# Sourcing ends here: what follows is the reference, which Bash never parses.
return 0

# ====================================================================================================
# Reference
# ====================================================================================================

# What it guarantees
#   - Sourcing only defines httk_workflow_* / _httk_workflow_* functions and _httk_workflow_* globals. It
#     never runs set, shopt or trap, and no function changes a shell option, a trap or IFS of the caller.
#     Every function works under the caller's set -euo pipefail, failglob, nullglob or noglob.
#   - The publishing path needs Bash 4.0+ and coreutils only (mkdir, mv -T, rm, and `sync FILE`, which
#     synchronizes one file or directory with GNU coreutils >= 8.24; children add chmod, stat once, cp
#     for a runner holding NUL bytes, and od when /proc has no UUID; a transaction adds cp, du, sort,
#     cat, sha256sum and chmod). No python, no jq.
#   - outcome.json is byte-for-byte what the Python SDK publishes for the same decision: the member
#     order, compact separators and json.dumps(ensure_ascii=False) escaping of docs/outcome-documents.md,
#     published by the five steps listed there (durably when HTTK_WORKFLOW_DURABLE=1). Exactly one
#     outcome per attempt: a second one is refused (return 3), remembered both in this shell
#     (_httk_workflow_published) and on disk (outcome.ready/ exists; rename never replaces it).
#
# Return codes, the same for every public function
#   0  done
#   1  the environment failed us: no or unreadable context.json, a missing member, a file operation
#   2  an argument is invalid (the message on stderr names it); nothing was written
#   3  this attempt has already published its outcome; nothing was written
#   Every message goes to stderr, prefixed with the public function's name.
#
# Context (spec: "Context and restart detection")
#   The manager exports HTTK_WORKFLOW_{CONTEXT,CONTROL_DIR,WORKSPACE_DIR,JOB_DIR,WORKDIR,IS_RESTART,
#   UNCLEAN_RESTART,DURABLE,ATTEMPT_REASON,STEP,PYTHON,BASH_API} (and DATA_DIR for transactional jobs);
#   a runner uses them directly, e.g. [[ $HTTK_WORKFLOW_UNCLEAN_RESTART == 1 ]]. Every other top-level
#   scalar of context.json is read with httk_workflow_context (attempt_ordinal, previous_attempt_id, ...).
#   context.json is read once per process (mapfile, no subprocess). The reader relies on the layout the
#   manager writes (json.dumps(indent=2): "{" alone on the first line, one top-level member per line
#   at two spaces, nested members deeper); it refuses a file in any other layout rather than guess.
#
# Settings (spec/02 "Application settings"), layers in order, as in the Python SDK
#   1. the scalar member NAME of the job's inputs, which the manager copies into context.json "inputs";
#   2. the environment variable HTTK_<NAME> (dots -> underscores, upper case): a deployment override, or
#      the scalar workspace setting the manager exported there when no override existed; never a
#      variable of the protocol's own HTTK_WORKFLOW_ namespace, into which the manager exports nothing;
#   3. the scalar member NAME of context.json's "settings" (the workspace snapshot taken at the claim);
#   4. DEFAULT when given; otherwise return 1.
#   Bash reads inputs from context.json, never from job.json: job.json is stored in whatever layout its
#   author submitted, while the manager writes context.json in one known layout this reader relies on.
#   Bash has no None and no arrays of JSON: a null setting counts as absent (the next layer applies), an
#   array or object setting is an error (return 1).
#
# NUL
#   A Bash string cannot hold NUL (U+0000). No text handed to this API can contain one, so it never
#   emits \u0000; a context or setting string containing \u0000 cannot be read (return 1).
#
# Parity with the Python SDK (httk.workflow.sdk): the same operations, the same bytes
#   a.advance(step, resources=, priority=, message=)  httk_workflow_advance STEP [--resource NAME=INT]...
#                                                       [--priority N] [--message TEXT]
#   a.succeed(message=, priority=)                    httk_workflow_succeed [--message TEXT] [--priority N]
#   a.fail(code, message, details, retryable=)        httk_workflow_fail CODE MESSAGE [--details JSON]
#                                                       [--retryable|--not-retryable]
#   a.retry(reason, priority=, message=)              httk_workflow_retry REASON [--priority N] [--message T]
#   a.pause(reason, priority=, message=)              httk_workflow_pause REASON [--priority N] [--message T]
#   a.setting(name, default)                          httk_workflow_setting VAR NAME [DEFAULT]
#   the context's members                             httk_workflow_context VAR MEMBER (scalars only)
#   a.save_state(obj) / a.state                       httk_workflow_state_save JSON
#                                                     httk_workflow_state_load VAR
#   a.declare(name, obj)                              httk_workflow_declare NAME JSON
#   a.spawn(step, label=, inputs=, tag=, placement=,  httk_workflow_spawn LABEL STEP [--input NAME=JSON]...
#           name=, priority=, resources=)               [--tag T] [--placement P] [--name TEXT]
#                                                       [--priority N] [--resource NAME=INT]...
#   a.wait(step, condition=, count=, on_impossible=,  httk_workflow_wait STEP [--condition C] [--count N]
#          priority=, message=)                         [--on-impossible STEP] [--priority N] [--message T]
#   a.children (labels, members)                      httk_workflow_children VAR [KIND]
#                                                     httk_workflow_child VAR CHILD MEMBER
#   @step / dispatch()                                httk_workflow_register_step STEP [FUNCTION]
#                                                     httk_workflow_dispatch [ARGUMENT...]
#   tx = a.transaction()                              httk_workflow_transaction_begin
#   tx.make_dir(path, parents=, op_id=)               httk_workflow_make_dir PATH [--parents] [--op-id ID]
#   tx.put_file(path, source or bytes, op_id=,        httk_workflow_put_file PATH SOURCE|--content TEXT
#               require_absent=, expected_sha256=)      [--op-id ID] [--require-absent] [--expected-sha256 H]
#   tx.put_tree(path, source_dir, op_id=,             httk_workflow_put_tree PATH SOURCE_DIR [--op-id ID]
#               require_absent=)                        [--require-absent]
#   tx.replace_tree(path, source_dir,                 httk_workflow_replace_tree PATH SOURCE_DIR
#                   expected_sha256=, op_id=)           [--expected-sha256 H] [--op-id ID]
#   tx.remove(path, missing_ok=, expected_sha256=,    httk_workflow_remove PATH [--missing-ok]
#             op_id=)                                   [--expected-sha256 H] [--op-id ID]
#   tx.operation_ids                                  httk_workflow_transaction_operation_ids VAR
#   Differences: JSON objects (--details, state, declarations) are given as text and inserted verbatim
#   after a light check (braces, UTF-8, one line), so byte parity needs the compact form Python writes,
#   json.dumps(obj, ensure_ascii=False, separators=(",", ":")); --resource cannot express an empty map
#   (Python's resources={}); a null or non-scalar setting (above); no_outcome details name the shell
#   function where Python names module.qualname. An operation returns its id with --var VAR.
#
# Children and joins (docs/outcome-documents.md "Children and joins")
#   httk_workflow_spawn composes the child's job.json and keeps the spawn set in this shell; the outcome
#   function writes every bundle into the draft at once (one mkdir, one chmod, printf for the rest, about
#   1 ms per child). So call spawn and the outcome function as plain commands, never in $(...) or a
#   pipeline, whose subshell would lose the set. advance, succeed and wait publish the children (wait
#   joins every child spawned in this shell); fail, retry and pause discard them. A child
#   takes runner, workdir, data, claim, priority and retry_policy from the parent's job.json, which this
#   library reads with a small JSON splitter: the members are copied with the whitespace outside strings
#   removed, so the child's job.json is Python's bytes whenever the parent's job.json escapes strings as
#   json.dumps(ensure_ascii=False) does (every job.json this implementation writes). A payload runner is
#   copied into the child's bundle (cp). UUIDs come from /proc/sys/kernel/random/uuid, else od of
#   /dev/urandom. Python's runner=, workdir=, data=, claim= and retry_policy= overrides have no Bash form.
#   The step after a join reads its children from context.json with httk_workflow_children and
#   httk_workflow_child (the manager's indent=2 layout, like every other member). These functions live
#   in httk-workflow-children.sh beside this file, sourced on the first call of one of them (so a step
#   that spawns nothing and follows no join never parses them).
#
# Transactions (docs/outcome-documents.md "Transactions")
#   The transaction functions live in httk-workflow-transaction.sh beside this file, sourced on the first
#   call of one of them (so a step without a transaction never parses them); its header says what they
#   guarantee. Like the spawn set, the transaction is kept in this shell: call the functions and the
#   outcome function as plain commands, never in $(...) or a pipeline. advance, succeed and wait stage a
#   nonempty transaction into the outcome draft; fail, retry and pause discard it.
#
# Job state, declarations and events
#   httk_workflow_state_save, httk_workflow_state_load, httk_workflow_declare and
#   httk_workflow_record_event live in httk-workflow-state.sh beside this file, sourced on the first call
#   of one of them (most steps of most runners call none). Likewise the dispatcher
#   (httk-workflow-dispatch.sh), fail, retry and pause (httk-workflow-fail.sh) and the decoding of a
#   context string that holds escapes (httk-workflow-escapes.sh).
