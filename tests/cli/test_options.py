from __future__ import annotations

from pathlib import Path

import pytest
from httk.workflow.cli._options import UsageError, bind, bind_many, json_or_text

SLOTS_POLICY = ("WORKSPACE", "KEY", "VALUE")


def slots(*options: str | None) -> list[tuple[str, str | None]]:
    return list(zip(SLOTS_POLICY, options, strict=True))


@pytest.mark.parametrize(
    ("words", "options", "expected"),
    [
        (["ws", "k", "v"], (None, None, None), ["ws", "k", "v"]),  # spec/02: WS KEY VALUE
        (["k", "v"], ("ws", None, None), ["ws", "k", "v"]),  # --workspace WS KEY VALUE
        (["ws"], (None, "k", "v"), ["ws", "k", "v"]),  # spec/03: --key K --value V WS
        ([], ("ws", "k", "v"), ["ws", "k", "v"]),  # all options
        (["ws", "k", "v"], ("ws", None, None), ["ws", "k", "v"]),  # the same workspace twice
        (["ws", "v"], (None, "k", None), ["ws", "k", "v"]),
    ],
)
def test_bind_fills_the_slots_options_leave_open(
    words: list[str], options: tuple[str | None, ...], expected: list[str]
) -> None:
    padded: list[str | None] = [*words, *[None] * (3 - len(words))]
    assert bind(padded, slots(*options), writes=False) == expected


def test_bind_refuses_to_guess_a_workspace_a_read_command_cannot_find(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"no workspace: .* pass WORKSPACE or --workspace WS"):
        bind([None, "k", "v"], slots(None, None, None), writes=False)


def test_bind_names_a_missing_word(tmp_path: Path) -> None:
    (tmp_path / "ws" / ".httk-workflow").mkdir(parents=True)
    with pytest.raises(UsageError, match="missing VALUE"):
        bind([str(tmp_path / "ws"), "k", None], slots(None, None, None), writes=False)


def test_bind_refuses_two_different_workspaces(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(UsageError, match="differ"):
        bind([str(tmp_path / "a"), "k", "v"], slots(str(tmp_path / "b"), None, None), writes=False)


def test_bind_accepts_two_spellings_of_one_directory(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    spelled = str(tmp_path / "a" / ".." / "a")
    assert bind([spelled, "k", "v"], slots(str(tmp_path / "a"), None, None), writes=False)[1:] == ["k", "v"]


def test_bind_refuses_extra_words() -> None:
    with pytest.raises(UsageError, match="unexpected extra argument 'x'"):
        bind(["ws", "x", "y"], [("WORKSPACE", None), ("KEY", "k")], writes=False)


def test_usage_error_message_is_just_the_message() -> None:
    assert UsageError("no workspace given").format_message() == "no workspace given"


def test_bind_many_takes_a_first_word_that_is_a_workspace_as_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "ws" / ".httk-workflow").mkdir(parents=True)
    ws = str(tmp_path / "ws")
    assert bind_many([ws, "p1", "p2"], None, what="PAYLOAD", writes=False) == (ws, ["p1", "p2"])


def test_bind_many_with_the_option_treats_every_word_as_an_item() -> None:
    assert bind_many(["p1", "p2"], "ws", what="PAYLOAD", writes=False) == ("ws", ["p1", "p2"])


def test_bind_many_drops_a_repeated_workspace(tmp_path: Path) -> None:
    (tmp_path / "ws" / ".httk-workflow").mkdir(parents=True)
    ws = str(tmp_path / "ws")
    assert bind_many([ws, "p1"], ws, what="PAYLOAD", writes=False) == (ws, ["p1"])


def test_bind_many_refuses_a_different_workspace_word(tmp_path: Path) -> None:
    (tmp_path / "ws" / ".httk-workflow").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    with pytest.raises(UsageError, match="differ"):
        bind_many([str(tmp_path / "ws"), "p1"], str(tmp_path / "other"), what="PAYLOAD", writes=False)


@pytest.mark.parametrize(("words", "option"), [([], None), (["ws"], None), ([], "ws")])
def test_bind_many_needs_an_item(
    words: list[str], option: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ws" / ".httk-workflow").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"missing PAYLOAD"):
        bind_many(words, option, what="PAYLOAD", writes=False)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("60", 60),
        ("1.5", 1.5),
        ("null", None),
        ("true", True),
        ('"srun -n 32 vasp_std"', "srun -n 32 vasp_std"),
        ("srun -n 32 vasp_std", "srun -n 32 vasp_std"),
        ("keep", "keep"),
        ('{"journal_days": 1}', {"journal_days": 1}),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
    ],
)
def test_json_or_text(text: str, value: object) -> None:
    assert json_or_text(text) == value
