#!/usr/bin/env bats
# Children and joins: httk_workflow_spawn and httk_workflow_wait (bundles, spawn.json and the wait outcome
# as docs/outcome-documents.md lays them out), the JSON splitter that reads the parent's job.json, and
# httk_workflow_children / httk_workflow_child reading a join's observations. Byte parity with Python
# is tests/sdk/test_children_parity.py.

# Each @test runs in its own subshell (its assignments stay local on purpose); single-quoted scripts
# run in child shells; CALLS comes from use_call_log in test_helper.bash; the library's globals are read.
# shellcheck disable=SC2030,SC2031,SC2016,SC2153,SC2154

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  httk_test_setup
  mkdir -p "$JOB/files"
  printf '#!/bin/sh\necho runner\n' >"$JOB/files/runner"
  chmod 750 "$JOB/files/runner"
  # The parent's job.json, pretty-printed with non-ASCII: the splitter must drop only the whitespace.
  "$PYTHON" -c 'import json, sys
job = {"format": "httk-workflow-job", "format_version": 1,
       "id": "01234567-89ab-cdef-0123-456789abcdef", "tag": "silicon-relax",
       "runner": {"backend": "path", "path": "files/runner", "arguments": ["--tag", "é \"x\" {y}"]},
       "workdir": {"mode": "persistent", "path": "run"}, "data": {"mode": "none"},
       "initial_step": "relax", "priority": 400, "claim": {"pool": "default", "required_capabilities": []},
       "retry_policy": {"maximum_activations": 5, "retry_on": ["lease_lost"]}, "inputs": {"n": 1}}
open(sys.argv[1], "w").write(json.dumps(job, indent=2, ensure_ascii=False) + "\n")' "$JOB/job.json"
  READY=$CONTROL/outcome.ready
}

# The only child bundle directory name with tag TAG.
bundle_of() { # <tag>
  local found
  found=("$READY"/children/jobs/"$1"--*)
  [[ ${#found[@]} -eq 1 && -d ${found[0]} ]]
  printf '%s' "${found[0]}"
}

@test "spawn then wait: every bundle, spawn.json and the join, in the contract's layout" {
  local one two
  relax() { :; }
  httk_workflow_register_step relax
  httk_workflow_spawn first relax --input 'x=[1,{"a":"b"}]' --input n=2
  httk_workflow_spawn second clean --tag other --placement 'far/away' --name 'the second' --priority 7 \
    --resource procs=2
  [[ -z $(leftover_drafts) ]] # nothing is written before the outcome
  httk_workflow_wait gather --condition at_least --count 1 --on-impossible mourn --message waiting
  one=$(bundle_of first)
  two=$(bundle_of other)
  "$PYTHON" - "$READY" "$one" "$two" <<'PY'
import json, os, sys
ready, one, two = sys.argv[1:]
def compact(text):
    document = json.loads(text)
    assert text == json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"
    return document
spawn = compact(open(f"{ready}/children/spawn.json").read())
first, second = spawn["children"]
parent_key = "silicon-relax--01234567-89ab-cdef-0123-456789abcdef"
assert first["placement"] == f"project-17/0/03a/{parent_key}.children/0"
assert (first["label"], second["label"], second["placement"]) == ("first", "second", "far/away")
job = compact(open(f"{one}/job.json").read())
assert list(job) == ["format", "format_version", "id", "tag", "runner", "workdir", "data", "initial_step",
                     "priority", "claim", "retry_policy", "inputs", "parent"]
assert job["runner"]["arguments"] == ["--tag", 'é "x" {y}'] and job["priority"] == 400
assert job["inputs"] == {"x": [1, {"a": "b"}], "n": 2} and job["tag"] == "first"
assert job["parent"] == {"workspace_id": "b588833b-87ea-4da2-b860-1c9e768cfbc1",
    "job_id": "01234567-89ab-cdef-0123-456789abcdef", "job_key": parent_key,
    "placement": "project-17/0/03a", "activation_id": "e7f86a0e-34d6-45a7-b92d-3f4b2dc98c54",
    "spawn_id": first["spawn_id"]}
other = compact(open(f"{two}/job.json").read())
assert (other["tag"], other["name"], other["priority"], other["resources"]) == ("other", "the second", 7, {"procs": 2})
assert open(f"{one}/files/runner").read() == "#!/bin/sh\necho runner\n"
assert oct(os.stat(f"{one}/files/runner").st_mode & 0o777) == oct(0o750 & ~os.umask(0))
outcome = compact(open(f"{ready}/outcome.json").read())
assert outcome["action"] == "wait" and outcome["next_step"] == "gather" and outcome["message"] == "waiting"
assert outcome["join"] == {"children": [
    {"workspace_id": c["workspace_id"], "job_id": c["job_id"], "job_key": c["job_key"], "placement_hint": c["placement"]}
    for c in (first, second)], "condition": "at_least", "count": 1,
    "on_impossible": {"action": "advance", "next_step": "mourn"}}
assert outcome["runner_steps"] == ["relax"]
PY
  [[ -z $(leftover_drafts) ]]
}

@test "advance and succeed publish detached children; fail, retry and pause discard them" {
  httk_workflow_spawn kept relax
  httk_workflow_succeed
  bundle_of kept >/dev/null
  [[ -f $READY/children/spawn.json ]]
  rm -r "$READY"
  _httk_workflow_published=''
  httk_workflow_spawn dropped relax
  httk_workflow_fail x.broken "it broke"
  [[ ! -e $READY/children ]]
  [[ -z $(leftover_drafts) ]]
  [[ ${#_httk_workflow_spawn_labels[@]} -eq 0 ]]
}

@test "invalid spawns and waits return 2 and leave nothing behind" {
  local call
  for call in 'httk_workflow_spawn Bad relax' 'httk_workflow_spawn a--b relax' 'httk_workflow_spawn a .step' \
    'httk_workflow_spawn a relax --tag X' 'httk_workflow_spawn a relax --placement /abs' \
    'httk_workflow_spawn a relax --placement a/../b' 'httk_workflow_spawn a relax --placement a//b' \
    'httk_workflow_spawn a relax --placement project-17/0/03a/silicon-relax--01234567-89ab-cdef-0123-456789abcdef/x' \
    'httk_workflow_spawn a relax --input novalue' 'httk_workflow_spawn a relax --input n=1 --input n=2' \
    'httk_workflow_spawn a relax --bogus 1' 'httk_workflow_spawn a' \
    'httk_workflow_spawn a relax && httk_workflow_spawn a relax' 'httk_workflow_wait gather' \
    'httk_workflow_spawn a relax && httk_workflow_wait gather --condition sometimes' \
    'httk_workflow_spawn a relax && httk_workflow_wait gather --condition at_least' \
    'httk_workflow_spawn a relax && httk_workflow_wait gather --condition at_least --count 2' \
    'httk_workflow_spawn a relax && httk_workflow_wait gather --count 1' \
    'httk_workflow_spawn a relax && httk_workflow_wait gather --on-impossible .x'; do
    run --separate-stderr bash -c "source \"\$HTTK_WORKFLOW_BASH_API\"; $call"
    [[ $status -eq 2 ]] || {
      printf 'status %s for: %s\n%s\n' "$status" "$call" "$stderr" >&2
      false
    }
    [[ -n $stderr && ! -e $READY && -z $(leftover_drafts) ]]
  done
}

@test "spawning after the outcome is published returns 3" {
  httk_workflow_succeed
  run --separate-stderr httk_workflow_spawn late relax
  [[ $status -eq 3 ]]
  assert_contains "$stderr" "already published"
}

@test "spawning after another process published the outcome returns 3 and writes nothing" {
  mkdir "$READY"
  run --separate-stderr httk_workflow_spawn late relax
  [[ $status -eq 3 ]]
  assert_contains "$stderr" "already published"
  [[ -z $(ls -A "$READY") && -z $(leftover_drafts) ]]
}

@test "durable: every bundle file and directory is synchronized before the rename" {
  use_call_log
  export HTTK_WORKFLOW_DURABLE=1
  httk_workflow_spawn a relax
  httk_workflow_spawn b relax
  httk_workflow_wait gather
  local calls one
  mapfile -t calls <"$CALLS"
  [[ ${#calls[@]} -eq 3 ]]
  one=$(bundle_of a)
  one=${one#"$READY"}
  assert_contains "${calls[0]}" "/outcome.json "
  assert_contains "${calls[0]}" "$one/job.json "
  assert_contains "${calls[0]}" "$one/files/runner "
  assert_contains "${calls[0]}" "/children/spawn.json "
  assert_contains "${calls[0]}" "$one/files "
  assert_contains "${calls[0]}" "/children/jobs "
  [[ ${calls[1]} == "mv -T -- "*"/outcome.tmp."*" $READY" ]]
  [[ ${calls[2]} == "sync -- $CONTROL" ]]
}

@test "sourcing the library does not load the children functions; the first call does, again after a second source" {
  run --separate-stderr bash -c '
    cd "$(dirname "$1")" && source ./httk-workflow.sh && cd /
    if declare -F _httk_workflow_split_object >/dev/null; then exit 9; fi
    httk_workflow_children names
    declare -F _httk_workflow_split_object
    source "$1"
    httk_workflow_children names && printf "[%s]\n" "$names"' _ "$LIBRARY"
  [[ $status -eq 0 && $output == $'_httk_workflow_split_object\n[]' ]]
}

@test "the splitter keeps strings exactly and drops only the whitespace around them" {
  local text
  _httk_workflow_load_part children test
  text=$' { "a" : "x \\" } { , : ]" ,\n\t"b":[ 1 , { "c" : "\\\\" } ] , "d" : null,"e":-1.5e3 } '
  _httk_workflow_split_object "$text"
  [[ ${_httk_workflow_split_keys[*]} == '"a" "b" "d" "e"' ]]
  [[ ${_httk_workflow_split_values[0]} == '"x \" } { , : ]"' ]]
  [[ ${_httk_workflow_split_values[1]} == '[1,{"c":"\\"}]' ]]
  [[ ${_httk_workflow_split_values[2]} == null && ${_httk_workflow_split_values[3]} == -1.5e3 ]]
  run _httk_workflow_split_object '{"a":1} trailing'
  [[ $status -eq 1 ]]
  run _httk_workflow_split_object '["not an object"]'
  [[ $status -eq 1 ]]
  run _httk_workflow_split_object '{"unterminated'
  [[ $status -eq 1 ]]
}

@test "after a join: the children by label and kind, and each one's members" {
  local names failed path code kind
  export HTTK_WORKFLOW_CONTEXT=$FIXTURES/context-join.json
  httk_workflow_children names
  [[ $names == 'branch-a branch-b' ]]
  httk_workflow_children failed failed
  [[ $failed == branch-b ]]
  httk_workflow_child path branch-a workdir_path
  [[ $path == project-17/0/041/branch-a--411d9e6e-c050-451d-a851-e20f2570d7c5/run ]]
  httk_workflow_child code branch-b failure.code
  [[ $code == vasp.nonconvergent ]]
  httk_workflow_child code branch-a failure.code
  [[ $code == null ]]
  httk_workflow_child kind branch-b--7ead0705-e1bb-4290-9ebd-fc1b24df9005 kind
  [[ $kind == failed ]]
  run --separate-stderr httk_workflow_child missing nobody kind
  [[ $status -eq 1 ]]
  run --separate-stderr httk_workflow_child missing branch-a failure
  [[ $status -eq 2 ]]
}

@test "an activation that follows no join has no children" {
  local names
  httk_workflow_children names
  [[ -z $names ]]
}

@test "a runner holding NUL bytes is copied with cp, byte for byte" {
  local one
  printf '\177ELF\0\0binary\n\0' >"$JOB/files/runner"
  chmod 755 "$JOB/files/runner"
  httk_workflow_spawn a relax
  httk_workflow_succeed
  one=$(bundle_of a)
  cmp -- "$JOB/files/runner" "$one/files/runner"
  [[ -x $one/files/runner ]]
}
