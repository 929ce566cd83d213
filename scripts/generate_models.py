"""Regenerate the pydantic models of ``httk.workflow.models`` from the JSON Schemas in ``schemas/``.

The schemas are the single source of truth; the modules below ``models/_generated/`` are derived from them
by datamodel-code-generator and committed. This script is the only way they are written:

    .venv/bin/python scripts/generate_models.py           rewrite models/_generated/
    .venv/bin/python scripts/generate_models.py --check   exit 1 with a unified diff if it is stale

Output is deterministic: no timestamp, one fixed set of generator options, and a formatting pass with the
venv's ruff in isolated mode (so neither a user's ruff configuration nor the generator's default
formatter can change a byte). It is deterministic for given versions of datamodel-code-generator and
ruff; a different version of either may produce different code, which ``--check`` reports with the
versions it ran. Every run generates into a temporary directory first; without ``--check``
the result then replaces the committed package wholesale, so a schema that was removed leaves no module
behind.
"""

from __future__ import annotations

import argparse
import difflib
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "packages" / "sdk-python" / "src" / "httk" / "workflow" / "models"
SCHEMAS = MODELS / "schemas"
GENERATED = MODELS / "_generated"

HEADER = "# Do not edit: regenerate with scripts/generate_models.py from the JSON Schemas in schemas/.\n"

# Why each option is here:
#   --use-title-as-name            class names come from schema titles (JobDefinition, StateFrame, ...)
#   --collapse-root-models         a field typed by a constrained string $def is a plain str, not a wrapper
#   --use-type-alias               the remaining named constrained types are type aliases, not RootModels
#   --strict-nullable              a member with a default is not also nullable unless the schema says so
#   --strict-types                 no coercion ("500" is not 500), as in JSON Schema
#   --enum-field-as-literal all    enums are Literal types, cheap to import and compare as plain strings
#   --use-annotated, --field-constraints   constraints in Annotated[..., Field(...)], which mypy understands
GENERATOR_OPTIONS = [
    "--input-file-type",
    "jsonschema",
    "--output-model-type",
    "pydantic_v2.BaseModel",
    "--target-python-version",
    "3.11",
    "--disable-timestamp",
    "--ignore-pyproject",
    "--use-annotated",
    "--field-constraints",
    "--enum-field-as-literal",
    "all",
    "--use-title-as-name",
    "--use-schema-description",
    "--use-field-description",
    "--collapse-root-models",
    "--use-type-alias",
    "--strict-nullable",
    "--strict-types",
    "str",
    "int",
    "float",
    "bool",
    "--no-formatters",
]

RUFF_OPTIONS = ["--isolated", "--no-cache", "--line-length", "110", "--target-version", "py311"]


def _run(argv: list[str]) -> None:
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        sys.stderr.write(completed.stdout)
        sys.stderr.write(completed.stderr)
        raise SystemExit(f"generate_models: command failed ({completed.returncode}): {' '.join(argv)}")


def generate(destination: Path) -> None:
    """Write the generated package to ``destination``, which must not exist yet."""
    _run(
        [
            sys.executable,
            "-m",
            "datamodel_code_generator",
            "--input",
            str(SCHEMAS),
            "--output",
            str(destination),
            *GENERATOR_OPTIONS,
        ]
    )
    _run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            *RUFF_OPTIONS,
            "--select",
            "I",
            "--fix",
            "--quiet",
            str(destination),
        ]
    )
    _run([sys.executable, "-m", "ruff", "format", *RUFF_OPTIONS, "--quiet", str(destination)])
    for module in sorted(destination.glob("*.py")):
        module.write_text(HEADER + module.read_text(encoding="utf-8"), encoding="utf-8")


def _modules(directory: Path) -> dict[str, str]:
    if not directory.is_dir():
        return {}
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(directory.glob("*.py"))}


def diff(expected: Path, actual: Path) -> str:
    """Return a unified diff from the committed modules in ``actual`` to the fresh ones in ``expected``."""
    fresh, committed = _modules(expected), _modules(actual)
    chunks: list[str] = []
    for name in sorted(fresh.keys() | committed.keys()):
        chunks.extend(
            difflib.unified_diff(
                committed.get(name, "").splitlines(keepends=True),
                fresh.get(name, "").splitlines(keepends=True),
                fromfile=f"committed/{name}" if name in committed else "/dev/null",
                tofile=f"generated/{name}" if name in fresh else "/dev/null",
            )
        )
    return "".join(chunks)


def _tool_versions() -> str:
    """Name the generator and formatter versions: output differs between versions of either."""
    return ", ".join(f"{name} {metadata.version(name)}" for name in ("datamodel-code-generator", "ruff"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--check",
        action="store_true",
        help="only compare: exit 1 and print a unified diff when the committed models are stale",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="httk-models-") as scratch:
        fresh = Path(scratch) / "_generated"
        generate(fresh)
        if args.check:
            text = diff(fresh, GENERATED)
            if text:
                sys.stdout.write(text)
                sys.stderr.write(
                    "generate_models: models/_generated/ is stale; run scripts/generate_models.py"
                    f" (this environment has {_tool_versions()})\n"
                )
                return 1
            return 0
        if GENERATED.exists():
            shutil.rmtree(GENERATED)
        shutil.copytree(fresh, GENERATED)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
