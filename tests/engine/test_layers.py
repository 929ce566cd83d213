"""The engine's floor plan holds: layers import only layers above them, and nothing reaches for privates.

The layers, in ARCHITECTURE's order ("Inside the engine: layers you can see"): ``core``, ``publish``,
``requests``, ``maintenance``, ``manager``, ``ops``. A module may import its own layer and the layers
before it. Of the manager, the read-side tools of ``ops`` use only its pure rules (``manager._rules``);
``ops._debug`` runs a private manager and may use all of it. Every import counts, module-level,
deferred and ``TYPE_CHECKING`` alike, because each is an arrow a reader follows.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "packages" / "engine" / "src"
ENGINE = "httk.workflow.engine"
LAYERS = ("core", "publish", "requests", "maintenance", "manager", "ops")
MANAGER_FOR_READERS = {f"{ENGINE}.manager._rules"}
RUNS_A_MANAGER = {f"{ENGINE}.ops._debug"}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # the module a name is imported from (or the module imported)
    names: tuple[str, ...]
    line: int
    deferred: bool


def module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    package = parts[-1] == "__init__"
    if package:
        parts.pop()
    return ".".join(parts), package


def modules() -> dict[str, Path]:
    found = {}
    for root in ("httk/workflow/engine", "httk/workflow/cli"):
        for path in sorted((SRC / root).rglob("*.py")):
            found[module_name(path)[0]] = path
    return found


def imports(path: Path) -> Iterator[Import]:
    name, package = module_name(path)
    tree = ast.parse(path.read_text(), str(path))

    def visit(node: ast.AST, deferred: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            inside = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom):
                base = name.split(".") if package else name.split(".")[:-1]
                if child.level:
                    base = base[: len(base) - child.level + 1]
                    target = ".".join([*base, *([child.module] if child.module else [])])
                else:
                    target = child.module or ""
                yield Import(name, target, tuple(a.name for a in child.names), child.lineno, inside)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(name, alias.name, (), child.lineno, inside)
            else:
                yield from visit(child, inside)

    yield from visit(tree, False)


def targets(found: Import, known: dict[str, Path]) -> list[str]:
    """The engine modules an import reaches: a module, or the submodules ``from package import`` names."""
    reached = [f"{found.target}.{name}" for name in found.names if f"{found.target}.{name}" in known]
    if found.target in known and len(reached) < len(found.names):
        reached.append(found.target)
    return reached


def layer(module: str) -> int | None:
    parts = module.split(".")
    if module.startswith(ENGINE + ".") and len(parts) > 3 and parts[3] in LAYERS:
        return LAYERS.index(parts[3])
    return None


ALL = modules()
EDGES = [
    (found, target) for path in ALL.values() for found in imports(path) for target in targets(found, ALL)
]


def test_the_layers_are_the_architecture_s_and_nothing_sits_beside_them() -> None:
    loose = [m for m in ALL if m.startswith(ENGINE + ".") and layer(m) is None]
    assert loose == [], f"engine modules outside the layers: {loose}"
    implementation = [m for m in ALL if layer(m) is not None and ALL[m].name != "__init__.py"]
    assert len(implementation) <= 80  # DESIGN.md, "Larger modules": the count is a budget


@pytest.mark.parametrize("module", sorted(m for m in ALL if layer(m) is not None))
def test_a_layer_imports_only_the_layers_above_it(module: str) -> None:
    upward = [
        f"line {found.line}: {target}"
        for found, target in EDGES
        if found.importer == module and (layer(target) or 0) > (layer(module) or 0)
    ]
    assert upward == [], f"{module} imports a later layer"


@pytest.mark.parametrize("module", sorted(m for m in ALL if layer(m) == LAYERS.index("ops")))
def test_the_read_side_uses_only_the_manager_s_pure_rules(module: str) -> None:
    if module in RUNS_A_MANAGER:
        return
    reached = {
        target
        for found, target in EDGES
        if found.importer == module and layer(target) == LAYERS.index("manager")
    }
    assert reached <= MANAGER_FOR_READERS, f"{module} uses the manager beyond its rules: {sorted(reached)}"


def test_no_module_imports_another_module_s_private_names() -> None:
    private = [
        f"{found.importer}:{found.line} imports {name} from {found.target}"
        for path in ALL.values()
        for found in imports(path)
        for name in found.names
        if name.startswith("_")
        and not name.startswith("__")
        and f"{found.target}.{name}" not in ALL
        and found.target.startswith("httk.")
    ]
    assert private == []


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {module: set() for module in ALL}
    for found, target in EDGES:
        if target != found.importer:
            graph[found.importer].add(target)
    cycles = []
    state: dict[str, int] = {}  # 1 on the current path, 2 finished

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                walk(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module, [module])
    assert cycles == []


def test_every_deferred_import_inside_the_engine_says_why() -> None:
    """A deferred import is for start-up only, and a comment beside it says so (the command line defers
    every engine import by its own documented rule)."""
    silent = []
    for found, target in EDGES:
        if not found.deferred or not found.importer.startswith(ENGINE + ".") or not target.startswith(ENGINE):
            continue
        lines = ALL[found.importer].read_text().splitlines()
        here, above = lines[found.line - 1], lines[found.line - 2] if found.line > 1 else ""
        if "#" not in here and not above.lstrip().startswith("#"):
            silent.append(f"{found.importer}:{found.line} {target}")
    assert silent == []


# -- the command line reaches the engine through its public face only ------------------------------
CLI = "httk.workflow.cli"
TYPER_PUBLIC = {"typer", "typer.main"}  # typer.main.get_command is typer's documented bridge to click


def cli_imports() -> Iterator[Import]:
    for module, path in ALL.items():
        if module == CLI or module.startswith(CLI + "."):
            yield from imports(path)


def test_the_command_line_imports_no_private_module_of_another_package() -> None:
    private = [
        f"{found.importer}:{found.line} imports {found.target}"
        + (f" ({', '.join(found.names)})" if found.names else "")
        for found in cli_imports()
        if found.target.startswith("httk.")
        and not found.target.startswith(CLI)
        and (
            any(part.startswith("_") for part in found.target.split("."))
            or any(name.startswith("_") for name in found.names)
        )
    ]
    assert private == []


def test_the_command_line_uses_only_typer_s_public_modules() -> None:
    reached = sorted(
        {
            f"{found.importer}: {found.target}"
            for found in cli_imports()
            if found.target.split(".")[0] in ("typer", "click") and found.target not in TYPER_PUBLIC
        }
    )
    assert reached == []
    by_name = [
        f"{module}: {word}"
        for module, path in ALL.items()
        if module.startswith(CLI)
        for word in ("typer._", "typer.core", "click.")
        if word in path.read_text()
    ]
    assert by_name == [], "a private module reached through importlib by its name"
