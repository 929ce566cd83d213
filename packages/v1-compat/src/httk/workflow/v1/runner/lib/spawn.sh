# shellcheck shell=bash disable=SC2034,SC2153,SC2154 # V1_*, V1N_*, D_* and _ht_matches are shared by lib/*.sh
# spawn.sh: exit code 3: the active subtasks of a task become child jobs, and the task waits for them.
# Sourced by apply.sh for a wait decision only.

# TEXT as a JSON string token into VAR (quotes included; \" \\ \n \r \t and \u00XX for other controls).
_v1_json() { # <var> <text>
  local -x LC_ALL=C
  local _v1j_text=$2 _v1j_out='' _v1j_char
  _v1j_text=${_v1j_text//\\/\\\\}
  _v1j_text=${_v1j_text//\"/\\\"}
  _v1j_text=${_v1j_text//$'\n'/\\n}
  _v1j_text=${_v1j_text//$'\r'/\\r}
  _v1j_text=${_v1j_text//$'\t'/\\t}
  if [[ $_v1j_text == *[$'\001'-$'\037']* ]]; then
    while [[ -n $_v1j_text ]]; do
      _v1j_char=${_v1j_text:0:1}
      _v1j_text=${_v1j_text:1}
      if [[ $_v1j_char == [$'\001'-$'\037'] ]]; then
        printf -v _v1j_char '\\u%04x' "'$_v1j_char"
      fi
      _v1j_out+=$_v1j_char
    done
    _v1j_text=$_v1j_out
  fi
  printf -v "$1" '"%s"' "$_v1j_text"
}

# Exit code 3 (or an imported waitsubtasks parent): every active direct subtask becomes a labelled
# child job working in its directory where it is, and the job waits for them all to be terminal
# (all_terminal: v1 resumed a parent once no descendant was active, broken ones included). With no
# active subtask the parent continues at once, as v1 did.
_v1_spawn_and_wait() {
  local count rel name base label n locator initial child_locator json_anchor json_locator json_name json_origin
  local json_step json_owner json_set json_id view priority attempts restarts origin
  local -A labels=()
  _v1_subtasks count
  if ((count == 0)); then
    D_KIND=advance
    _v1_apply
    return
  fi
  _v1_json json_anchor "$V1_ANCHOR"
  _v1_attempts || return 1
  attempts=$V1_ATTEMPTS
  for rel in "${V1_SUBTASKS[@]}"; do
    name=${rel##*/}
    _v1_parse_name "$name"
    _v1_label base "$V1N_ID"
    label=$base n=1
    while [[ -n ${labels[$label]-} ]]; do
      n=$((n + 1))
      label=$base-$n
    done
    labels[$label]=1
    locator=${V1_LOCATOR:+$V1_LOCATOR/}
    [[ $rel != */* ]] || locator+=${rel%/*}/
    child_locator=${locator}ht.task.$V1N_SET.$V1N_ID
    restarts=$V1N_RESTARTS
    [[ $V1N_STATUS != running ]] || restarts=$((restarts + 1))
    _v1_json json_locator "$child_locator"
    _v1_json json_name "$name"
    origin=${V1_TASK#"$HTTK_WORKFLOW_WORKSPACE_DIR"/}/$rel
    _v1_json json_origin "$origin"
    _v1_json json_set "$V1N_SET"
    _v1_json json_id "$V1N_ID"
    _v1_json json_step "$V1N_STEP"
    _v1_json json_owner "$V1N_OWNER"
    _v1_priority priority "$V1N_PRIO"
    initial=$V1N_STEP
    if ! _v1_is_step "$initial"; then
      printf 'httk v1: the subtask %s starts at %s, which is not a step name; it starts at "start"\n' \
        "$rel" "$initial" >&2
      initial=start
    fi
    httk_workflow_spawn "$label" "$initial" --tag "$label" --priority "$priority" \
      --name "httk v1 subtask $origin" --input "v1.anchor=$json_anchor" --input "v1.task=$json_locator" \
      --input "v1.name=$json_name" --input "v1.origin=$json_origin" --input "v1.set=$json_set" \
      --input "v1.id=$json_id" --input "v1.step=$json_step" --input "v1.restarts=$restarts" \
      --input "v1.owner=$json_owner" --input "v1.priority=$V1N_PRIO" --input "v1.status=\"$V1N_STATUS\"" \
      --input "v1.attempts=$attempts"
  done
  _v1_crash_point side_effects
  _v1_view_name view waitsubtasks "$D_STEP"
  _v1_set_view "$view"
  _v1_crash_point view
  _v1_say "waiting for $count subtask(s), then $D_STEP"
  httk_workflow_wait "$D_STEP" --condition all_terminal --message "v1 waits for $count subtasks"
}

# A child label (tag syntax: a-z, 0-9, '.', '_', '-', starting with a letter or digit, no '--', at most
# 40 bytes here) made from the v1 task id, into VAR.
_v1_label() { # <var> <id>
  local _v1b_label=${2,,}
  _v1b_label=${_v1b_label//[!a-z0-9._-]/-}
  while [[ $_v1b_label == *--* ]]; do
    _v1b_label=${_v1b_label//--/-}
  done
  while [[ $_v1b_label == [._-]* ]]; do
    _v1b_label=${_v1b_label:1}
  done
  _v1b_label=${_v1b_label:0:40}
  printf -v "$1" '%s' "${_v1b_label:-task}"
}
