# shellcheck shell=bash
# httk-workflow-transaction.sh: the transactions of the Bash API, a replayable contribution to the job's
# committed data/ (spec: "Optional transactional contributions to data/"). httk-workflow.sh sources it on
# the first call of a transaction function; a runner never sources it itself.
#
#   httk_workflow_transaction_begin               # a.transaction(): refused unless the job is transactional
#   httk_workflow_make_dir results --parents      # tx.make_dir("results", parents=True)
#   httk_workflow_put_file results/e.json e.json  # tx.put_file("results/e.json", "e.json")
#   httk_workflow_put_file note --content "$text" # tx.put_file("note", text.encode())
#   httk_workflow_succeed                         # stages the bundle into the outcome draft
#
# What it guarantees
#   - The same rules as the Python builder (sdk/_transaction.py), checked in the same order when an
#     operation is added, with the same wording (Python's argument names: path, source, source_dir, op_id,
#     expected_sha256, require_absent): normalized relative UTF-8 paths without protocol control names,
#     unique operation ids (op<position> unless --op-id names one), no two operations on one path, a path
#     below another's only below an earlier make_dir. A refused call changes nothing (return 2).
#   - Once this attempt has published its outcome (in this shell, or outcome.ready exists), begin and
#     every operation are refused (return 3) in Python's words: the transaction went out with the
#     outcome or was discarded, so a later operation would be lost without a word.
#   - advance, succeed and wait stage a nonempty transaction into the outcome draft exactly as Python's
#     stage_transaction does: transaction/manifest.json (the same bytes but for the random transaction id),
#     transaction/payload/<path> (a private copy of each put: new inodes, files with their source's
#     permission bits, directories made by mkdir), an empty transaction/trash/, and the outcome member
#     expected_data_generation; fail, retry and pause discard it, as Python does.
#   - Sources are read when the outcome is published (as in Python); a source tree holding a symbolic
#     link, device, socket or FIFO is refused then (return 2) and the draft is removed.
#   - Sourcing defines only _httk_workflow_tx_* functions and globals; no set, shopt or trap.
#
# Why a separate file: the no-op step (source the library, publish succeed) is what every Bash attempt
# pays, and Bash parses a sourced file whole. Keeping these ~500 lines out of httk-workflow.sh keeps that
# cost where benchmarks/runner_overhead.py measures it.
#
# Cost: adding an operation is pure Bash (a few glob matches over the paths already added). Staging a
# transaction runs mkdir once, one cp per put_file source, and per tree du and sort (one listing), mkdir,
# one cp per run of files sharing a directory, and cat | sha256sum over the staged copy for its canonical
# tree digest (DECISIONS D11); one sha256sum for every put_file, one `umask`, rm of the scratch listing.

# -- state of this process (kept when the file is sourced again) -------------------------------------
if [[ -z ${_httk_workflow_tx_sourced-} ]]; then
  _httk_workflow_tx_sourced=1
  _httk_workflow_tx_open=            # 1 once httk_workflow_transaction_begin accepted this job
  _httk_workflow_tx_generation=      # the context's data_generation (decimal text) at begin
  _httk_workflow_tx_ids=()           # per operation, in the order added: its id, its op (make-dir,
  _httk_workflow_tx_ops=()           # put-file, put-tree, replace-tree, remove), its path as given and
  _httk_workflow_tx_paths=()         # JSON-escaped (no quotes), its absolute source ('' for none or
  _httk_workflow_tx_escaped=()       # --content), its --content text, and the manifest members after
  _httk_workflow_tx_sources=()       # sha256 (,"parents":true ...) in the manifest's order
  _httk_workflow_tx_texts=()
  _httk_workflow_tx_flags=()
  _httk_workflow_tx_id_set=' '       # every id between spaces (an id holds no space)
  _httk_workflow_tx_path_set=$'\n'   # every escaped path between newlines (an escaped path holds none)
  _httk_workflow_tx_held_set=$'\n'   # the escaped paths of operations other than make-dir
fi

# Forget the transaction of this shell (nothing of it was published). Returns 0.
_httk_workflow_tx_discard() {
  _httk_workflow_tx_open='' _httk_workflow_tx_generation=''
  _httk_workflow_tx_ids=() _httk_workflow_tx_ops=() _httk_workflow_tx_paths=() _httk_workflow_tx_escaped=()
  _httk_workflow_tx_sources=() _httk_workflow_tx_texts=() _httk_workflow_tx_flags=()
  _httk_workflow_tx_id_set=' ' _httk_workflow_tx_path_set=$'\n' _httk_workflow_tx_held_set=$'\n'
  return 0
}

# Refuse the transaction call OPERATION (Python's name: transaction, make_dir, put_file, ...) once this
# attempt has published its outcome, with Python's OutcomeAlreadyPublishedError text.
# Returns 0 (not published); 1 (no control directory known); 3 with a message.
_httk_workflow_tx_refuse_late() { # <function> <operation>
  local _hwTg_ready
  _httk_workflow_path _hwTg_ready "$1" HTTK_WORKFLOW_CONTROL_DIR control_dir || return 1
  _hwTg_ready+=/outcome.ready
  [[ -n $_httk_workflow_published || -e $_hwTg_ready ]] || return 0
  _httk_workflow_error "$1" "$_hwTg_ready: $2 refused: the attempt has already published its one outcome; a \
transaction goes out with the outcome, so open it and add its operations before publishing"
  return 3
}

# Open this attempt's transaction, once: the job must be transactional (context data_generation and
# data_dir set). A second call keeps the open transaction and its operations.
# Returns 0; 1 (context unreadable or malformed); 2 (the job is not transactional); 3 (published).
_httk_workflow_tx_begin() { # <function>
  local _hw_generation _hw_dir
  _httk_workflow_tx_refuse_late "$1" transaction || return
  [[ -z $_httk_workflow_tx_open ]] || return 0
  _httk_workflow_load_context "$1" || return 1
  if ! _httk_workflow_lookup _hw_generation context data_generation || [[ $_hw_generation == null ]] ||
    ! _httk_workflow_lookup _hw_dir context data_dir || [[ $_hw_dir == null ]]; then
    _httk_workflow_error "$1" "this job is not transactional: only a job with data.mode 'transactional' \
in a workspace with the transactional-data-v1 extension can contribute to data/"
    return 2
  fi
  # shellcheck disable=SC2071 # a string comparison on purpose: two strings of 20 digits
  if ! _httk_workflow_decimal "$_hw_generation" 20 ||
    [[ ${#_hw_generation} -eq 20 && $_hw_generation > 18446744073709551615 ]]; then
    _httk_workflow_error "$1" "$HTTK_WORKFLOW_CONTEXT: member 'data_generation' must be an unsigned 64-bit integer"
    return 1
  fi
  _httk_workflow_tx_open=1
  _httk_workflow_tx_generation=$_hw_generation
}

# Parse the options of an operation function into the caller's locals (which it declares empty):
# _hw_op_id and _hw_has_op_id, _hw_expected and _hw_has_expected, _hw_var, _hw_content and
# _hw_has_content, and the flags _hw_parents, _hw_missing_ok, _hw_require_absent (1 or '').
# ALLOWED lists the accepted option names between spaces. Returns 0, or 2 with a message.
_httk_workflow_tx_options() { # <function> <allowed> [option...]
  local _hwTo_function=$1 _hwTo_allowed=$2 _hwTo_option _hwTo_value _hwTo_name _hwTo_seen=' '
  shift 2
  while (($# > 0)); do
    _hwTo_option=$1
    shift
    _hwTo_name=${_hwTo_option#--}
    _hwTo_name=${_hwTo_name%%=*}
    if [[ $_hwTo_option != --* || $_hwTo_allowed != *" $_hwTo_name "* ]]; then
      _hwTo_allowed=${_hwTo_allowed% }
      _httk_workflow_error "$_hwTo_function" \
        "unexpected argument '$_hwTo_option' (options:${_hwTo_allowed// / --})"
      return 2
    fi
    if [[ $_hwTo_seen == *" $_hwTo_name "* ]]; then
      _httk_workflow_error "$_hwTo_function" "$_hwTo_option is given twice"
      return 2
    fi
    _hwTo_seen+="$_hwTo_name "
    case $_hwTo_name in
      parents | missing-ok | require-absent)
        if [[ $_hwTo_option == *=* ]]; then
          _httk_workflow_error "$_hwTo_function" "--$_hwTo_name takes no value"
          return 2
        fi
        printf -v "_hw_${_hwTo_name//-/_}" 1
        continue
        ;;
    esac
    if [[ $_hwTo_option == --*=* ]]; then
      _hwTo_value=${_hwTo_option#*=}
    elif (($# > 0)); then
      _hwTo_value=$1
      shift
    else
      _httk_workflow_error "$_hwTo_function" "$_hwTo_option needs a value"
      return 2
    fi
    case $_hwTo_name in
      op-id) _hw_op_id=$_hwTo_value _hw_has_op_id=1 ;;
      expected-sha256) _hw_expected=$_hwTo_value _hw_has_expected=1 ;;
      content) _hw_content=$_hwTo_value _hw_has_content=1 ;;
      var)
        _httk_workflow_check_var "$_hwTo_function" "$_hwTo_value" || return 2
        _hw_var=$_hwTo_value
        ;;
    esac
  done
  return 0
}

# Why PATH is not a normalized relative POSIX path below data/, into VAR (Python's _path_problem, in
# its order, component by component). Returns 0 with the problem, 1 when PATH is fine.
_httk_workflow_tx_path_problem() { # <var> <path>
  local _hwTq_part _hwTq_rest=$2/
  if [[ -z $2 ]]; then
    printf -v "$1" '%s' "must be a nonempty string, not ''"
    return 0
  fi
  if [[ $2 == /* ]]; then
    printf -v "$1" '%s' "must be relative, not absolute ('$2')"
    return 0
  fi
  while [[ -n $_hwTq_rest ]]; do
    _hwTq_part=${_hwTq_rest%%/*}
    _hwTq_rest=${_hwTq_rest#*/}
    if [[ -z $_hwTq_part || $_hwTq_part == . || $_hwTq_part == .. ]]; then
      printf -v "$1" '%s' "must be normalized: no empty, '.' or '..' components ('$2')"
    elif [[ $_hwTq_part == .httk-workflow || $_hwTq_part == .httk-job || $_hwTq_part == .httk-attempt.* ]]
    then
      printf -v "$1" '%s' "must not name protocol control data ('$_hwTq_part')"
    elif ! _httk_workflow_utf8 "$_hwTq_part"; then
      printf -v "$1" 'must be valid UTF-8 (%q)' "$2" # quoted by Bash: the raw bytes would not be text
    elif ((${#_hwTq_part} > 255)); then
      printf -v "$1" '%s' "has a component longer than 255 bytes"
    else
      continue
    fi
    return 0
  done
  return 1
}

# The index of the first operation whose escaped path is ESCAPED, or (with PREFIX) lies below it, into
# VAR. Returns 0 found, 1 not.
_httk_workflow_tx_find() { # <var> <escaped> [prefix]
  local _hwTf_i
  for ((_hwTf_i = 0; _hwTf_i < ${#_httk_workflow_tx_escaped[@]}; _hwTf_i++)); do
    if [[ ${_httk_workflow_tx_escaped[_hwTf_i]} == "$2" ||
      (-n ${3-} && ${_httk_workflow_tx_escaped[_hwTf_i]} == "$2"/*) ]]; then
      printf -v "$1" '%s' "$_hwTf_i"
      return 0
    fi
  done
  return 1
}

# Check one operation the way Python's Transaction._add does -- its id, its path, expected_sha256,
# require_absent, overlap with the operations already added -- and append it. Reads the caller's
# _hw_op_id/_hw_has_op_id, _hw_expected/_hw_has_expected, _hw_parents, _hw_missing_ok,
# _hw_require_absent, _hw_source, _hw_content and _hw_var. Returns 0, or 2 with a message (the
# transaction unchanged).
_httk_workflow_tx_add() { # <function> <op> <path>
  local _hwTa_id _hwTa_n _hwTa_problem _hwTa_esc _hwTa_rest _hwTa_anc='' _hwTa_i _hwTa_flags=''
  local _hwTa_prefix
  if [[ -z $_httk_workflow_tx_open ]]; then
    _httk_workflow_error "$1" "no transaction is open: call httk_workflow_transaction_begin first"
    return 2
  fi
  if [[ -n $_hw_has_op_id ]]; then
    _hwTa_id=$_hw_op_id
    if ! _httk_workflow_name "$_hwTa_id" 64; then
      _httk_workflow_error "$1" "argument op_id must match [A-Za-z0-9_][A-Za-z0-9._-]{0,63}, not '$_hwTa_id'"
      return 2
    fi
    if [[ $_httk_workflow_tx_id_set == *" $_hwTa_id "* ]]; then
      _httk_workflow_error "$1" "operation '$_hwTa_id': argument op_id is already used by another operation"
      return 2
    fi
  else
    _hwTa_n=$((${#_httk_workflow_tx_ids[@]} + 1)) # op<position>, unless the caller already took that id
    while [[ $_httk_workflow_tx_id_set == *" op$_hwTa_n "* ]]; do
      _hwTa_n=$((_hwTa_n + 1))
    done
    _hwTa_id=op$_hwTa_n
  fi
  _hwTa_prefix="operation '$_hwTa_id': argument"
  if _httk_workflow_tx_path_problem _hwTa_problem "$3"; then
    _httk_workflow_error "$1" "$_hwTa_prefix path $_hwTa_problem"
    return 2
  fi
  if [[ -n $_hw_has_expected ]]; then
    if [[ ${#_hw_expected} -ne 64 || $_hw_expected == *[!0-9a-f]* ]]; then
      _httk_workflow_error "$1" \
        "$_hwTa_prefix expected_sha256 must be 64 lowercase hexadecimal digits, not '$_hw_expected'"
      return 2
    fi
    if [[ -n $_hw_require_absent ]]; then
      _httk_workflow_error "$1" "$_hwTa_prefix require_absent cannot be combined with expected_sha256"
      return 2
    fi
  fi
  _httk_workflow_json_string _hwTa_esc "$3" || return 2 # checked above: the path is UTF-8
  _hwTa_esc=${_hwTa_esc:1:${#_hwTa_esc}-2}
  # Overlap, in Python's order: the same path, then an ancestor held by an operation other than make-dir,
  # then an operation below this path. Escaping keeps '/' and maps each character on its own, so the
  # escaped ancestors are the escaped path cut at its slashes.
  if [[ $_httk_workflow_tx_path_set == *$'\n'"$_hwTa_esc"$'\n'* ]]; then
    _httk_workflow_tx_find _hwTa_i "$_hwTa_esc"
    _httk_workflow_error "$1" "$_hwTa_prefix path is also the path of operation '${_httk_workflow_tx_ids[_hwTa_i]}'"
    return 2
  fi
  _hwTa_rest=$_hwTa_esc
  while [[ $_hwTa_rest == */* ]]; do
    _hwTa_anc+=${_hwTa_anc:+/}${_hwTa_rest%%/*}
    _hwTa_rest=${_hwTa_rest#*/}
    if [[ $_httk_workflow_tx_held_set == *$'\n'"$_hwTa_anc"$'\n'* ]]; then
      _httk_workflow_tx_find _hwTa_i "$_hwTa_anc"
      _httk_workflow_error "$1" "$_hwTa_prefix path lies below '${_httk_workflow_tx_paths[_hwTa_i]}' of \
operation '${_httk_workflow_tx_ids[_hwTa_i]}'"
      return 2
    fi
  done
  if [[ $_httk_workflow_tx_path_set == *$'\n'"$_hwTa_esc"/* ]]; then
    _httk_workflow_tx_find _hwTa_i "$_hwTa_esc" below
    if [[ $2 == make-dir ]]; then
      _httk_workflow_error "$1" "$_hwTa_prefix path holds '${_httk_workflow_tx_paths[_hwTa_i]}' of the earlier \
operation '${_httk_workflow_tx_ids[_hwTa_i]}'; add make_dir before the operations below it"
    else
      _httk_workflow_error "$1" "$_hwTa_prefix path holds '${_httk_workflow_tx_paths[_hwTa_i]}' of operation \
'${_httk_workflow_tx_ids[_hwTa_i]}'"
    fi
    return 2
  fi
  [[ -z $_hw_parents ]] || _hwTa_flags+=',"parents":true'
  [[ -z $_hw_missing_ok ]] || _hwTa_flags+=',"missing_ok":true'
  [[ -z $_hw_require_absent ]] || _hwTa_flags+=',"require_absent":true'
  [[ -z $_hw_has_expected ]] || _hwTa_flags+=",\"expected_sha256\":\"$_hw_expected\""
  # Invariant: the operation arrays and the three sets change together and only here, after every check
  # passed, so a refused call leaves the transaction exactly as it was.
  _httk_workflow_tx_ids+=("$_hwTa_id")
  _httk_workflow_tx_ops+=("$2")
  _httk_workflow_tx_paths+=("$3")
  _httk_workflow_tx_escaped+=("$_hwTa_esc")
  _httk_workflow_tx_sources+=("$_hw_source")
  _httk_workflow_tx_texts+=("$_hw_content")
  _httk_workflow_tx_flags+=("$_hwTa_flags")
  _httk_workflow_tx_id_set+="$_hwTa_id "
  _httk_workflow_tx_path_set+="$_hwTa_esc"$'\n'
  [[ $2 == make-dir ]] || _httk_workflow_tx_held_set+="$_hwTa_esc"$'\n'
  [[ -z $_hw_var ]] || printf -v "$_hw_var" '%s' "$_hwTa_id"
  return 0
}

# Check a put's source the way Python's _existing does (it exists, following symlinks, and is a regular
# file or a directory as WANT says; trailing slashes dropped, as pathlib drops them) and put its absolute
# path into the caller's _hw_source. Returns 0, or 2 with a message.
_httk_workflow_tx_source() { # <function> <argument name> <file|dir> <source>
  local _hwTr_path=$4
  while [[ $_hwTr_path == ?*/ ]]; do # du also names a tree's entries after the root exactly as given
    _hwTr_path=${_hwTr_path%/}
  done
  _hwTr_path=${_hwTr_path:-.} # as Path("") is Path(".")
  if [[ ! -e $_hwTr_path ]]; then
    _httk_workflow_error "$1" "argument $2 cannot be used as a source: no such file or directory ('$4')"
    return 2
  fi
  if [[ $3 == file && ! -f $_hwTr_path ]]; then
    _httk_workflow_error "$1" "$_hwTr_path: argument $2 must be a regular file"
    return 2
  fi
  if [[ $3 == dir && ! -d $_hwTr_path ]]; then
    _httk_workflow_error "$1" "$_hwTr_path: argument $2 must be a directory"
    return 2
  fi
  _hw_source=$_hwTr_path
  [[ $_hw_source == /* ]] || _hw_source=$PWD/$_hw_source
  return 0
}

# The public operations, behind the stubs in httk-workflow.sh; each reads its arguments as documented
# there. Returns 0; 1 (no control directory known); 2 (a refused argument or a wrong call, no transaction
# open); 3 (the outcome is already published: checked once the options are parsed, before anything else).
_httk_workflow_tx_operation() { # <function> <op> <path> [argument...]
  local _hw_function=$1 _hw_op=$2 _hw_op_id='' _hw_has_op_id='' _hw_expected='' _hw_has_expected=''
  local _hw_var='' _hw_content='' _hw_has_content='' _hw_parents='' _hw_missing_ok='' _hw_require_absent=''
  local _hw_path=${3-} _hw_source='' _hw_given='' _hw_has_given='' _hw_allowed _hw_usage
  case $_hw_op in
    make-dir) _hw_allowed=' parents op-id var ' _hw_usage='PATH [--parents]' ;;
    put-file)
      _hw_allowed=' content op-id require-absent expected-sha256 var '
      _hw_usage='PATH SOURCE|--content TEXT [--require-absent] [--expected-sha256 HEX]'
      ;;
    put-tree) _hw_allowed=' op-id require-absent var ' _hw_usage='PATH SOURCE_DIR [--require-absent]' ;;
    replace-tree) _hw_allowed=' expected-sha256 op-id var ' _hw_usage='PATH SOURCE_DIR [--expected-sha256 HEX]' ;;
    remove) _hw_allowed=' missing-ok expected-sha256 op-id var ' _hw_usage='PATH [--missing-ok] [--expected-sha256 HEX]' ;;
  esac
  if (($# < 3)); then
    _httk_workflow_error "$_hw_function" "usage: $_hw_function $_hw_usage [--op-id ID] [--var VAR]"
    return 2
  fi
  shift 3
  if [[ $_hw_op == put-* || $_hw_op == replace-tree ]] && (($# > 0)) && [[ $1 != --* ]]; then
    _hw_given=$1 _hw_has_given=1
    shift
  fi
  _httk_workflow_tx_options "$_hw_function" "$_hw_allowed" "$@" || return 2
  _httk_workflow_tx_refuse_late "$_hw_function" "${_hw_op//-/_}" || return
  case $_hw_op in
    put-file)
      if [[ -n $_hw_has_content && -n $_hw_has_given ]] || [[ -z $_hw_has_content && -z $_hw_has_given ]]; then
        _httk_workflow_error "$_hw_function" "give exactly one of SOURCE and --content TEXT"
        return 2
      fi
      [[ -n $_hw_has_content ]] || _httk_workflow_tx_source "$_hw_function" source file "$_hw_given" || return 2
      ;;
    put-tree | replace-tree)
      if [[ -z $_hw_has_given ]]; then
        _httk_workflow_error "$_hw_function" "SOURCE_DIR is missing"
        return 2
      fi
      _httk_workflow_tx_source "$_hw_function" source_dir dir "$_hw_given" || return 2
      ;;
  esac
  _httk_workflow_tx_add "$_hw_function" "$_hw_op" "$_hw_path" || return 2
}

# The operation ids of the open transaction, separated by single spaces in order, into VAR ('' when none
# or no transaction is open). Returns 0.
_httk_workflow_tx_operation_ids() { # <var>
  local _hwTi_ids=${_httk_workflow_tx_id_set# }
  printf -v "$1" '%s' "${_hwTi_ids% }"
}

# ====================================================================================================
# Staging (Python's stage_transaction): called by _httk_workflow_finish for advance, succeed and wait
# ====================================================================================================

# Stage this shell's transaction into the outcome draft (made here when no child made one) when it has
# operations and the attempt has no outcome yet, and put the outcome member
# ,"expected_data_generation":N into VAR ('' when nothing was staged).
# Returns 0; 1 (filesystem) or 2 (a source is no longer usable), with a message and the draft removed.
_httk_workflow_tx_publishing() { # <function> <var>
  local _hwTp_control _hwTp_status
  printf -v "$2" '%s' ''
  ((${#_httk_workflow_tx_ids[@]} > 0)) || return 0
  _httk_workflow_path _hwTp_control "$1" HTTK_WORKFLOW_CONTROL_DIR control_dir || return 1
  # A second outcome is refused by _httk_workflow_publish; nothing is staged for it.
  [[ -z $_httk_workflow_published && ! -e $_hwTp_control/outcome.ready ]] || return 0
  if [[ -z $_httk_workflow_draft ]]; then
    _httk_workflow_new_draft _httk_workflow_draft "$1" || return 1
    _httk_workflow_draft_files=() _httk_workflow_draft_dirs=("$_httk_workflow_draft")
  fi
  _httk_workflow_tx_stage "$1" || {
    _hwTp_status=$?
    _httk_workflow_discard_children # the whole draft: an outcome that cannot be published publishes nothing
    return "$_hwTp_status"
  }
  printf -v "$2" ',"expected_data_generation":%s' "$_httk_workflow_tx_generation"
}

# Write transaction/ into the draft: manifest.json, payload/ with a copy of every put's source or
# --content, and an empty trash/. Every file and directory written is added to the draft's lists, so
# _httk_workflow_publish synchronizes them when durable. Returns 0, 1 or 2 with a message.
_httk_workflow_tx_stage() { # <function>
  local _hwTs_root=$_httk_workflow_draft/transaction _hwTs_scratch=$_httk_workflow_draft/.staging
  local _hwTs_i _hwTs_op _hwTs_target _hwTs_rest _hwTs_sub _hwTs_made=$'\n' _hwTs_mask _hwTs_mode _hwTs_line
  local _hwTs_ops='' _hwTs_uuid _hwTs_manifest _hwTs_trees='' _hwTs_digest _hwTs_next=0
  local -a _hwTs_dirs _hwTs_texts=() _hwTs_copies=() _hwTs_special=() _hwTs_digests=() _hwTs_sums=()
  local -a _hwTs_rels=() _hwTs_kinds=() _hwTs_starts=() _hwTs_ends=() _hwTs_tree_files=()
  _hwTs_dirs=("$_hwTs_root" "$_hwTs_root/payload" "$_hwTs_root/trash")
  for ((_hwTs_i = 0; _hwTs_i < ${#_httk_workflow_tx_ids[@]}; _hwTs_i++)); do
    _hwTs_op=${_httk_workflow_tx_ops[_hwTs_i]}
    [[ $_hwTs_op == put-* || $_hwTs_op == replace-tree ]] || continue
    [[ $_hwTs_op == put-file ]] || _hwTs_trees=1
    # The payload directories above this put, each once (its escaped name keys the set).
    _hwTs_rest=${_httk_workflow_tx_paths[_hwTs_i]} _hwTs_target=$_hwTs_root/payload
    _hwTs_line=${_httk_workflow_tx_escaped[_hwTs_i]} _hwTs_sub=''
    while [[ $_hwTs_rest == */* ]]; do
      _hwTs_target+=/${_hwTs_rest%%/*}
      _hwTs_rest=${_hwTs_rest#*/}
      _hwTs_sub+=${_hwTs_sub:+/}${_hwTs_line%%/*}
      _hwTs_line=${_hwTs_line#*/}
      if [[ $_hwTs_made != *$'\n'"$_hwTs_sub"$'\n'* ]]; then
        _hwTs_made+=$_hwTs_sub$'\n'
        _hwTs_dirs+=("$_hwTs_target")
      fi
    done
  done
  if ! command mkdir -- "${_hwTs_dirs[@]}" ${_hwTs_trees:+"$_hwTs_scratch"}; then
    _httk_workflow_error "$1" "cannot create the transaction bundle in $_httk_workflow_draft"
    return 1
  fi
  _httk_workflow_draft_dirs+=("${_hwTs_dirs[@]}")
  _hwTs_dirs=()
  if [[ -n $_hwTs_trees ]]; then # list every tree first: its directories are made with one mkdir
    for ((_hwTs_i = 0; _hwTs_i < ${#_httk_workflow_tx_ids[@]}; _hwTs_i++)); do
      [[ ${_httk_workflow_tx_ops[_hwTs_i]} == *-tree ]] || continue
      _hwTs_starts[_hwTs_i]=${#_hwTs_rels[@]}
      _httk_workflow_tx_list "$1" "$_hwTs_i" "$_hwTs_scratch" || return
      _hwTs_ends[_hwTs_i]=${#_hwTs_rels[@]}
    done
    if ! command mkdir -- "${_hwTs_dirs[@]}"; then
      _httk_workflow_error "$1" "cannot create the staged trees in $_hwTs_root/payload"
      return 1
    fi
    _httk_workflow_draft_dirs+=("${_hwTs_dirs[@]}")
  fi
  for ((_hwTs_i = 0; _hwTs_i < ${#_httk_workflow_tx_ids[@]}; _hwTs_i++)); do
    _hwTs_target=$_hwTs_root/payload/${_httk_workflow_tx_paths[_hwTs_i]}
    case ${_httk_workflow_tx_ops[_hwTs_i]} in
      put-file) _httk_workflow_tx_put "$1" "$_hwTs_i" "$_hwTs_target" || return ;;
      *-tree) _httk_workflow_tx_copy_tree "$1" "$_hwTs_i" "$_hwTs_target" || return ;;
    esac
  done
  if ((${#_hwTs_special[@]} > 0)) && ! command chmod ug-s,o-t -- "${_hwTs_special[@]}"; then
    _httk_workflow_error "$1" "cannot clear the set-id and sticky bits of the staged copies"
    return 1
  fi
  # File digests: one sha256sum for every put_file (a name with a newline or backslash is printed
  # escaped, after a leading backslash), the staged trees' canonical digests one by one.
  for ((_hwTs_i = 0; _hwTs_i < ${#_hwTs_copies[@]}; _hwTs_i += 1000)); do
    if ! _hwTs_line=$(command sha256sum -- "${_hwTs_copies[@]:_hwTs_i:1000}"); then
      _httk_workflow_error "$1" "cannot digest the staged files in $_hwTs_root/payload"
      return 1
    fi
    while IFS= read -r _hwTs_sub; do
      _hwTs_sub=${_hwTs_sub#\\}
      _hwTs_sums+=("${_hwTs_sub:0:64}")
    done <<<"$_hwTs_line"
  done
  for ((_hwTs_i = 0; _hwTs_i < ${#_httk_workflow_tx_ids[@]}; _hwTs_i++)); do
    _hwTs_op=${_httk_workflow_tx_ops[_hwTs_i]}
    _hwTs_line=${_httk_workflow_tx_escaped[_hwTs_i]}
    if [[ $_hwTs_op == put-file ]]; then
      _hwTs_digest=${_hwTs_sums[_hwTs_next]}
      _hwTs_next=$((_hwTs_next + 1))
    elif [[ $_hwTs_op == *-tree ]]; then
      _httk_workflow_tx_tree_digest "$1" "$_hwTs_i" "$_hwTs_root/payload/${_httk_workflow_tx_paths[_hwTs_i]}" \
        "$_hwTs_scratch" || return 1
    fi
    _hwTs_ops+="${_hwTs_ops:+,}{\"id\":\"${_httk_workflow_tx_ids[_hwTs_i]}\",\"op\":\"$_hwTs_op\""
    if [[ $_hwTs_op == remove || $_hwTs_op == make-dir ]]; then
      _hwTs_ops+=",\"path\":\"$_hwTs_line\""
    else
      _hwTs_ops+=",\"source\":\"payload/$_hwTs_line\",\"path\":\"$_hwTs_line\",\"sha256\":\"$_hwTs_digest\""
    fi
    _hwTs_ops+="${_httk_workflow_tx_flags[_hwTs_i]}}"
  done
  _httk_workflow_uuid _hwTs_uuid "$1" || return 1
  _hwTs_manifest="{\"format\":\"httk-workflow-transaction\",\"format_version\":1,\"id\":\"$_hwTs_uuid\""
  _hwTs_manifest+=",\"expected_data_generation\":$_httk_workflow_tx_generation,\"operations\":[$_hwTs_ops]}"
  if ! printf '%s\n' "$_hwTs_manifest" >"$_hwTs_root/manifest.json"; then
    _httk_workflow_error "$1" "cannot write $_hwTs_root/manifest.json"
    return 1
  fi
  _hwTs_texts+=("$_hwTs_root/manifest.json")
  _hwTs_copies+=("$_hwTs_root/manifest.json") # from here on only the files to synchronize
  # Python writes these with mode 0644 less the umask; a redirection creates 0666 less the umask.
  _hwTs_mask=$(umask)
  printf -v _hwTs_mode '%o' $((8#644 & ~8#$_hwTs_mask))
  if (((8#644 & ~8#$_hwTs_mask) != (8#666 & ~8#$_hwTs_mask))) &&
    ! command chmod -- "$_hwTs_mode" "${_hwTs_texts[@]}"; then
    _httk_workflow_error "$1" "cannot set the mode of the files written in $_hwTs_root"
    return 1
  fi
  if [[ -n $_hwTs_trees ]] && ! command rm -rf -- "$_hwTs_scratch"; then
    _httk_workflow_error "$1" "cannot remove $_hwTs_scratch"
    return 1
  fi
  _httk_workflow_draft_files+=("${_hwTs_copies[@]}" ${_hwTs_tree_files[@]+"${_hwTs_tree_files[@]}"})
}

# Stage operation I's put_file at TARGET: its --content written by printf, or its source copied by cp
# with its permission bits (Python: the source's mode & 0777; set-id and sticky bits are cleared later).
# Appends to the caller's _hwTs_texts or _hwTs_copies (and _hwTs_special). Returns 0, 1 or 2.
_httk_workflow_tx_put() { # <function> <index> <target>
  local _hwTu_source=${_httk_workflow_tx_sources[$2]}
  if [[ -z $_hwTu_source ]]; then
    if ! printf '%s' "${_httk_workflow_tx_texts[$2]}" >"$3"; then
      _httk_workflow_error "$1" "cannot write $3"
      return 1
    fi
    _hwTs_texts+=("$3") # its mode is set with the manifest's
    _hwTs_copies+=("$3")
    return 0
  fi
  if [[ ! -f $_hwTu_source ]]; then
    _httk_workflow_error "$1" "$_hwTu_source: operation '${_httk_workflow_tx_ids[$2]}': source is no longer a \
regular file"
    return 2
  fi
  if ! command cp --preserve=mode -- "$_hwTu_source" "$3"; then
    _httk_workflow_error "$1" "$_hwTu_source: operation '${_httk_workflow_tx_ids[$2]}': source cannot be read"
    return 1
  fi
  [[ ! (-u $_hwTu_source || -g $_hwTu_source || -k $_hwTu_source) ]] || _hwTs_special+=("$3")
  _hwTs_copies+=("$3")
}

# List the source tree of operation I in bytewise order of its relative paths (du, then sort, through
# files in SCRATCH), refusing a symbolic link or special file anywhere below its root. Appends each
# entry's relative path and kind (D or F) to the caller's _hwTs_rels and _hwTs_kinds and each directory
# to stage to _hwTs_dirs (the root first). Returns 0, 1 or 2 with a message.
_httk_workflow_tx_list() { # <function> <index> <scratch>
  local _hwTl_source=${_httk_workflow_tx_sources[$2]} _hwTl_line _hwTl_entry _hwTl_rel _hwTl_what
  local _hwTl_target=$_httk_workflow_draft/transaction/payload/${_httk_workflow_tx_paths[$2]}
  if [[ ! -d $_hwTl_source ]]; then
    _httk_workflow_error "$1" "$_hwTl_source: operation '${_httk_workflow_tx_ids[$2]}': source is no longer a \
directory"
    return 2
  fi
  # -a every entry, -l hard links each time, -D the root even when it is a symlink, -0 NUL-terminated.
  if ! command du -0alD -- "$_hwTl_source" >"$3/du.$2" ||
    ! command sort -z -t $'\t' -k2 -o "$3/sorted.$2" -- "$3/du.$2"; then
    _httk_workflow_error "$1" "$_hwTl_source: operation '${_httk_workflow_tx_ids[$2]}': cannot list the source tree"
    return 1
  fi
  _hwTs_dirs+=("$_hwTl_target")
  while IFS= read -r -d '' _hwTl_line; do
    _hwTl_entry=${_hwTl_line#*$'\t'}
    [[ $_hwTl_entry != "$_hwTl_source" ]] || continue # the root contributes no entry
    _hwTl_rel=${_hwTl_entry#"$_hwTl_source"/}
    if [[ -L $_hwTl_entry ]]; then
      _hwTl_what='a symbolic link'
    elif [[ -d $_hwTl_entry ]]; then
      _hwTs_rels+=("$_hwTl_rel")
      _hwTs_kinds+=(D)
      _hwTs_dirs+=("$_hwTl_target/$_hwTl_rel")
      continue
    elif [[ -f $_hwTl_entry ]]; then
      _hwTs_rels+=("$_hwTl_rel")
      _hwTs_kinds+=(F)
      continue
    else
      _hwTl_what='a device, socket or FIFO'
    fi
    _httk_workflow_error "$1" "$_hwTl_entry: operation '${_httk_workflow_tx_ids[$2]}': source tree holds \
$_hwTl_what; a transaction carries only files and directories"
    return 2
  done <"$3/sorted.$2"
  return 0
}

# Copy the files of operation I's listed tree into TARGET (its directories exist): one cp per run of
# listed files sharing a directory, -P so that a file swapped for a symlink since the listing is copied as
# the link and refused below. Appends the copies to the caller's _hwTs_tree_files (and _hwTs_special).
# Returns 0, 1 or 2 with a message.
_httk_workflow_tx_copy_tree() { # <function> <index> <target>
  local _hwTc_source=${_httk_workflow_tx_sources[$2]} _hwTc_j _hwTc_rel _hwTc_dir _hwTc_batch_dir=''
  local -a _hwTc_batch=()
  for ((_hwTc_j = _hwTs_starts[$2]; _hwTc_j < _hwTs_ends[$2]; _hwTc_j++)); do
    [[ ${_hwTs_kinds[_hwTc_j]} == F ]] || continue
    _hwTc_rel=${_hwTs_rels[_hwTc_j]}
    _hwTc_dir=.
    [[ $_hwTc_rel != */* ]] || _hwTc_dir=${_hwTc_rel%/*}
    if ((${#_hwTc_batch[@]} > 0)) && [[ $_hwTc_dir != "$_hwTc_batch_dir" ]]; then
      _httk_workflow_tx_copy_files "$1" "$2" "$3/$_hwTc_batch_dir" "${_hwTc_batch[@]}" || return 1
      _hwTc_batch=()
    fi
    _hwTc_batch_dir=$_hwTc_dir
    _hwTc_batch+=("$_hwTc_source/$_hwTc_rel")
    [[ ! (-u $_hwTc_source/$_hwTc_rel || -g $_hwTc_source/$_hwTc_rel || -k $_hwTc_source/$_hwTc_rel) ]] ||
      _hwTs_special+=("$3/$_hwTc_rel")
    _hwTs_tree_files+=("$3/$_hwTc_rel")
  done
  if ((${#_hwTc_batch[@]} > 0)); then
    _httk_workflow_tx_copy_files "$1" "$2" "$3/$_hwTc_batch_dir" "${_hwTc_batch[@]}" || return 1
  fi
  for ((_hwTc_j = _hwTs_starts[$2]; _hwTc_j < _hwTs_ends[$2]; _hwTc_j++)); do
    _hwTc_rel=${_hwTs_rels[_hwTc_j]}
    if [[ ${_hwTs_kinds[_hwTc_j]} == F && (-L $3/$_hwTc_rel || ! -f $3/$_hwTc_rel) ]]; then
      _httk_workflow_error "$1" "$_hwTc_source/$_hwTc_rel: operation '${_httk_workflow_tx_ids[$2]}': source is \
no longer a regular file"
      return 2
    fi
  done
  return 0
}

# Copy FILEs of operation I's source tree into the staged directory DIR with their permission bits.
# Returns 0, or 1 with a message.
_httk_workflow_tx_copy_files() { # <function> <index> <dir> <file>...
  if ! command cp -P --preserve=mode -t "$3" -- "${@:4}"; then
    _httk_workflow_error "$1" "${_httk_workflow_tx_sources[$2]}: operation '${_httk_workflow_tx_ids[$2]}': \
cannot copy the source tree"
    return 1
  fi
  return 0
}

# The canonical tree digest (D11) of operation I's staged copy at TARGET into the caller's
# _hwTs_digest: SHA-256 over D\0<path>\0 for a directory and F\0<path>\0<bytes> for a file, in the
# listing's bytewise order. The headers between file contents go into small files in SCRATCH, so one
# cat (per 1000 files) streams everything into one sha256sum. Returns 0, or 1 with a message.
_httk_workflow_tx_tree_digest() { # <function> <index> <target> <scratch>
  local _hwTd_j _hwTd_n=0 _hwTd_header=$4/h$2.0 _hwTd_out
  local -a _hwTd_files=("$4/h$2.0")
  : >"$_hwTd_header"
  for ((_hwTd_j = _hwTs_starts[$2]; _hwTd_j < _hwTs_ends[$2]; _hwTd_j++)); do
    printf '%s\0%s\0' "${_hwTs_kinds[_hwTd_j]}" "${_hwTs_rels[_hwTd_j]}" >>"$_hwTd_header"
    [[ ${_hwTs_kinds[_hwTd_j]} == F ]] || continue
    _hwTd_n=$((_hwTd_n + 1))
    _hwTd_header=$4/h$2.$_hwTd_n
    : >"$_hwTd_header"
    _hwTd_files+=("$3/${_hwTs_rels[_hwTd_j]}" "$_hwTd_header")
  done
  if ! _hwTd_out=$(_httk_workflow_tx_concat "${_hwTd_files[@]}" | command sha256sum && ((PIPESTATUS[0] == 0))); then
    _httk_workflow_error "$1" "$3: operation '${_httk_workflow_tx_ids[$2]}': cannot digest the staged tree"
    return 1
  fi
  _hwTs_digest=${_hwTd_out:0:64}
}

# Write the files one after another to stdout, at most 1000 per cat. Returns 0, or 1 when a cat failed.
_httk_workflow_tx_concat() { # <file>...
  while (($# > 0)); do
    command cat -- "${@:1:1000}" || return 1
    shift $(($# < 1000 ? $# : 1000))
  done
}
