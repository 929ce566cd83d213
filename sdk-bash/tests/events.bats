#!/usr/bin/env bats
# Runner-reported events (.httk-job/events.jsonl): the line, its bound, the rotation, a torn line, refusals.

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  httk_test_setup
}

# The event lines of FILE with their time member replaced by T, for comparison.
untimed() { # <file>
  sed -E 's/"time":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z"/"time":"T"/' "$1"
}

@test "events: one compact line per event, details verbatim, the attempt named from the context" {
  httk_workflow_record_event vasp.error 'ZPOTRF in "vasp.out"' --details '{"problem":"zpotrf","run":2}'
  httk_workflow_record_event vasp.remedy 'symmetry off: é'
  [[ $(wc -l <"$JOB/.httk-job/events.jsonl") -eq 2 ]]
  run untimed "$JOB/.httk-job/events.jsonl"
  [[ ${lines[0]} == '{"format":"httk-workflow-runner-event","format_version":1,"time":"T","step":"relax","attempt_id":"a6c2c973-29e1-44e2-9649-ae419e340ac4","attempt_ordinal":2,"kind":"vasp.error","message":"ZPOTRF in \"vasp.out\"","details":{"problem":"zpotrf","run":2}}' ]]
  [[ ${lines[1]} == *'"kind":"vasp.remedy","message":"symmetry off: é"}' ]]
}

@test "events: the time is UTC with microseconds" {
  local line
  httk_workflow_record_event x.y 'now'
  IFS= read -r line <"$JOB/.httk-job/events.jsonl"
  [[ $line =~ \"time\":\"([0-9-]+T[0-9:]+\.[0-9]{6}Z)\" ]]
  [[ ${BASH_REMATCH[1]:0:16} == "$(date -u +%Y-%m-%dT%H:%M)" || ${BASH_REMATCH[1]:0:13} == "$(date -u +%Y-%m-%dT%H)" ]]
}

@test "events: past 64 KiB the file becomes events.1.jsonl and a new one begins" {
  local long i
  printf -v long 'x%.0s' {1..4000}
  for ((i = 0; i < 20; i++)); do
    httk_workflow_record_event bulk "$i $long"
  done
  [[ -f $JOB/.httk-job/events.1.jsonl ]]
  (($(wc -c <"$JOB/.httk-job/events.jsonl") <= 65536))
  (($(wc -c <"$JOB/.httk-job/events.1.jsonl") <= 65536))
  run tail -n 1 "$JOB/.httk-job/events.jsonl"
  [[ $output == *'"message":"19 x'* ]]
}

@test "events: a line cut short stays on its own line" {
  mkdir -p "$JOB/.httk-job"
  printf '{"format":"httk-workflow-runner-event","form' >"$JOB/.httk-job/events.jsonl"
  httk_workflow_record_event after 'a torn line before me'
  run sed -n 2p "$JOB/.httk-job/events.jsonl"
  [[ $output == '{"format":"httk-workflow-runner-event"'*'"kind":"after"'* ]]
}

@test "events: invalid arguments and events too long return 2 and write nothing" {
  local kind long
  for kind in '' '.x' 'two words' 'a/b' "$(printf 'k%.0s' {1..129})"; do
    run --separate-stderr httk_workflow_record_event "$kind" message
    [[ $status -eq 2 && $stderr == "httk_workflow_record_event: KIND"* ]]
  done
  run --separate-stderr httk_workflow_record_event kind $' \t'
  [[ $status -eq 2 && $stderr == *"MESSAGE must be a nonempty text"* ]]
  run --separate-stderr httk_workflow_record_event kind message --details '[1]'
  [[ $status -eq 2 ]]
  run --separate-stderr httk_workflow_record_event kind message --detail '{}'
  [[ $status -eq 2 && $stderr == *usage* ]]
  printf -v long 'x%.0s' {1..8200}
  run --separate-stderr httk_workflow_record_event kind "$long"
  [[ $status -eq 2 && $stderr == *"at most 8192"* ]]
  [[ ! -e $JOB/.httk-job/events.jsonl ]]
}
