"""Builders of synthetic httk v1 task trees, written for these tests (the v1 grammar of the reference).

:func:`make_task` creates one task directory with an executable ``ht_steps`` (or ``ht_run``), its run
directory files and its mtime; :func:`scripted` one whose step script follows a plan of exit codes
(:func:`trace` lists the steps it ran); :func:`fixture_tree` builds the realistic tree of the reference's §5
recipe (fresh, between steps, parent with subtasks, spawner, broken, abandoned with transactions, live,
terminal, half-published and hidden entries), each task keyed by its id in the returned mapping.
"""

from __future__ import annotations

import bz2
import os
import time
from collections.abc import Mapping
from pathlib import Path

DEAD_OWNER = "tskmgr-2024-01-01_00_00_00_12345"
LIVE_OWNER = "tskmgr-2099-01-01_00_00_00_999"

STEPS = r"""#!/bin/bash
# Test step script: start -> second -> finished; spawn makes two subtasks; collect finishes.
cd "${HT_TASK_CURRENT_DIR:-.}" || exit 1
STEP="$1"
[ -e ht.nextstep ] && STEP="$(cat ht.nextstep)"
echo "ran step=$STEP in $PWD" >> "$HT_TASK_TOP_DIR/fixture.trace"
case "$STEP" in
  start) echo second > ht.nextstep; exit 2 ;;
  second|step3|collect) echo ht_finished > ht.nextstep; exit 10 ;;
  spawn)
    for s in s1 s2; do
      d="ht.tmp.task.any.$s.start.0.none.2.waitstart"
      mkdir -p "$d"; cp ../ht_steps "$d/"; mv "$d" "ht.task.any.$s.start.0.none.2.waitstart"
    done
    echo collect > ht.nextstep; exit 3 ;;
  freeze) exit 0 ;;
  *) echo ht_broken > ht.nextstep; exit 4 ;;
esac
"""


def make_task(
    parent: Path,
    name: str,
    *,
    script: str | None = STEPS,
    program: str = "ht_steps",
    files: Mapping[str, str | bytes] | None = None,
    age: float | None = None,
) -> Path:
    """Create the task directory ``parent/name`` and return its path.

    ``files`` maps task-relative paths (``ht.run.current/ht.nextstep``) to contents; their directories
    are created. ``script`` is written executable as ``program`` (None writes no program). ``age`` sets
    the directory's mtime that many seconds in the past, last, as v1 liveness is read from it.
    """
    task = parent / name
    task.mkdir(parents=True)
    if script is not None:
        (task / program).write_text(script)
        (task / program).chmod(0o755)
    for relative, content in (files or {}).items():
        target = task / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    if age is not None:
        set_age(task, age)
    return task


# A step script driven by the test: the task's plan.<step> holds "<exit code> [next step]" (or "kill").
SCRIPTED = r"""#!/bin/bash
cd "$HT_TASK_CURRENT_DIR" || exit 1
echo "$1" >>"$HT_TASK_TOP_DIR/trace"
read -r code next <"$HT_TASK_TOP_DIR/plan.$1" || exit 64
[ -z "$next" ] || echo "$next" >ht.nextstep
[ "$code" != kill ] || kill -KILL $$
exit "$code"
"""


def scripted(
    parent: Path,
    name: str,
    plan: dict[str, str],
    *,
    files: dict[str, str] | None = None,
    age: float | None = None,
) -> Path:
    """A task whose SCRIPTED ht_steps follows ``plan``: step -> "<exit code> [next step]"."""
    planned = {f"plan.{step}": f"{line}\n" for step, line in plan.items()}
    return make_task(parent, name, script=SCRIPTED, files={**planned, **(files or {})}, age=age)


def trace(task: Path) -> list[str]:
    path = task / "trace"
    return path.read_text().split() if path.exists() else []


def set_age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def fixture_tree(root: Path) -> dict[str, Path]:
    """The reference's §5 tree below ``root``; returns each task's path by its id."""
    root.mkdir(parents=True, exist_ok=True)
    made: dict[str, Path] = {}
    made["twostep"] = make_task(
        root, "ht.task.any.twostep.start.0.unclaimed.3.waitstart", files={"input.txt": "input\n"}
    )
    made["between"] = make_task(
        root,
        "ht.task.any.between.second.0.unclaimed.3.waitstep",
        files={
            "ht.run.current/ht.nextstep": "second\n",
            "ht.run.current/ht.vars": "FOO=1\n",
            "ht.run.current/result1": "step1 output\n",
            "ht.taskmgr.stdout": "(log of step 1)\n",
        },
    )
    parent = make_task(
        root,
        "ht.task.any.parent.collect.0.unclaimed.3.waitsubtasks",
        files={"ht.run.current/ht.nextstep": "collect\n", "ht.taskmgr.stdout": "(log of spawn step)\n"},
    )
    made["parent"] = parent
    made["sub1"] = make_task(
        parent / "ht.run.current",
        "ht.task.any.sub1.start.0.none.2.waitstart",
        files={"task_data": "sub1 x\n"},
    )
    made["sub2"] = make_task(
        parent / "ht.run.current",
        "ht.task.any.sub2.start.0.unclaimed.2.finished",
        files={
            "task_data": "sub2 y\n",
            "ht.run.2024-01-01_10.00.00/ht.nextstep": "ht_finished\n",
            "ht.run.2024-01-01_10.00.00/ht.taskmgr.stdout.bz2": bz2.compress(b"(log)\n"),
        },
    )
    made["spawner"] = make_task(root, "ht.task.any.spawner.spawn.0.unclaimed.3.waitstart")
    made["bad"] = make_task(
        root,
        "ht.task.any.bad.relax1.0.unclaimed.3.broken",
        files={"ht.reason": "Task gave 'broken' as return code.\n", "ht.taskmgr.stdout": "(log)\n"},
    )
    (made["bad"] / "ht.run.current").mkdir()
    made["txn"] = make_task(
        root,
        f"ht.task.any.txn.step2.1.{DEAD_OWNER}.3.running",
        files={
            "ht.run.current/ht.nextstep": "step2\n",
            "ht.run.current/oldfile": "old\n",
            "ht.run.current/ht.atomic.0/ht.nextstep": "step3\n",
            "ht.run.current/ht.atomic.0/ht.vars": "X=5\n",
            "ht.run.current/ht.atomic.0/newfile": "new\n",
            "ht.run.current/ht.atomic.0/ht.atommv.oldfile": "oldfile.renamed\n",
            "ht.run.current/ht.tmp.atomic.1/junk": "half-written\n",
            "ht.taskmgr.stdout": "(log)\n",
        },
        age=2 * 3600,
    )
    made["live"] = make_task(root, f"ht.task.any.live.relax.0.{LIVE_OWNER}.3.running", age=0)
    (made["live"] / "ht.run.current").mkdir()
    set_age(made["live"], 0)
    made["done"] = make_task(
        root,
        "ht.task.any.done.second.0.unclaimed.3.finished",
        files={
            "ht.run.2024-01-01_12.00.00/ht.nextstep": "ht_finished\n",
            "ht.run.2024-01-01_12.00.00/ht.taskmgr.stdout.bz2": bz2.compress(b"(log)\n"),
        },
    )
    made["slow"] = make_task(
        root,
        "ht.task.any.slow.start.0.unclaimed.3.timeout",
        files={"ht.reason": "Task timed out.\n", "ht.run.current/.keep": ""},
    )
    made["odd"] = make_task(
        root,
        "ht.task.any.odd.start.0.unclaimed.3.stopped",
        files={
            "ht.reason": "Task returned non-defined error code (1). This usually means something "
            "unexpected have returned an error.\n",
            "ht.run.current/.keep": "",
        },
    )
    (root / "ht.tmp.task.any.half.start.0.none.3.waitstart").mkdir()
    (root / "ht.tmp.staging/ht.task.any.hidden.start.0.unclaimed.3.waitstart").mkdir(parents=True)
    (root / "ht.taskmgrstats").mkdir()
    (root / "ht.taskmgrstats" / f"alive.{LIVE_OWNER}").touch()
    return made
