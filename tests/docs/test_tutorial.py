"""docs/tutorial.md runs as written: every command through the real CLI, every output compared.

The tutorial is the script. Its fenced blocks follow one convention, and a block that follows none of it
fails the test rather than being skipped:

- ```` ```python file=NAME ```` or ```` ```bash file=NAME ````: a file the reader saves; the test writes
  the block's text to NAME in the working directory when the document reaches it.
- ```` ```console ````: run. Each line starting with ``$ `` is a command (a line ending in ``\\`` goes
  on); the lines after it, up to the next command, are exactly what it prints, standard output and
  standard error together. A command that exits with a nonzero status must be followed by
  ``$ echo $?`` showing that status: nothing fails unseen.
- ```` ```console no-run ````: shown, never run (a command whose output depends on the reader's machine).

Commands run in order, each in ``bash`` in one fresh temporary directory, with the ``httk`` of this
interpreter first on PATH and the real task manager running the jobs. Before comparison the actual output
is normalised by the rules of :data:`PLACEHOLDERS` and nothing else: the tutorial writes the placeholder
where the value legitimately varies from run to run, and everything else must match byte for byte.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
COMMAND_TIMEOUT_SECONDS = 300

#: What varies between runs, in the order applied, and what the tutorial writes in its place.
PLACEHOLDERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # a marker's record reference: journal writer, segment, offset, length and frame checksum
    ("<record>", re.compile(r"w[0-9a-f]{32}-s[0-9a-z]+-o[0-9a-z]+-l[0-9a-z]+-h[0-9a-f]{32}")),
    # job, workspace, manager, attempt and request ids
    ("<uuid>", re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")),
    # digests of documents that hold those ids
    ("<sha256>", re.compile(r"\b[0-9a-f]{64}\b")),
    # UTC timestamps of transitions
    ("<time>", re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")),
    # the memory and processors a manager finds on this host
    ("mem=<MB>,procs=<N>", re.compile(r"\bmem=\d+,procs=\d+")),
    # the Landlock ABI this kernel offers the runners' confinement
    ("landlock ABI <N>", re.compile(r"\blandlock ABI \d+")),
)
#: The temporary working directory, wherever it is.
DIRECTORY = "<dir>"

_FENCE = re.compile(r"^```(?P<info>[^`\n]*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
_FILE_INFO = re.compile(r"(?:python|bash) file=(?P<name>[A-Za-z0-9_.-]+)")


@dataclass(frozen=True)
class Command:
    """One ``$`` command of a console block and the output the tutorial shows for it."""

    line: int
    text: str
    expected: str


@dataclass(frozen=True)
class File:
    """A file block: what the reader saves as ``name``."""

    line: int
    name: str
    text: str


def parse(markdown: str) -> list[Command | File]:
    """The tutorial's files and commands in document order; a fence outside the convention is an error."""
    items: list[Command | File] = []
    for fence in _FENCE.finditer(markdown):
        info, body = fence["info"].strip(), fence["body"]
        line = markdown.count("\n", 0, fence.start()) + 1
        if info == "console":
            items.extend(_commands(body, line + 1))
        elif info == "console no-run":
            continue
        elif named := _FILE_INFO.fullmatch(info):
            items.append(File(line, named["name"], body))
        else:
            raise AssertionError(
                f"tutorial.md:{line}: a fence must be console, console no-run, or a file block"
            )
    return items


def _commands(body: str, first_line: int) -> list[Command]:
    commands: list[Command] = []
    lines = body.splitlines(keepends=True)
    index = 0
    if lines and not lines[0].startswith("$ "):
        raise AssertionError(f"tutorial.md:{first_line}: a console block starts with a '$ ' command")
    while index < len(lines):
        start = index
        text = lines[index][2:].rstrip("\n")
        while text.endswith("\\"):
            index += 1
            text += "\n" + lines[index].rstrip("\n")
        index += 1
        output_start = index
        while index < len(lines) and not lines[index].startswith("$ "):
            index += 1
        commands.append(Command(first_line + start, text, "".join(lines[output_start:index])))
    return commands


def normalise(output: str, directory: Path) -> str:
    """``output`` with every value that varies between runs replaced by its placeholder."""
    output = output.replace(str(directory), DIRECTORY)
    for placeholder, pattern in PLACEHOLDERS:
        output = pattern.sub(placeholder, output)
    return output


def run(command: Command, directory: Path, previous_status: int) -> tuple[str, int]:
    """Run one command as the reader's shell would; ``$?`` is the previous command's status."""
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "LC_ALL": "C.UTF-8",
    }
    for variable in ("HTTK_WORKFLOW_DEBUG", "COLUMNS"):
        environment.pop(variable, None)
    result = subprocess.run(
        ["bash", "-c", f"(exit {previous_status}); {command.text}"],
        cwd=directory,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    return normalise(result.stdout, directory), result.returncode


def replay(markdown: str, directory: Path) -> None:
    """Write the files and run the commands of ``markdown`` in ``directory``; the first difference fails."""
    items = parse(markdown)
    assert any(isinstance(item, Command) for item in items), "the tutorial runs no command"
    status = 0
    for item in items:
        if isinstance(item, File):
            (directory / item.name).write_text(item.text, encoding="utf-8")
            continue
        if status != 0 and item.text != "echo $?":
            raise AssertionError(f"tutorial.md: the command before line {item.line} exited {status} unseen")
        actual, status = run(item, directory, status)
        if actual != item.expected:
            diff = "".join(
                difflib.unified_diff(
                    item.expected.splitlines(keepends=True),
                    actual.splitlines(keepends=True),
                    "tutorial.md",
                    "actual",
                )
            )
            raise AssertionError(f"tutorial.md:{item.line}: $ {item.text}\n{diff}")
    assert status == 0, "the tutorial's last command exited nonzero unseen"


def test_the_tutorial_prints_what_it_shows(tmp_path: Path) -> None:
    replay(TUTORIAL.read_text(encoding="utf-8"), tmp_path)


def test_a_changed_output_or_an_unseen_failure_fails_the_replay(tmp_path: Path) -> None:
    saved = "```bash file=note.sh\necho saved\n```\n\n"
    replay(saved + "```console\n$ bash note.sh\nsaved\n$ false\n$ echo $?\n1\n```\n", tmp_path)
    for document, complaint in (
        (saved + "```console\n$ bash note.sh\nsafe\n```\n", "tutorial.md:6: $ bash note.sh"),
        (saved + "```console\n$ bash note.sh\nsaved\nmore\n```\n", "-more"),
        ("```console\n$ false\n$ true\n```\n", "before line 3 exited 1 unseen"),
        ("```console\n$ false\n```\n", "last command exited nonzero unseen"),
    ):
        try:
            replay(document, tmp_path)
        except AssertionError as refused:
            assert complaint in str(refused)
        else:
            raise AssertionError(f"the replay accepted {document!r}")


def test_the_tutorial_files_meet_the_house_linters(tmp_path: Path) -> None:
    """The step programs a reader copies are held to what ``./dev lint`` asks of the repository's own."""
    files = [item for item in parse(TUTORIAL.read_text(encoding="utf-8")) if isinstance(item, File)]
    for item in files:
        (tmp_path / item.name).write_text(item.text, encoding="utf-8")
    tools = Path(sys.executable).parent
    python = [item.name for item in files if item.name.endswith(".py")]
    bash = [item.name for item in files if item.name.endswith(".sh")]
    assert python and bash and len(python) + len(bash) == len(files)
    config = ["--config", str(ROOT / "pyproject.toml")]
    for checker in (
        [str(tools / "ruff"), "check", *config, *python],
        [str(tools / "ruff"), "format", "--check", *config, *python],
        [str(tools / "shellcheck"), *bash],
    ):
        result = subprocess.run(checker, cwd=tmp_path, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


def test_a_fence_outside_the_convention_is_refused() -> None:
    for info in ("", "sh", "python", "console skip", "bash file=../escape"):
        try:
            parse(f"text\n\n```{info}\n$ true\n```\n")
        except AssertionError as refused:
            assert "tutorial.md:3:" in str(refused)
        else:
            raise AssertionError(f"a ```{info} fence was accepted")


def test_commands_continue_over_backslashes_and_own_their_output() -> None:
    [first, second] = parse("```console\n$ printf 'a\\n' \\\n  'b'\nA\n\n$ echo $?\n0\n```\n")
    assert isinstance(first, Command) and isinstance(second, Command)
    assert (first.line, first.text, first.expected) == (2, "printf 'a\\n' \\\n  'b'", "A\n\n")
    assert (second.line, second.text, second.expected) == (6, "echo $?", "0\n")


def test_normalising_touches_only_what_varies(tmp_path: Path) -> None:
    raw = (
        f"{tmp_path}/campaign silicon--704aac01-0b87-4692-a7eb-ae630f7d59e5 2026-12-01T21:27:11.360638Z "
        "g9.wc4a00b6fe624417c99c920596bd51f0d-s0-o7ih-lqt-h056da4b44fc76b461bb30cf0efcd09ed "
        f"{'d5' * 32} mem=24105,procs=2 generation 9 priority 500 lattice 5.4309\n"
    )
    assert normalise(raw, tmp_path) == (
        "<dir>/campaign silicon--<uuid> <time> g9.<record> <sha256> mem=<MB>,procs=<N> "
        "generation 9 priority 500 lattice 5.4309\n"
    )
