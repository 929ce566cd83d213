#!/usr/bin/env bash
# A tiny shared runner for the demo: it says hello from its step. (It publishes no outcome yet; the task
# manager and the Bash API arrive with later issues.)
set -euo pipefail
printf 'hello from step %s of job %s\n' "${HTTK_WORKFLOW_STEP:-?}" "${HTTK_WORKFLOW_JOB_DIR:-?}"
