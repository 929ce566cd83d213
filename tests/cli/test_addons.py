"""Add-on command groups (entry point group ``httk.workflow.cli``) through the installed ``httk``.

Each test installs a tiny distribution the way importlib.metadata reads one (tests/addonkit.py) and runs
the real executable in a process that sees it: the group is found by its entry point name, loaded only
when used, reports errors like the engine's own commands, and a broken one fails alone, in one line that
names its entry point.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.addonkit import ADDON_MODULE, environment, imports, install_addon

HTTK = str(Path(sys.executable).with_name("httk"))
GROUP = "httk.workflow.cli"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return install_addon(
        tmp_path / "site",
        {
            GROUP: {
                "demo": f"{ADDON_MODULE}.cli:app",
                "broken": "fake_httk_missing.cli:app",
                "notagroup": f"{ADDON_MODULE}.cli:not_a_group",
            }
        },
    )


def httk(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    marks = site.parent / "marks"
    return subprocess.run(
        [HTTK, *args], capture_output=True, text=True, timeout=60, check=False, env=environment(site, marks)
    )


def test_the_group_runs_under_httk_workflow_by_its_entry_point_name(site: Path) -> None:
    result = httk(site, "workflow", "demo", "hello", "--name", "silicon")
    assert (result.returncode, result.stdout, result.stderr) == (0, "hello silicon\n", "")


def test_its_help_and_usage_errors_name_the_full_command_path(site: Path) -> None:
    helped = httk(site, "workflow", "demo", "--help")
    assert helped.returncode == 0
    assert "Usage: httk workflow demo [OPTIONS] COMMAND [ARGS]..." in helped.stdout
    assert "Say hello." in helped.stdout
    wrong = httk(site, "workflow", "demo", "hello", "--nmae", "x")
    assert wrong.returncode == 2
    assert "Usage: httk workflow demo hello [OPTIONS]" in wrong.stderr
    assert "No such option: --nmae" in wrong.stderr


def test_its_errors_are_one_line_with_the_engine_s_exit_status(site: Path) -> None:
    result = httk(site, "workflow", "demo", "refuse")
    assert (result.returncode, result.stderr) == (2, "error: the demo refuses\n")


def test_the_listing_shows_add_ons_without_importing_them(site: Path) -> None:
    marks = site.parent / "marks"
    result = httk(site, "workflow", "--help")
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith("  ")}
    assert {"job", "workspace", "demo", "broken", "notagroup"} <= set(listed)
    assert "[fakeaddon] Demo commands for tests." in listed["demo"]
    assert imports(marks) == 0
    assert httk(site, "workflow", "demo", "hello").returncode == 0
    assert imports(marks) == 1


SEEN_MODULES = """
import sys
sys.argv = ["httk", *sys.argv[1:]]
from httk.workflow.cli._app import main
try:
    main()
except SystemExit as exit:
    assert not exit.code, exit.code
print("\\n".join(sorted(sys.modules)))
"""
"""Run ``httk WORDS`` in this process, then print every module it imported (however it imported them)."""


@pytest.mark.parametrize(
    "words",
    [("--help",), ("workflow", "job", "--help"), ("workflow", "workspace", "status", "--help")],
)
def test_other_commands_neither_import_nor_look_for_add_ons(site: Path, words: tuple[str, ...]) -> None:
    marks = site.parent / "marks"
    result = subprocess.run(
        [sys.executable, "-c", SEEN_MODULES, *words],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=environment(site, marks),
    )
    modules = set(result.stdout.splitlines())
    assert "httk.workflow.cli._app" in modules
    assert "importlib.metadata" not in modules  # the installed distributions were not even scanned
    assert not any(module.startswith(ADDON_MODULE) for module in modules)
    assert imports(marks) == 0


def test_an_entry_point_that_does_not_load_fails_alone_in_one_line(site: Path) -> None:
    result = httk(site, "workflow", "broken", "anything")
    assert result.returncode == 1
    assert result.stderr == (
        "error: the add-on command group 'broken' cannot be loaded: entry point broken = "
        f"fake_httk_missing.cli:app (fakeaddon 0.1, group {GROUP}): ModuleNotFoundError: No module named "
        "'fake_httk_missing'\n"
    )
    assert httk(site, "workflow", "demo", "hello").returncode == 0
    assert httk(site, "workflow", "--help").returncode == 0


def test_a_value_that_is_not_a_typer_app_is_named(site: Path) -> None:
    result = httk(site, "workflow", "notagroup")
    assert result.returncode == 1
    assert result.stderr == (
        "error: the add-on command group 'notagroup' is not a typer.Typer but a function: entry point "
        f"notagroup = {ADDON_MODULE}.cli:not_a_group (fakeaddon 0.1, group {GROUP})\n"
    )


def test_debugging_shows_the_traceback_of_a_broken_add_on(site: Path) -> None:
    marks = site.parent / "marks"
    result = subprocess.run(
        [HTTK, "workflow", "broken"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**environment(site, marks), "HTTK_WORKFLOW_DEBUG": "1"},
    )
    assert result.returncode == 1
    assert "ModuleNotFoundError: No module named 'fake_httk_missing'" in result.stderr
    assert "AddOnError: the add-on command group 'broken' cannot be loaded" in result.stderr


def test_a_name_two_distributions_register_is_refused_naming_both(site: Path) -> None:
    install_addon(site, {GROUP: {"demo": f"{ADDON_MODULE}.cli:app"}}, name="otheraddon")
    result = httk(site, "workflow", "demo", "hello")
    assert result.returncode == 1
    assert result.stderr.startswith("error: the add-on command group 'demo' is registered more than once: ")
    assert "(fakeaddon 0.1, group" in result.stderr and "(otheraddon 0.1, group" in result.stderr


def test_an_engine_group_of_the_same_name_wins(site: Path) -> None:
    install_addon(site, {GROUP: {"job": f"{ADDON_MODULE}.cli:app"}}, name="shadowing")
    result = httk(site, "workflow", "job", "--help")
    assert result.returncode == 0
    assert "Make, submit, inspect and control jobs." in result.stdout
    assert imports(site.parent / "marks") == 0


def test_an_unknown_word_is_still_a_usage_error(site: Path) -> None:
    result = httk(site, "workflow", "nosuch")
    assert result.returncode == 2
    assert "No such command 'nosuch'" in result.stderr


def test_every_installed_group_helps_as_plainly_as_the_engine_s_own() -> None:
    """Shell completion belongs to ``httk`` itself, and help is plain text (rich's boxes cost start-up)."""
    from importlib.metadata import entry_points

    names = sorted(point.name for point in entry_points(group=GROUP))
    assert {"plan", "v1", "vasp"} <= set(names)
    for name in names:
        helped = subprocess.run(
            [HTTK, "workflow", name, "--help"], capture_output=True, text=True, timeout=60, check=False
        )
        assert helped.returncode == 0, (name, helped.stderr)
        assert "--install-completion" not in helped.stdout and "╭" not in helped.stdout, name
