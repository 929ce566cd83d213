# shellcheck shell=bash disable=SC2034,SC2153,SC2154 # V1_*, V1N_*, D_* and _ht_matches are shared by lib/*.sh
# apply.sh: recording a decision, then carrying it out: v1's side effects (ht.reason, the freeze hook,
# the archive of a finished run, subtasks), the status view, and the attempt's one outcome.
#
# Every side effect is safe to repeat, so an attempt that dies anywhere after recording is finished by
# the next attempt of the same activation without rerunning the program: ht.reason is appended only
# while it still has the size recorded beside the decision; the archive is a v1 transaction of the task
# directory (ht.run.current -> ht.run.<recorded stamp>, the log dropped), replayed until done; subtasks
# become children only in the outcome that publishes the wait; the view is renamed, not created twice.
# Only the freeze hook runs again when an attempt died after it: v1 templates' freeze steps are
# transactions themselves.

# Record D_* as this activation's decision in .httk-job/state.json (synchronized when durable), for
# the decisions with side effects to repeat safely. advance and wait need no record: the step left its
# decision in ht.nextstep, which the next attempt reads (_v1_effective_step), and saving a file on
# every step would cost the runner a process per step.
_v1_record() {
  D_REASON_SIZE=-1 D_STAMP=''
  [[ $D_KIND != advance && $D_KIND != wait ]] || return 0
  _v1_need finish || return 1
  [[ ! -f $V1_TASK/ht.reason ]] || _v1_size D_REASON_SIZE "$V1_TASK/ht.reason"
  [[ $D_KIND != finished || $V1_PROGRAM != ht_steps ]] || _v1_free_stamp D_STAMP
  _v1_activation || return 1
  httk_workflow_state_save "{\"v1\":{\"activation\":\"$V1_ACTIVATION\",\"decision\":\"$D_KIND\",\
\"exit\":$D_EXIT,\"stamp\":\"$D_STAMP\",\"reason_size\":$D_REASON_SIZE}}"
}

# The outcome priority option for ht.priority (written by HT_TASK_SET_PRIORITY) into the array VAR.
_v1_priority_option() { # <array var>
  local _v1o_value=''
  [[ ! -f $V1_RUN_DIR/ht.priority ]] || IFS= read -r _v1o_value <"$V1_RUN_DIR/ht.priority" || :
  if [[ $_v1o_value == [1-5] ]]; then
    _v1_priority _v1o_value "$_v1o_value"
    eval "$1=(--priority \"\$_v1o_value\")"
  else
    eval "$1=()"
  fi
}

# Carry out the decision D_* and publish the outcome.
_v1_apply() {
  local view
  local -a priority=()
  case $D_KIND in
    advance)
      _v1_priority_option priority
      _v1_crash_point side_effects
      _v1_view_name view waitstep "$D_STEP"
      _v1_set_view "$view"
      _v1_crash_point view
      _v1_say "next step $D_STEP"
      httk_workflow_advance "$D_STEP" ${priority[@]+"${priority[@]}"} --message "v1 next step $D_STEP"
      ;;
    wait)
      _v1_need spawn
      _v1_spawn_and_wait
      ;;
    finished | broken | timeout | restarts | stopped | invalid | imported)
      _v1_need finish
      _v1_finish
      ;;
    *)
      printf 'httk v1: unknown recorded decision %s\n' "$D_KIND" >&2
      return 1
      ;;
  esac
}
