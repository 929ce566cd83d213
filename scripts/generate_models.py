"""Regenerate the pydantic models of ``httk.workflow.models`` from the JSON Schemas in ``schemas/``.

The schemas are the single source of truth; the one module ``models/_generated.py`` is derived from them by
datamodel-code-generator and committed. This script is the only way it is written:

    .venv/bin/python scripts/generate_models.py           rewrite models/_generated.py
    .venv/bin/python scripts/generate_models.py --check   exit 1 with a unified diff if it is stale

The schemas are first bundled into one schema (:func:`bundle`): every document and every shared
definition becomes one ``$defs`` entry, and each ``$ref`` between files becomes a reference inside the
bundle, so each model is generated once, in one module, whatever number of documents use it.

Output is deterministic: no timestamp, one fixed set of generator options, and a formatting pass with the
venv's ruff in isolated mode (so neither a user's ruff configuration nor the generator's default
formatter can change a byte). It is deterministic for given versions of datamodel-code-generator and
ruff; a different version of either may produce different code, which ``--check`` reports with the
versions it ran. Every run generates into a temporary directory first; without ``--check`` the result
then replaces the committed module.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "packages" / "sdk-python" / "src" / "httk" / "workflow" / "models"
SCHEMAS = MODELS / "schemas"
GENERATED = MODELS / "_generated.py"

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


_FILE_REF = re.compile(r"([a-z-]+)\.schema\.json(?:#/(\$defs|properties)/(\w+))?")


def _key(document: str) -> str:
    return document.replace("-", "_")


def _rewrite(node: Any, owner: str) -> Any:
    """``node`` with every ``$ref`` pointing into the bundle (see :func:`bundle`)."""
    if isinstance(node, list):
        return [_rewrite(item, owner) for item in node]
    if not isinstance(node, dict):
        return node
    rewritten: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            rewritten[key] = _bundle_ref(value, owner)
        else:
            rewritten[key] = _rewrite(value, owner)
    return rewritten


def _bundle_ref(ref: str, owner: str) -> str:
    match = _FILE_REF.fullmatch(ref)
    if match is not None:
        document, section, name = match.groups()
    elif ref.startswith("#/$defs/"):
        document, section, name = owner, "$defs", ref[len("#/$defs/") :]
    else:
        raise SystemExit(f"generate_models: cannot bundle the reference {ref!r} in {owner}.schema.json")
    if section is None:
        return f"#/$defs/{_key(document)}"
    if section == "properties":
        return f"#/$defs/{_key(document)}/properties/{name}"
    return f"#/$defs/{name}" if document == "common" else f"#/$defs/{_key(document)}__{name}"


def bundle(schemas: Path) -> dict[str, Any]:
    """One schema holding every document of ``schemas`` and every definition they share.

    ``common``'s definitions keep their names; a document is ``$defs/<document>`` and its own definitions
    ``$defs/<document>__<name>``, so nothing collides and each is generated once.
    """
    definitions: dict[str, Any] = {}
    for path in sorted(schemas.glob("*.schema.json")):
        document = path.name[: -len(".schema.json")]
        schema = json.loads(path.read_text(encoding="utf-8"))
        for name, definition in schema.pop("$defs", {}).items():
            key = name if document == "common" else f"{_key(document)}__{name}"
            definitions[key] = _rewrite(definition, document)
        if document != "common":
            schema.pop("$schema", None)
            schema.pop("$id", None)
            definitions[_key(document)] = _rewrite(schema, document)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": definitions}


# The bundle's root has no schema of its own; the generator names it anyway.
_ROOT_ALIAS = 'Model = TypeAliasType("Model", Any)\n'


def generate(destination: Path) -> None:
    """Write the generated module to ``destination``, which must not exist yet."""
    bundled = destination.with_name("schemas.json")
    bundled.write_text(json.dumps(bundle(SCHEMAS), indent=1, sort_keys=True), encoding="utf-8")
    _run(
        [
            sys.executable,
            "-m",
            "datamodel_code_generator",
            "--input",
            str(bundled),
            "--output",
            str(destination),
            *GENERATOR_OPTIONS,
        ]
    )
    text = destination.read_text(encoding="utf-8")
    if _ROOT_ALIAS not in text:
        raise SystemExit("generate_models: the generator no longer names the bundle's root as expected")
    destination.write_text(text.replace(_ROOT_ALIAS, ""), encoding="utf-8")
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
    destination.write_text(HEADER + destination.read_text(encoding="utf-8"), encoding="utf-8")


def diff(expected: Path, actual: Path) -> str:
    """Return a unified diff from the committed module ``actual`` to the fresh one ``expected``."""
    committed = actual.read_text(encoding="utf-8") if actual.is_file() else ""
    return "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            expected.read_text(encoding="utf-8").splitlines(keepends=True),
            fromfile=f"committed/{actual.name}",
            tofile=f"generated/{actual.name}",
        )
    )


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
        fresh = Path(scratch) / "_generated.py"
        generate(fresh)
        if args.check:
            text = diff(fresh, GENERATED)
            if text:
                sys.stdout.write(text)
                sys.stderr.write(
                    "generate_models: models/_generated.py is stale; run scripts/generate_models.py"
                    f" (this environment has {_tool_versions()})\n"
                )
                return 1
            return 0
        GENERATED.write_text(fresh.read_text(encoding="utf-8"), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
