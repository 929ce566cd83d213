#!/usr/bin/env bash
# The main demo: a real workspace, a shared runner, jobs made with `job new` at several placements, a
# task manager running them to the end, two fan-out workflows (Python @step and Bash) whose children
# are joined, and the result shown the way an operator sees it; then an httk v1 task tree imported into
# the same workspace and run to the end; and last the packaged VASP workflows against the mock VASP, one
# of them remedied, their results collected and a relaxation plotted; and one job carried to a second
# workspace as a sealed bundle.
# Run it through `./dev demo` (which puts httk on PATH).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ws=${HTTK_DEMO_WORKSPACE:-$(mktemp -d)/demo-workspace}
payloads=$(mktemp -d)
trap 'rm -rf "$payloads"' EXIT
# The names the demo registers go to a registry of its own (unless HTTK_CONFIG_HOME names one), so that
# running it leaves your own registry alone and a second run finds its names free again.
export HTTK_CONFIG_HOME=${HTTK_CONFIG_HOME:-$(mktemp -d)/config}
export HTTK_DATA_HOME=${HTTK_DATA_HOME:-$HTTK_CONFIG_HOME/data}

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

step "An httk v1 campaign: a task tree as v1's task managers left it"
v1tree=$ws-v1-tree
bash "$here/v1-tree/make-v1-tree.sh" "$v1tree"
httk workflow v1 status "$v1tree"

step "Import it: each runnable top-level task becomes a job; the live one and a bad name are left, and said so"
imported=0
httk workflow v1 import "$ws" "$v1tree" --include-finished || imported=$?
if [ "$imported" -ne 1 ]; then
    printf 'the import was to leave the live task behind and exit 1, not %s\n' "$imported" >&2
    exit 1
fi

step "Run the v1 tasks to the end: one ht_steps step per activation, subtasks as child jobs"
httk workflow run "$ws" --pool any

step "Which job each v1 task became, and the v1 picture in the payloads (a task's name is its status)"
httk workflow v1 status "$v1tree" --workspace "$ws" | sed -n '/^jobs in /,$p'
(cd "$ws/v1" && find . -mindepth 3 -maxdepth 3 -path './*/task/ht.task.*' -printf '%P\n' | sort)

step "A job names its v1 origin; a broken task's ht.reason is its failure"
httk workflow job show "$ws" txn
httk workflow job show "$ws" bad | grep -E '^(job|name|failure) '

step "Packaged VASP workflows: a job from a name and a POSCAR, no runner to write (here vasp-relax)"
httk workflow workflows list | sed -n '/^vasp-relax:/,/^$/p'
cat > "$payloads/Si.POSCAR" <<'POSCAR'
Si2, rattled, its cell 10 % too large
5.6
0.0 0.5 0.5
0.5 0.0 0.5
0.5 0.5 0.0
Si
2
Direct
0.01 0.02 0.00
0.25 0.24 0.26
POSCAR

step "They keep their results in transactional data/: job new says how to enable it where it is off"
refused=0
httk workflow job new "$ws" --workflow vasp-relax --input "structure=$payloads/Si.POSCAR" || refused=$?
if [ "$refused" -ne 2 ]; then
    printf 'job new was to refuse a workspace without transactional data with exit status 2, not %s\n' \
        "$refused" >&2
    exit 1
fi
httk workflow workspace extension enable "$ws" transactional-data-v1

step "VASP here is httk-mock-vasp, a model VASP; the POTCARs come from a library it writes"
potcars=$ws-potcars
httk-mock-vasp pseudo-library "$potcars" Si
httk workflow workspace settings set "$ws" vasp.pseudo_library "\"$potcars\""
httk workflow workspace settings set "$ws" vasp.command '"httk-mock-vasp"'

step "A relaxation, and a relaxation then a static run whose first VASP run dies of ZPOTRF"
httk workflow job new "$ws" --workflow vasp-relax --input "structure=$payloads/Si.POSCAR" \
    --tag si-relax --placement vasp
httk workflow job new "$ws" --workflow vasp-relax-static --input "structure=$payloads/Si.POSCAR" \
    --input 'vasp.command=httk-mock-vasp --fault=zpotrf*1' --tag si-relax-static --placement vasp
httk workflow run "$ws" --workers 2

step "Why it succeeded anyway: the runner found ZPOTRF, backed INCAR up, set ISYM = 0 and ran again"
httk workflow job show "$ws" si-relax-static | sed -n '/^events /,$p'

step "Every finished VASP job's results.json, read back by collect (--json and --csv hold all of it)"
httk workflow collect "$ws" --placement vasp
httk workflow collect "$ws" --placement vasp --csv |
    python3 -c 'import csv, sys
for row in csv.DictReader(sys.stdin):
    print(row["job_key"].split("--")[0], row["results.calculation"], "E0/atom =",
          row["results.energy.energy_per_atom"], "eV, VASP", row["results.provenance.vasp_version"])'

step "The relaxation plot: the energy of every ionic step, across the remedy, the repeats and the static run"
httk workflow vasp plot "$ws" si-relax-static -o "$ws-si-relax-static.png"

step "A stage plan: two relaxations, a static run on one relaxed structure, an analysis of all three"
httk workflow runner publish "$ws" --name analyse.py "$here/plan/analyse.py"
python3 - "$here/plan/si-study.json" <<'PY'
import json, sys
for stage in json.load(open(sys.argv[1]))["stages"]:
    after = ", ".join(stage.get("depends_on", [])) or "-"
    print(f"{stage['id']:<13} after {after:<38} {stage.get('workflow') or stage['runner']}")
PY
httk workflow plan submit "$ws" "$here/plan/si-study.json"
httk workflow run "$ws" --workers 2

step "plan status: every stage in spec/04's states; the coordinator paused with 'plan complete'"
httk workflow plan status "$ws" si-study
httk workflow plan log "$ws" si-study | grep -E -- '-> (ready|completed)|plan complete'
stages=$(echo "$ws"/plans/si-study/si-study--*.stages)  # the stage jobs; plan/ is the coordinator's workdir
plandir=$(echo "$ws"/plans/si-study/si-study--*/plan)
cmp "$stages"/relax-large--*/data/CONTCAR "$stages"/static-large--*/files/POSCAR &&
    echo "static-large's POSCAR is relax-large's data/CONTCAR, copied in when the coordinator started it"
cat "$stages"/analysis--*/logs/stdio.log

step "Amend a parameter of one relaxation, with a reason: the coordinator applies it as version 2"
httk workflow plan amend "$ws" si-study --type parameter_change --stage relax-large \
    --set vasp.energy_tolerance=0.005 --reason "tighten the large cell's convergence to 5 meV/atom"
httk workflow run "$ws" --workers 2

step "The cascade: relax-large, static-large after it and analysis ran again as -v2 jobs; relax-small did not"
httk workflow plan status "$ws" si-study
sed -n '/amendment amend-1/,$p' "$plandir/progress.log" | grep -Ev -- '-> (preparing|running) '
python3 - "$plandir/workflow-state.json" <<'PY'
import json, sys
[amendment] = json.load(open(sys.argv[1]))["amendments"]
print(amendment["id"], "version", amendment["version"], amendment["type"], "of", amendment["stage_id"])
print("  changes:", json.dumps(amendment["changes"]))
print("  invalidated:", ", ".join(amendment["invalidated_stages"]))
PY

step "The old outputs are kept: every stage job of both versions, beside the coordinator"
(cd "$stages" && find . -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sed 's/--.*//' | sort)
cat "$stages"/analysis-v2--*/logs/stdio.log

step "Carry a finished job to another workspace as a sealed bundle (detached-transfer-v1)"
cluster=$ws-cluster
mkdir "$payloads/bundles"
httk workflow workspace extension enable "$ws" detached-transfer-v1
httk workflow workspace init "$cluster" --name demo-cluster --extension detached-transfer-v1
httk workflow transfer detach "$ws" si-relax-- --to "$payloads/bundles"  # a key prefix: si-relax alone names si-relax-static too
httk workflow workspace status "$ws" | grep -E '^(succeeded|transferring|total) '
httk workflow transfer import "$cluster" "$payloads/bundles"/si-relax--* --placement vasp

step "It arrived with its history: job log reads across the move; the source retired its bundle"
httk workflow job log demo-cluster si-relax | tail -n 3  # demo-cluster: the name init registered
httk workflow transfer list "$ws"

printf '\nworkspace kept at %s, the v1 tree at %s, the plot at %s, the transferred job in %s\n' \
    "$ws" "$v1tree" "$ws-si-relax-static.png" "$cluster"
printf 'their names (demo, demo-cluster) are registered in HTTK_CONFIG_HOME=%s\n' "$HTTK_CONFIG_HOME"
