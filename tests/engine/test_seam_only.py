"""The mutation seam is the one way the engine touches the disk (issue 15, item 1).

Every create, write, rename, mkdir, unlink, rmdir, copy and mode change the engine and its command
line make goes through ``engine/core/_fsops.py``, so crash injection numbers it and the fault plan can
make it fail. This reads the sources and lists every call that writes to the filesystem some other
way. The few that remain are not writes to a filesystem at all, and each is named here with the reason:
a new one fails this test until it goes through the seam or earns its line below. An entry that no
longer matches anything fails too, so the list cannot rot.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "packages" / "engine" / "src" / "httk" / "workflow"
SEAM = {"engine/core/_fsops.py", "engine/core/_fstree.py"}

OS_MUTATORS = {
    "rename", "replace", "renames", "mkdir", "makedirs", "unlink", "remove", "removedirs", "rmdir",
    "link", "symlink", "chmod", "fchmod", "lchmod", "chown", "fchown", "lchown", "utime", "truncate",
    "ftruncate", "mkfifo", "mknod", "write", "pwrite", "writev", "sendfile", "copy_file_range",
}  # fmt: skip
SHUTIL_MUTATORS = {"rmtree", "copytree", "copy", "copy2", "copyfile", "copymode", "copystat", "move", "chown"}
PATH_MUTATORS = {
    "mkdir", "write_text", "write_bytes", "unlink", "rmdir", "touch", "symlink_to", "hardlink_to",
    "chmod", "lchmod", "rename", "extractall", "extract",
}  # fmt: skip
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"}
SEAM_MODULES = {"_fsops"}

ALLOWED = {
    ("engine/manager/_gate.py", "os.write"): "the release byte goes down the gate's pipe, not to a file",
    ("engine/ops/_transfer_send.py", "tarfile.open"): "the archive of bundles is written to ssh's stdin",
    ("engine/ops/_ssh.py", "tempfile.TemporaryFile"): (
        "ssh's error output, held in an anonymous file that no directory names"
    ),
}


@dataclass(frozen=True)
class Write:
    module: str
    line: int
    call: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.call}"


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level ``NAME = expr`` assignments, so that a flags constant is read for what it holds."""
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
    return found


def _flag_names(node: ast.expr, constants: dict[str, ast.expr], depth: int = 0) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Name):
            names.add(sub.id)
            if sub.id in constants and depth < 4:
                names |= _flag_names(constants[sub.id], constants, depth + 1)
    return names


def _writing_mode(call: ast.Call, position: int) -> bool:
    mode: ast.expr | None = call.args[position] if len(call.args) > position else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    return (
        isinstance(mode, ast.Constant) and isinstance(mode.value, str) and bool(set(mode.value) & set("wax+"))
    )


def _is_write(call: ast.Call, constants: dict[str, ast.expr]) -> str | None:
    func = call.func
    name = _dotted(func)
    if isinstance(func, ast.Name) and func.id == "open":
        return name if _writing_mode(call, 1) else None
    if not isinstance(func, ast.Attribute):
        return None
    owner = _dotted(func.value)
    if owner == "os" and func.attr == "open":
        flags = call.args[1] if len(call.args) > 1 else None
        return name if flags is not None and _flag_names(flags, constants) & WRITE_FLAGS else None
    if owner == "os":
        return name if func.attr in OS_MUTATORS else None
    if owner == "shutil":
        return name if func.attr in SHUTIL_MUTATORS else None
    if owner == "tempfile":
        return name
    if owner.split(".")[-1] in SEAM_MODULES:
        return None
    if func.attr in PATH_MUTATORS:
        return name
    if func.attr == "open" and _writing_mode(call, 0):
        return name
    return None


def writes_outside_the_seam() -> list[Write]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module in SEAM:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        constants = _constants(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (call := _is_write(node, constants)) is not None:
                found.append(Write(module, node.lineno, call))
    return found


def test_the_engine_writes_to_the_disk_only_through_the_seam() -> None:
    unexplained = [
        str(write) for write in writes_outside_the_seam() if (write.module, write.call) not in ALLOWED
    ]
    assert unexplained == [], "writes outside engine/core/_fsops.py:\n" + "\n".join(unexplained)


def test_every_allowed_write_still_exists() -> None:
    present = {(write.module, write.call) for write in writes_outside_the_seam()}
    assert sorted(set(ALLOWED) - present) == []


def test_the_reader_finds_each_kind_of_write(tmp_path: Path) -> None:
    """The scan itself can fail: each form of write it knows is found in a sample module."""
    sample = """
import os, shutil, tempfile
FLAGS = os.O_WRONLY | os.O_CREAT
os.rename(a, b)
os.open(p, FLAGS)
os.open(p, os.O_RDONLY)
shutil.rmtree(p)
tempfile.mkdtemp()
path.write_text("x")
open(p, "a")
open(p)
path.open("wb")
_fsops.rename(a, b, durable=True)
"text".replace("a", "b")
"""
    tree = ast.parse(sample)
    constants = _constants(tree)
    calls = [
        call for node in ast.walk(tree) if isinstance(node, ast.Call) if (call := _is_write(node, constants))
    ]
    assert calls == [
        "os.rename", "os.open", "shutil.rmtree", "tempfile.mkdtemp", "path.write_text", "open", "path.open"
    ]  # fmt: skip
