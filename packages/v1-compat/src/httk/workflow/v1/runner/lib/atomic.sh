# shellcheck shell=bash
# atomic.sh: the httk v1 transaction protocol, shared by the v1 runner and ht_tasks_api.sh.
#
# A transaction is a directory ht.tmp.atomic.<N> (N the smallest free number from 0) in a base
# directory. Files created in it are published into the base; a file ht.atommv.<SRC> holding DST
# records the rename BASE/SRC -> BASE/DST. Renaming the directory to ht.atomic.<M> (M the smallest free)
# is the commit point. Replay, in the base: remove every ht.tmp.atomic.*; for each ht.atomic.* in C
# (bytewise) order, perform its renames (a record is removed even when its rename fails), move every
# other non-hidden entry into the base (replacing same-named files), remove the directory (a hidden
# entry left inside keeps it for the next replay); remove every ht.tmp.atomic.* again, so renaming a file
# to ht.tmp.atomic.<anything> inside a transaction deletes it on commit. Replay is re-entrant: a replay
# interrupted anywhere is finished by the next one.
#
# Durability: with HTTK_WORKFLOW_DURABLE=1 a commit synchronizes the staged tree before its rename and
# the base after it, and a replay that moved anything synchronizes the base (v1 itself never did).
#
# Sourcing defines _ht_* functions and the _ht_matches array only; no function changes a shell option,
# a trap or IFS of the caller, and every glob here works whatever the caller's nullglob, failglob,
# dotglob or noglob. Return codes: 0 done, 1 a file operation failed (the message is on stderr).

_ht_matches=()

# The entries DIRECTORY/PREFIX* (not hidden unless PREFIX starts with '.') into _ht_matches, in C order.
_ht_glob() { # <directory> <literal prefix>
  local -x LC_ALL=C
  local _htg_restore=''
  shopt -q nullglob || _htg_restore+='shopt -u nullglob;'
  ! shopt -q failglob || _htg_restore+='shopt -s failglob;'
  ! shopt -q dotglob || _htg_restore+='shopt -s dotglob;'
  [[ $- != *f* ]] || _htg_restore+='set -f;'
  shopt -s nullglob
  shopt -u failglob dotglob
  set +f
  _ht_matches=("$1/$2"*)
  eval "$_htg_restore"
  return 0
}

# Whether this attempt publishes durably (the manager's HTTK_WORKFLOW_DURABLE). Returns 0 yes, 1 no.
_ht_durable() {
  [[ ${HTTK_WORKFLOW_DURABLE-0} == 1 ]]
}

# Synchronize every file and directory at or below each PATH (a no-op unless durable).
# Returns 0, or 1 with a message.
_ht_sync_tree() { # <path>...
  _ht_durable || return 0
  if ! command find "$@" -exec sync -- {} +; then
    printf 'httk v1: cannot synchronize %s\n' "$*" >&2
    return 1
  fi
}

# The first PREFIX<N>, N = 0, 1, ..., naming nothing (not even a dangling symlink), into VAR.
_ht_first_free() { # <var> <path prefix>
  local _htf_n=0
  while [[ -e $2$_htf_n || -L $2$_htf_n ]]; do
    _htf_n=$((_htf_n + 1))
  done
  printf -v "$1" '%s' "$2$_htf_n"
}

# Open a transaction in BASE: create the first free BASE/ht.tmp.atomic.<N> and name it in VAR.
# Returns 0, or 1 with a message.
_ht_atomic_open() { # <var> <base>
  local _hto_dir _hto_tries=0
  while :; do
    _ht_first_free _hto_dir "$2/ht.tmp.atomic."
    command mkdir -- "$_hto_dir" 2>/dev/null && break
    _hto_tries=$((_hto_tries + 1))
    if ((_hto_tries >= 100)); then
      printf 'httk v1: cannot create a transaction directory in %s\n' "$2" >&2
      return 1
    fi
  done
  printf -v "$1" '%s' "$_hto_dir"
}

# Commit the open transaction TXN by renaming it to the first free ht.atomic.<M> beside it; the name
# committed goes into VAR when one is given. Returns 0, or 1 with a message (nothing was committed).
_ht_atomic_commit() { # <txn dir> [var]
  local _htc_base=${1%/*} _htc_target
  [[ $_htc_base != "$1" ]] || _htc_base=.
  _ht_sync_tree "$1" || return 1
  _ht_first_free _htc_target "$_htc_base/ht.atomic."
  if ! command mv -T -- "$1" "$_htc_target" || [[ -e $1 ]]; then
    printf 'httk v1: cannot commit the transaction %s as %s\n' "$1" "$_htc_target" >&2
    return 1
  fi
  if _ht_durable && ! command sync -- "$_htc_base"; then
    printf 'httk v1: committed %s but cannot synchronize %s\n' "$_htc_target" "$_htc_base" >&2
    return 1
  fi
  [[ -z ${2-} ]] || printf -v "$2" '%s' "$_htc_target"
}

# Remove every BASE/ht.tmp.atomic.* (uncommitted work, and what a transaction renamed there).
_ht_atomic_drop() { # <base>
  _ht_glob "$1" ht.tmp.atomic.
  ((${#_ht_matches[@]} == 0)) || command rm -rf -- "${_ht_matches[@]}"
}

# Whether BASE holds an ht.atomic.* or ht.tmp.atomic.* entry. Returns 0 yes, 1 no. Every step asks
# four times, so under the usual glob options it is one glob and no option or locale juggling.
_ht_atomic_pending() { # <base>
  local _htp_entry
  if shopt -q failglob || [[ $- == *f* ]]; then
    _ht_glob "$1" ht.atomic.
    ((${#_ht_matches[@]} == 0)) || return 0
    _ht_glob "$1" ht.tmp.atomic.
    ((${#_ht_matches[@]} > 0))
    return
  fi
  for _htp_entry in "$1"/ht.atomic.* "$1"/ht.tmp.atomic.*; do
    [[ ! -e $_htp_entry && ! -L $_htp_entry ]] || return 0
  done
  return 1
}

# Replay every committed transaction of BASE (see the header). Returns 0, or 1 when a move of staged
# entries failed (the transaction stays committed for the next replay).
_ht_atomic_replay() { # <base>
  local _htr_base=$1 _htr_txn _htr_record _htr_target _htr_status=0 _htr_entry _htr_pending=''
  local -a _htr_txns=() _htr_records
  _ht_atomic_pending "$_htr_base" || return 0
  _ht_glob "$_htr_base" ht.
  for _htr_entry in ${_ht_matches[@]+"${_ht_matches[@]}"}; do
    case ${_htr_entry##*/} in
      ht.atomic.*) _htr_txns+=("$_htr_entry") ;;
      ht.tmp.atomic.*) _htr_pending=1 ;;
    esac
  done
  ((${#_htr_txns[@]} > 0)) || [[ -n $_htr_pending ]] || return 0
  [[ -z $_htr_pending ]] || _ht_atomic_drop "$_htr_base"
  for _htr_txn in ${_htr_txns[@]+"${_htr_txns[@]}"}; do
    [[ -d $_htr_txn && ! -L $_htr_txn ]] || continue
    _ht_glob "$_htr_txn" ht.atommv.
    _htr_records=(${_ht_matches[@]+"${_ht_matches[@]}"})
    for _htr_record in ${_htr_records[@]+"${_htr_records[@]}"}; do
      _htr_target=
      IFS= read -r _htr_target <"$_htr_record" || :
      if [[ -n $_htr_target ]]; then
        command mv -f -- "$_htr_base/${_htr_record##*/ht.atommv.}" "$_htr_base/$_htr_target" 2>/dev/null || :
      fi
    done
    ((${#_htr_records[@]} == 0)) || command rm -f -- "${_htr_records[@]}"
    _ht_glob "$_htr_txn" ''
    if ((${#_ht_matches[@]} > 0)) && ! command mv -f -t "$_htr_base" -- "${_ht_matches[@]}"; then
      printf 'httk v1: cannot apply the transaction %s\n' "$_htr_txn" >&2
      _htr_status=1
      continue
    fi
    command rmdir -- "$_htr_txn" 2>/dev/null || :
  done
  _ht_atomic_drop "$_htr_base"
  if ((${#_htr_txns[@]} > 0)) && _ht_durable; then
    command sync -- "$_htr_base" || _htr_status=1
  fi
  return "$_htr_status"
}
