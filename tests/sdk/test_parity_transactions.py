"""Python and Bash transactions: the same bundle, the same refusals, and the same committed data/.

Each language stages into its own copy of one transactional attempt layout. The published ``outcome.ready/``
trees are compared entry by entry -- relative path, file bytes, file type and mode, directories included --
after the fresh UUIDs (the transaction id, child ids) are replaced by their order of first appearance.
The modes are compared under umask 022, 002 and 077 as well.
Bash runs in the workdir with relative sources, Python with absolute ones: both must stage the same thing.

The last test runs one two-step workflow written in both languages under the real manager, in a workspace
with transactional-data-v1: their committed outcomes and their data/ trees must end identical.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace, init, probe_marker
from httk.workflow.engine.manager._manager import Manager
from httk.workflow.engine.manager._state import ManagerConfig
from httk.workflow.engine.publish._transaction_manifest import load_manifest
from httk.workflow.protocol._digest import tree_digest
from httk.workflow.sdk import Attempt, OutcomeAlreadyPublishedError, Transaction, TransactionError

from tests.engine.publish.test_transactions import write_tree
from tests.engine.publish.test_transactions_e2e import submit_transactional
from tests.sdk.attempts import Layout
from tests.sdk.test_children_parity import FIXED, REGISTER, python_attempt, run_bash
from tests.sdk.test_children_parity import layout as parent_layout
from tests.sdk.test_workflow_parity import _committed_outcomes

HOSTILE = 'q"uo\\te é\n\t\x01\x1f 🧪 %s *.txt'
"""A file name with quotes, a backslash, control characters, non-ASCII, a format and a glob character."""

SOURCE_TREE: dict[str, bytes | None] = {
    "a.txt": b"a\x00binary\xff",
    "a-c": b"sorts between a and a/",
    "a/z": b"z",
    "empty": None,
    "sub/b.txt": b"b",
    f"sub/{HOSTILE}": 'hostile "content"\n\t\x1f é\n'.encode(),
    "run.sh": b"#!/bin/sh\necho run\n",
}
"""A source tree (None: a directory) whose bytewise order interleaves a directory with its siblings."""

MODES = {"run.sh": 0o751, "a/z": 0o4755}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def source_tree(root: Path) -> Path:
    """SOURCE_TREE below ``root``, with MODES."""
    write_tree(root, SOURCE_TREE)
    for relative, mode in MODES.items():
        (root / relative).chmod(mode)
    return root


def layout(root: Path, *, durable: bool = False) -> Layout:
    """A transactional attempt (data generation 5) with a parent job.json and ``run/src``, ``run/energy``."""
    attempt = parent_layout(root, durable=durable, data={"mode": "transactional"})
    context = {**attempt.context, "data_generation": 5, "data_dir": str(attempt.job_dir / "data")}
    attempt.context_path.write_text(json.dumps(context, indent=2, ensure_ascii=False) + "\n")
    source_tree(attempt.workdir / "src")
    (attempt.workdir / "energy").write_bytes(b"-10.8\n")
    (attempt.workdir / "energy").chmod(0o640)
    return dataclasses.replace(attempt, context=context)


def published(attempt: Layout) -> dict[str, tuple[str, bytes, int]]:
    """Every entry below outcome.ready: relative path -> (type, normalized bytes, mode)."""
    ready = attempt.control_dir / "outcome.ready"
    order: dict[str, str] = {}

    def normal(text: str) -> str:
        def name(match: re.Match[str]) -> str:
            found = match.group(0)
            return found if found in FIXED else order.setdefault(found, f"<uuid-{len(order)}>")

        return _UUID.sub(name, text)

    for first in ("outcome.json", "children/spawn.json", "transaction/manifest.json"):
        if (ready / first).exists():
            normal((ready / first).read_text())
    entries: dict[str, tuple[str, bytes, int]] = {}
    for path in sorted(ready.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            entry = ("dir", b"", stat.S_IMODE(mode))
        else:
            data = path.read_bytes()
            if path.name.endswith(".json"):
                data = normal(data.decode()).encode()
            entry = ("file" if stat.S_ISREG(mode) else "other", data, stat.S_IMODE(mode))
        entries[normal(str(path.relative_to(ready)))] = entry
    return entries


def q(text: str) -> str:
    return shlex.quote(text)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- the same calls, staged byte for byte ------------------------------------------------------------
def every_operation(a: Attempt) -> None:
    tx = a.transaction()
    tx.make_dir("results/relax", parents=True)
    tx.put_file("results/relax/energy.json", b'{"e":-1}\n', op_id="energy")
    tx.put_file("results/relax/energy", a.workdir / "energy", require_absent=True)
    tx.put_tree("tree", a.workdir / "src")
    tx.replace_tree("current", a.workdir / "src", expected_sha256="1" * 64)
    tx.remove("scratch", missing_ok=True, expected_sha256="2" * 64)
    tx.remove("old")
    a.succeed(message="done", priority=4)


def hostile_names(a: Attempt) -> None:
    tx = a.transaction()
    tx.make_dir(HOSTILE)
    tx.put_file(f"{HOSTILE}/{HOSTILE}", HOSTILE.encode())
    tx.put_tree(f"{HOSTILE}/tree", a.workdir / "src" / "sub")
    tx.remove("é/\\", missing_ok=True, op_id="r.free-1_x")
    a.advance("next", resources={"procs": 2}, message=HOSTILE)


def with_children(a: Attempt) -> None:
    a.spawn("relax", label="one")
    tx = a.transaction()
    tx.put_file("joined", b"")
    a.spawn("relax", label="two")
    a.wait("gather", priority=3, message="waiting")


def ids_skip_taken_ones(a: Attempt) -> None:
    tx = a.transaction()
    tx.put_file("x", b"x", op_id="op2")
    tx.make_dir("d")
    tx.make_dir("d/e")
    a.succeed()


def empty_transaction(a: Attempt) -> None:
    a.transaction()
    a.succeed()


def discarded_by_retry(a: Attempt) -> None:
    a.transaction().put_file("x", b"x")
    a.retry("again")


BEGIN = "httk_workflow_transaction_begin\n"
SCENARIOS: dict[str, tuple[Callable[[Attempt], None], str]] = {
    "every operation": (
        every_operation,
        BEGIN + "httk_workflow_make_dir results/relax --parents\n"
        "httk_workflow_put_file results/relax/energy.json --op-id energy --content '{\"e\":-1}'$'\\n'\n"
        "httk_workflow_put_file results/relax/energy energy/ --require-absent\n"  # pathlib drops the /
        "httk_workflow_put_tree tree src/\n"
        f"httk_workflow_replace_tree current ./src --expected-sha256={'1' * 64}\n"
        f"httk_workflow_remove scratch --missing-ok --expected-sha256 {'2' * 64}\n"
        "httk_workflow_remove old\n"
        "httk_workflow_succeed --message done --priority 4\n",
    ),
    "hostile names": (
        hostile_names,
        BEGIN + f"httk_workflow_make_dir {q(HOSTILE)}\n"
        f"httk_workflow_put_file {q(HOSTILE + '/' + HOSTILE)} --content {q(HOSTILE)}\n"
        f"httk_workflow_put_tree {q(HOSTILE + '/tree')} src/sub\n"
        "httk_workflow_remove 'é/\\' --missing-ok --op-id r.free-1_x\n"
        f"httk_workflow_advance next --resource procs=2 --message {q(HOSTILE)}\n",
    ),
    "with children, published by wait": (
        with_children,
        "httk_workflow_spawn one relax\n" + BEGIN + "httk_workflow_put_file joined --content ''\n"
        "httk_workflow_spawn two relax\nhttk_workflow_wait gather --priority 3 --message waiting\n",
    ),
    "ids skip the ones taken": (
        ids_skip_taken_ones,
        BEGIN + "httk_workflow_put_file x --content x --op-id op2\nhttk_workflow_make_dir d\n"
        "httk_workflow_make_dir d/e\nhttk_workflow_succeed\n",
    ),
    "an empty transaction": (empty_transaction, BEGIN + "httk_workflow_succeed\n"),
    "discarded by retry": (
        discarded_by_retry,
        BEGIN + "httk_workflow_put_file x --content x\nhttk_workflow_retry again\n",
    ),
}


@pytest.mark.parametrize("durable", [False, True], ids=["plain", "durable"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_both_languages_stage_the_same_bundle(tmp_path: Path, name: str, durable: bool) -> None:
    python_calls, bash_calls = SCENARIOS[name]
    in_python = layout(tmp_path / "py", durable=durable)
    python_calls(python_attempt(in_python))
    in_bash = layout(tmp_path / "sh", durable=durable)
    result = run_bash(in_bash, REGISTER + 'cd "$HTTK_WORKFLOW_WORKDIR"\n' + bash_calls)
    assert result.returncode == 0, result.stderr
    assert published(in_bash) == published(in_python)
    for attempt in (in_python, in_bash):
        assert [p.name for p in attempt.control_dir.iterdir()] == ["context.json", "outcome.ready"]


DOCUMENTS = ("outcome.json", "spawn.json", "job.json")
"""Published documents: created 0666 less the umask, as a Bash redirection creates them."""


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077], ids=["022", "002", "077"])
@pytest.mark.parametrize("name", ["every operation", "with children, published by wait"])
def test_published_modes_follow_the_umask_alike(tmp_path: Path, name: str, mask: int) -> None:
    python_calls, bash_calls = SCENARIOS[name]
    in_python, in_bash = layout(tmp_path / "py"), layout(tmp_path / "sh")
    previous = os.umask(mask)  # this process's, and so the Bash child's
    try:
        python_calls(python_attempt(in_python))
        result = run_bash(in_bash, REGISTER + 'cd "$HTTK_WORKFLOW_WORKDIR"\n' + bash_calls)
    finally:
        os.umask(previous)
    assert result.returncode == 0, result.stderr
    entries = published(in_python)
    assert published(in_bash) == entries
    modes = {path: mode for path, (kind, _, mode) in entries.items() if kind == "file"}
    assert {mode for path, mode in modes.items() if path.endswith(DOCUMENTS)} == {0o666 & ~mask}
    assert modes["transaction/manifest.json"] == 0o644 & ~mask
    assert {mode for path, (kind, _, mode) in entries.items() if kind == "dir"} == {0o777 & ~mask}


def test_the_bundle_passes_the_managers_rules_and_digests(tmp_path: Path) -> None:
    attempt = layout(tmp_path)
    result = run_bash(attempt, 'cd "$HTTK_WORKFLOW_WORKDIR"\n' + SCENARIOS["every operation"][1])
    assert result.returncode == 0, result.stderr
    ready = attempt.control_dir / "outcome.ready"
    assert json.loads((ready / "outcome.json").read_bytes())["expected_data_generation"] == 5
    manifest = load_manifest(ready / "transaction", expected_data_generation=5)
    assert [op.op for op in manifest.operations] == [
        "make-dir", "put-file", "put-file", "put-tree", "replace-tree", "remove", "remove",
    ]  # fmt: skip
    tree = ready / "transaction/payload/tree"
    assert manifest.operations[3].sha256 == tree_digest(tree) == tree_digest(attempt.workdir / "src")
    assert manifest.operations[2].sha256 == sha(b"-10.8\n")
    assert (tree / "run.sh").stat().st_mode & 0o7777 == 0o751
    assert (tree / "a/z").stat().st_mode & 0o7777 == 0o755  # the set-user-id bit is not carried
    assert (tree / "sub" / HOSTILE).read_bytes() == SOURCE_TREE[f"sub/{HOSTILE}"]
    assert {os.stat(p).st_ino for p in tree.rglob("*") if p.is_file()}.isdisjoint(
        os.stat(p).st_ino for p in (attempt.workdir / "src").rglob("*") if p.is_file()
    )


def test_a_source_tree_holding_a_symlink_or_fifo_is_refused_when_published(tmp_path: Path) -> None:
    for kind, make in (("a symbolic link", lambda p: p.symlink_to("/etc")), ("FIFO", os.mkfifo)):
        attempt = layout(tmp_path / kind)
        make(attempt.workdir / "src" / "sub" / "special")
        with pytest.raises(TransactionError, match=kind) as raised:
            a = python_attempt(attempt)
            a.transaction().put_tree("t", attempt.workdir / "src", op_id="t")
            a.succeed()
        put = f"httk_workflow_put_tree t {q(str(attempt.workdir / 'src'))} --op-id t\n"
        result = run_bash(attempt, f"{BEGIN}{put}httk_workflow_succeed\n")
        assert result.returncode == 2
        assert result.stderr.endswith(f"httk_workflow_succeed: {raised.value}\n")
        assert os.listdir(attempt.control_dir) == ["context.json"]


# -- the same refusals, worded alike ---------------------------------------------------------------
def refused(*calls: Callable[[Transaction], object]) -> Callable[[Transaction], None]:
    def run(tx: Transaction) -> None:
        for call in calls:
            call(tx)

    return run


BAD_CALLS: list[tuple[str, Callable[[Transaction], Any], str, bool]] = [
    ("path", lambda tx: tx.make_dir("/etc/passwd"), "httk_workflow_make_dir /etc/passwd", True),
    ("path", lambda tx: tx.make_dir("a//b"), "httk_workflow_make_dir a//b", True),
    ("path", lambda tx: tx.make_dir("a/./b"), "httk_workflow_make_dir a/./b", True),
    ("path", lambda tx: tx.remove("../x"), "httk_workflow_remove ../x", True),
    ("path", lambda tx: tx.put_file("a/", b""), "httk_workflow_put_file a/ --content ''", True),
    ("path", lambda tx: tx.make_dir(""), "httk_workflow_make_dir ''", True),
    ("path", lambda tx: tx.make_dir(".httk-job/x"), "httk_workflow_make_dir .httk-job/x", True),
    ("path", lambda tx: tx.make_dir("x/.httk-workflow"), "httk_workflow_make_dir x/.httk-workflow", True),
    ("path", lambda tx: tx.make_dir(".httk-attempt.1"), "httk_workflow_make_dir .httk-attempt.1", True),
    ("path", lambda tx: tx.make_dir("é" * 128), f"httk_workflow_make_dir {'é' * 128}", True),
    ("path", lambda tx: tx.make_dir("bad\udcff"), "httk_workflow_make_dir $'bad\\xff'", False),
    ("op_id", lambda tx: tx.make_dir("x", op_id="bad/id"), "httk_workflow_make_dir x --op-id bad/id", True),
    ("op_id", lambda tx: tx.make_dir("x", op_id=""), "httk_workflow_make_dir x --op-id ''", True),
    (
        "op_id",
        refused(lambda tx: tx.make_dir("x", op_id="d"), lambda tx: tx.make_dir("y", op_id="d")),
        "httk_workflow_make_dir x --op-id d\nhttk_workflow_make_dir y --op-id d",
        True,
    ),
    (
        "expected_sha256",
        lambda tx: tx.remove("x", expected_sha256="A" * 64),
        f"httk_workflow_remove x --expected-sha256 {'A' * 64}",
        True,
    ),
    (
        "require_absent",
        lambda tx: tx.put_file("x", b"1", require_absent=True, expected_sha256="0" * 64),
        f"httk_workflow_put_file x --content 1 --require-absent --expected-sha256 {'0' * 64}",
        True,
    ),
    (
        "path",
        refused(lambda tx: tx.make_dir("r"), lambda tx: tx.remove("r")),
        "httk_workflow_make_dir r\nhttk_workflow_remove r",
        True,
    ),
    (
        "path",
        refused(lambda tx: tx.put_file("s", b""), lambda tx: tx.make_dir("s/x/y", parents=True)),
        "httk_workflow_put_file s --content ''\nhttk_workflow_make_dir s/x/y --parents",
        True,
    ),
    (
        "path",
        refused(lambda tx: tx.put_file("late/x", b""), lambda tx: tx.make_dir("late")),
        "httk_workflow_put_file late/x --content ''\nhttk_workflow_make_dir late",
        True,
    ),
    (
        "path",
        refused(lambda tx: tx.put_file("late/x", b""), lambda tx: tx.remove("late")),
        "httk_workflow_put_file late/x --content ''\nhttk_workflow_remove late",
        True,
    ),
    ("source", lambda tx: tx.put_file("x", "missing"), "httk_workflow_put_file x missing", False),
    ("source", lambda tx: tx.put_file("x", "src"), "httk_workflow_put_file x src", True),
    ("source", lambda tx: tx.put_file("x", "src/"), "httk_workflow_put_file x src/", True),
    ("source", lambda tx: tx.put_file("x", ""), "httk_workflow_put_file x ''", True),
    ("source_dir", lambda tx: tx.put_tree("x", "energy"), "httk_workflow_put_tree x energy", True),
    ("source_dir", lambda tx: tx.replace_tree("x", "energy"), "httk_workflow_replace_tree x energy", True),
]


@pytest.mark.parametrize("case", BAD_CALLS, ids=[case[2].rsplit("\n", 1)[-1] for case in BAD_CALLS])
def test_invalid_operations_are_refused_alike_and_change_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: tuple[str, Callable[[Transaction], Any], str, bool],
) -> None:
    argument, python_call, bash_calls, same_words = case
    attempt = layout(tmp_path)
    monkeypatch.chdir(attempt.workdir)
    tx = python_attempt(attempt).transaction()
    with pytest.raises(TransactionError) as raised:
        python_call(tx)
    assert raised.value.argument == argument
    *before, last = bash_calls.split("\n")
    function = last.split()[0]
    script = (
        f'cd "$HTTK_WORKFLOW_WORKDIR"\n{BEGIN}{"".join(line + chr(10) for line in before)}status=0\n'
        f'{last} || status=$?\nhttk_workflow_transaction_operation_ids ids\nprintf "%s|%s" "$status" "$ids"\n'
    )
    result = run_bash(attempt, script)
    assert result.stdout == f"2|{' '.join(tx.operation_ids)}", result.stderr
    assert f"argument {argument} " in result.stderr
    if same_words:
        assert result.stderr == f"{function}: {raised.value}\n"


def test_operations_need_a_transactional_job_and_an_open_transaction(tmp_path: Path) -> None:
    attempt = parent_layout(tmp_path)  # data_generation null: not transactional
    with pytest.raises(TransactionError, match="not transactional") as raised:
        python_attempt(attempt).transaction()
    result = run_bash(attempt, "status=0\nhttk_workflow_transaction_begin || status=$?\necho $status\n")
    assert (result.stdout, result.stderr) == ("2\n", f"httk_workflow_transaction_begin: {raised.value}\n")
    result = run_bash(attempt, "httk_workflow_make_dir x\n")
    assert result.returncode == 2 and "httk_workflow_transaction_begin first" in result.stderr


# -- after the outcome, refused alike ----------------------------------------------------------------
LATE_CALLS: list[tuple[str, Callable[[Attempt, Transaction], object], str]] = [
    ("transaction", lambda a, tx: a.transaction(), "httk_workflow_transaction_begin"),
    ("make_dir", lambda a, tx: tx.make_dir("late"), "httk_workflow_make_dir late"),
    ("make_dir", lambda a, tx: tx.make_dir("/etc"), "httk_workflow_make_dir /etc"),  # before any argument
    ("put_file", lambda a, tx: tx.put_file("late", b"x"), "httk_workflow_put_file late --content x"),
    ("put_file", lambda a, tx: tx.put_file("late", "missing"), "httk_workflow_put_file late missing"),
    ("put_tree", lambda a, tx: tx.put_tree("late", "src"), "httk_workflow_put_tree late src"),
    ("replace_tree", lambda a, tx: tx.replace_tree("late", "src"), "httk_workflow_replace_tree late src"),
    ("remove", lambda a, tx: tx.remove("x"), "httk_workflow_remove x"),  # x: also the staged put's path
]
PUBLISHERS: dict[str, tuple[Callable[[Attempt], None], str]] = {
    "staged by succeed": (lambda a: a.succeed(), "httk_workflow_succeed"),
    "discarded by fail": (lambda a: a.fail("x.broken", "broke"), "httk_workflow_fail x.broken broke"),
}


@pytest.mark.parametrize("publisher", list(PUBLISHERS))
@pytest.mark.parametrize("case", LATE_CALLS, ids=[case[2] for case in LATE_CALLS])
def test_transaction_calls_after_the_outcome_are_refused_alike_and_change_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: tuple[str, Callable[[Attempt, Transaction], object], str],
    publisher: str,
) -> None:
    operation, python_call, bash_call = case
    publish_python, publish_bash = PUBLISHERS[publisher]
    attempt = layout(tmp_path)
    monkeypatch.chdir(attempt.workdir)
    a = python_attempt(attempt)
    tx = a.transaction()
    tx.put_file("x", b"x")
    publish_python(a)
    first = published(attempt)
    with pytest.raises(OutcomeAlreadyPublishedError) as raised:
        python_call(a, tx)
    assert raised.value.operation == operation
    assert tx.operation_ids == ("op1",) and published(attempt) == first
    shutil.rmtree(attempt.control_dir / "outcome.ready")  # the same control directory, named alike
    script = (
        f'{REGISTER}cd "$HTTK_WORKFLOW_WORKDIR"\n{BEGIN}httk_workflow_put_file x --content x\n'
        f"{publish_bash}\n"
        f"httk_workflow_transaction_operation_ids before\nstatus=0\n{bash_call} || status=$?\n"
        'httk_workflow_transaction_operation_ids after\nprintf "%s|%s|%s" "$status" "$before" "$after"\n'
    )
    result = run_bash(attempt, script)
    ids = "op1" if publisher == "staged by succeed" else ""  # Bash forgets a discarded transaction
    assert result.stdout == f"3|{ids}|{ids}", result.stderr
    assert result.stderr == f"{bash_call.split()[0]}: {raised.value}\n"
    assert published(attempt) == first


# -- one workflow in both languages under the real manager -------------------------------------------
FIRST_TREE: dict[str, bytes | None] = {"x y/é.txt": b"\x00first\n", HOSTILE: b"hostile\n", "empty": None}
SECOND_TREE: dict[str, bytes | None] = {"b": b"second\n", "a/b": b"deeper\n"}
ENERGY = b'{"energy": -10.8}\n'

PYTHON_RUNNER = f"""#!{sys.executable}
from pathlib import Path

from httk.workflow.sdk import Attempt, dispatch, step


def write_tree(root: Path, tree: dict) -> Path:
    for relative, content in tree.items():
        path = root / relative
        if content is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    return root


@step
def write(a: Attempt) -> None:
    tx = a.transaction()
    tx.make_dir("results/relax", parents=True)
    tx.put_file("results/relax/energy.json", {ENERGY!r})
    tx.put_tree("tree", write_tree(a.workdir / "first", {FIRST_TREE!r}))
    tx.make_dir("old")
    tx.remove("nothing", missing_ok=True)
    a.advance("rework", message="wrote")


@step
def rework(a: Attempt) -> None:
    (a.workdir / "run.sh").write_bytes(b"#!/bin/sh\\n")
    (a.workdir / "run.sh").chmod(0o750)
    tx = a.transaction()
    tx.replace_tree("tree", write_tree(a.workdir / "second", {SECOND_TREE!r}),
                    expected_sha256=a.setting("tree.digest"))
    tx.remove("results/relax/energy.json", expected_sha256=a.setting("energy.digest"))
    tx.put_file("results/run.sh", a.workdir / "run.sh", require_absent=True)
    tx.remove("old")
    a.succeed(message=str(a.data_generation))


if __name__ == "__main__":
    raise SystemExit(dispatch())
"""


def _bash_writes(root: str, tree: dict[str, bytes | None]) -> str:
    lines = []
    for relative, content in tree.items():
        path = q(f"{root}/{relative}")
        if content is None:
            lines.append(f"  mkdir -p -- {path}")
        else:
            escaped = "".join(f"\\x{byte:02x}" for byte in content)
            lines.append(f'  mkdir -p -- "$(dirname -- {path})"\n  printf %b {q(escaped)} >{path}')
    return "\n".join(lines)


BASH_RUNNER = rf"""#!/usr/bin/env bash
set -euo pipefail
# shellcheck source=/dev/null
source "$HTTK_WORKFLOW_BASH_API"
cd "$HTTK_WORKFLOW_WORKDIR"

write() {{
{_bash_writes("first", FIRST_TREE)}
  httk_workflow_transaction_begin
  httk_workflow_make_dir results/relax --parents
  httk_workflow_put_file results/relax/energy.json --content {q(ENERGY.decode())}
  httk_workflow_put_tree tree first
  httk_workflow_make_dir old
  httk_workflow_remove nothing --missing-ok
  httk_workflow_advance rework --message wrote
}}

rework() {{
  local tree_digest energy_digest generation
  printf '#!/bin/sh\n' >run.sh
  chmod 750 run.sh
{_bash_writes("second", SECOND_TREE)}
  httk_workflow_setting tree_digest tree.digest
  httk_workflow_setting energy_digest energy.digest
  httk_workflow_context generation data_generation
  httk_workflow_transaction_begin
  httk_workflow_replace_tree tree second --expected-sha256 "$tree_digest"
  httk_workflow_remove results/relax/energy.json --expected-sha256 "$energy_digest"
  httk_workflow_put_file results/run.sh run.sh --require-absent
  httk_workflow_remove old
  httk_workflow_succeed --message "$generation"
}}

httk_workflow_register_step write
httk_workflow_register_step rework
httk_workflow_dispatch
"""


def _data(ws: Workspace, job: dict[str, Any]) -> dict[str, tuple[bytes | None, int]]:
    root = ws.root / "parity" / f"{job['tag']}--{job['id']}" / "data"
    return {
        str(path.relative_to(root)): (path.read_bytes() if path.is_file() else None, path.stat().st_mode)
        for path in sorted(root.rglob("*"))
    }


def test_one_workflow_in_both_languages_commits_the_same_data(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=True, extensions=("transactional-data-v1",))
    write_tree(tmp_path / "first", FIRST_TREE)
    inputs = {"tree.digest": tree_digest(tmp_path / "first"), "energy.digest": sha(ENERGY)}
    python_job = submit_transactional(ws, PYTHON_RUNNER, "parity", "python", inputs)
    bash_job = submit_transactional(ws, BASH_RUNNER, "parity", "bash", inputs)
    Manager(ws, ManagerConfig(workers=2)).run()
    outcomes = _committed_outcomes(ws, python_job)
    assert outcomes == _committed_outcomes(ws, bash_job)
    assert [(o["action"], o["expected_data_generation"], o["message"]) for o in outcomes] == [
        ("advance", 0, "wrote"), ("succeed", 1, "1"),
    ]  # fmt: skip
    for job in (python_job, bash_job):  # each committed transaction advanced the data generation
        marker = probe_marker(ws, "parity", f"{job['tag']}--{job['id']}")
        assert marker is not None and ws.reader.read(str(marker.name.ref))["data_generation"] == 2
    data = _data(ws, python_job)
    assert data == _data(ws, bash_job)
    assert sorted(data) == [
        "results", "results/relax", "results/run.sh", "tree", "tree/a", "tree/a/b", "tree/b",
    ]  # fmt: skip
    assert data["results/run.sh"] == (b"#!/bin/sh\n", stat.S_IFREG | 0o750)
