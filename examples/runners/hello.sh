#!/usr/bin/env bash
# A tiny shared runner for the demo, written against the bare protocol (the Bash SDK will make this a
# one-liner): it reads its attempt's identity from context.json, does its step's work, and publishes
# its decision as one directory rename — advance from "relax" to "report", then succeed.
set -euo pipefail

context=$HTTK_WORKFLOW_CONTEXT
member() { sed -n "s/^  \"$1\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" "$context"; }
job_id=$(member job_id)
activation_id=$(member activation_id)
attempt_id=$(member attempt_id)

case "$HTTK_WORKFLOW_STEP" in
    relax)
        printf 'relaxing in %s\n' "$PWD"
        printf 'E = -5.42 eV\n' > energy.txt
        decision='"action": "advance", "next_step": "report"'
        ;;
    report)
        printf 'report: %s\n' "$(cat energy.txt)"
        decision='"action": "succeed"'
        ;;
    *)
        printf 'unknown step %s\n' "$HTTK_WORKFLOW_STEP" >&2
        exit 2
        ;;
esac

draft="$HTTK_WORKFLOW_CONTROL_DIR/outcome.tmp.$$"
mkdir "$draft"
printf '{"format": "httk-workflow-outcome", "format_version": 1, "job_id": "%s", "activation_id": "%s", "attempt_id": "%s", %s, "runner_steps": ["relax", "report"]}\n' \
    "$job_id" "$activation_id" "$attempt_id" "$decision" > "$draft/outcome.json"
if [ "${HTTK_WORKFLOW_DURABLE:-0}" = 1 ]; then
    sync "$draft/outcome.json" "$draft"
fi
mv -T "$draft" "$HTTK_WORKFLOW_CONTROL_DIR/outcome.ready"
if [ "${HTTK_WORKFLOW_DURABLE:-0}" = 1 ]; then
    sync "$HTTK_WORKFLOW_CONTROL_DIR"
fi
