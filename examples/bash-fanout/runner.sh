#!/usr/bin/env bash
# A Bash workflow with the Bash API: the same fan-out and join as the Python example.
# prepare spawns one labelled child per strain and waits; each child runs "strain"; gather reads the
# children's results through the join and publishes the best one.
set -euo pipefail
# shellcheck source=/dev/null
source "$HTTK_WORKFLOW_BASH_API"

prepare() {
  local index=0 strain
  for strain in -20 0 20; do # strains in thousandths
    httk_workflow_spawn "strain-$index" strain --input "millistrain=$strain"
    index=$((index + 1))
  done
  httk_workflow_wait gather --message "relaxing at 3 strains"
}

strain() {
  local millistrain energy
  httk_workflow_setting millistrain millistrain
  # A stand-in for the real calculation, in integer micro-eV: E = -5400000 + 40 (x - 4)^2.
  energy=$((-5400000 + 40 * (millistrain - 4) * (millistrain - 4)))
  printf '%s\n' "$energy" >energy.txt
  printf 'strain %s/1000: E = %s micro-eV\n' "$millistrain" "$energy"
  httk_workflow_succeed
}

gather() {
  local labels label path energy best='' lowest=''
  httk_workflow_children labels
  for label in $labels; do
    httk_workflow_child path "$label" workdir_path
    energy=$(<"$HTTK_WORKFLOW_WORKSPACE_DIR/$path/energy.txt")
    if [[ -z $lowest || $energy -lt $lowest ]]; then
      lowest=$energy best=$label
    fi
  done
  httk_workflow_state_save "{\"best\":\"$best\",\"micro_ev\":$lowest}"
  printf 'lowest energy at %s: %s micro-eV\n' "$best" "$lowest"
  httk_workflow_succeed --message "lowest energy at $best"
}

httk_workflow_register_step prepare
httk_workflow_register_step strain
httk_workflow_register_step gather
httk_workflow_dispatch
