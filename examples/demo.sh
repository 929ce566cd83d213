#!/usr/bin/env bash
# The main demo: a real workspace, a shared runner, jobs made with `job new` at several placements, a
# task manager running them to the end, two fan-out workflows (Python @step and Bash) whose children
# are joined, and the result shown the way an operator sees it.
# Run it through `./dev demo` (which puts httk on PATH).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ws=${HTTK_DEMO_WORKSPACE:-$(mktemp -d)/demo-workspace}
payloads=$(mktemp -d)
trap 'rm -rf "$payloads"' EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Initialize a workspace"
httk workflow workspace init "$ws" --name demo
httk workflow workspace policy show "$ws"

step "Publish one shared runner into the workspace store"
httk workflow runner publish "$ws" --name hello.sh "$here/runners/hello.sh"

step "Make two jobs of it with job new (--shared pins the stored runner by its digest)"
for name in silicon germanium; do
    httk workflow job new "$ws" --runner "$here/runners/hello.sh" --shared --step relax \
        --input "element=$name" --tag "$name-relax" --placement project-a/00
done

step "Or let job new --print write a payload's job.json, and submit the payload yourself"
mkdir -p "$payloads/carbon"
httk workflow job new "$ws" --runner "$here/runners/hello.sh" --shared --step relax \
    --input element=carbon --tag carbon-relax --print > "$payloads/carbon/job.json"
cat "$payloads/carbon/job.json"
httk workflow job submit "$ws" "$payloads/carbon" --placement project-b

step "Submitting the same job again is harmless"
httk workflow job submit "$ws" "$payloads/carbon" --placement project-b

step "Two workflows that fan out and join: one written in Python (@step), one in Bash"
httk workflow job new "$ws" --runner "$here/python-fanout/runner.py" --step prepare --workdir isolated \
    --tag python-strains --priority 400 --placement project-c
httk workflow job new "$ws" --runner "$here/bash-fanout/runner.sh" --step prepare --workdir isolated \
    --tag bash-strains --priority 400 --placement project-c

step "Before running: five submitted markers"
(cd "$ws" && find .httk-workflow/state -type f | sort)

step "Run a task manager until there is nothing left to do"
httk workflow run "$ws" --workers 2

step "After: every marker moved to succeeded, at the same placement (children included)"
(cd "$ws" && find .httk-workflow/state -type f | sort)

step "What one job printed, kept in its payload"
cat "$ws"/project-b/carbon-relax--*/logs/stdio.log

step "The fan-out parents gathered their children's results after the join"
cat "$ws"/project-c/python-strains--*/logs/stdio.log
httk workflow job log "$ws" bash-strains

step "The whole workspace at a glance"
httk workflow workspace status "$ws"

step "Why a job is where it is (any state: here a finished one)"
httk workflow job why "$ws" carbon-relax

step "Every marker checked against its journal frame, and what a collection would free"
httk workflow workspace fsck "$ws"
httk workflow workspace gc --dry-run "$ws"

step "The payloads, legible with ls (children sit beside their parent)"
(cd "$ws" && find . -path ./.httk-workflow -prune -o -name job.json -print | sort)

printf '\nworkspace kept at %s\n' "$ws"
