"""Job state and observed declarations: exact bytes, atomic replacement, durability, refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.sdk import Attempt, StateError

from tests.sdk.attempts import Layout, fd_path, make_attempt


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return make_attempt(tmp_path)


def attempt(layout: Layout, **environ: str) -> Attempt:
    return Attempt.load(layout.context_path, environ=environ)


def job_area(layout: Layout) -> list[str]:
    return sorted(str(p.relative_to(layout.job_dir)) for p in (layout.job_dir / ".httk-job").rglob("*"))


def test_state_is_empty_until_saved_and_saved_compactly(layout: Layout) -> None:
    a = attempt(layout)
    assert a.state == {}
    a.save_state({"n": 1, "name": "Grüße\n🧪", "list": (1, 2.5, None, True)})

    path = layout.job_dir / ".httk-job" / "state.json"
    assert path.read_bytes() == '{"n":1,"name":"Grüße\\n🧪","list":[1,2.5,null,true]}\n'.encode()
    assert a.state == {"n": 1, "name": "Grüße\n🧪", "list": [1, 2.5, None, True]}
    assert attempt(layout).state == a.state
    assert job_area(layout) == [".httk-job/state.json"]


def test_state_is_replaced_whole(layout: Layout) -> None:
    a = attempt(layout)
    a.save_state({"first": 1})
    a.state["unsaved"] = True
    a.save_state({"second": 2})
    assert attempt(layout).state == {"second": 2}
    assert job_area(layout) == [".httk-job/state.json"]


def test_a_state_edited_in_place_and_saved(layout: Layout) -> None:
    a = attempt(layout)
    a.state["steps"] = ["prepare"]
    a.save_state(a.state)
    assert attempt(layout).state == {"steps": ["prepare"]}


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ([1, 2], "the job state must be a mapping, not list"),
        ({1: "x"}, "non-string key 1"),
        ({"x": float("inf")}, "non-JSON number inf at x"),
        ({"x": {"y": object()}}, "type object, which JSON cannot hold at x.y"),
        ({"x": "\ud800"}, "lone surrogate"),
    ],
)
def test_an_invalid_state_is_refused_and_the_old_one_kept(layout: Layout, state: Any, message: str) -> None:
    a = attempt(layout)
    a.save_state({"kept": True})
    with pytest.raises(StateError, match=message):
        a.save_state(state)
    assert attempt(layout).state == {"kept": True}
    assert job_area(layout) == [".httk-job/state.json"]


@pytest.mark.parametrize(("data", "message"), [(b"[]", "holds list"), (b"{", "not UTF-8 JSON")])
def test_an_unreadable_state_is_a_state_error(layout: Layout, data: bytes, message: str) -> None:
    (layout.job_dir / ".httk-job").mkdir()
    (layout.job_dir / ".httk-job" / "state.json").write_bytes(data)
    with pytest.raises(StateError, match=message):
        _ = attempt(layout).state


def test_a_failed_replacement_leaves_no_temporary_file(layout: Layout, monkeypatch: Any) -> None:
    a = attempt(layout)
    a.save_state({"old": 1})

    def refuse(src: Any, dst: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "rename", refuse)
    with pytest.raises(StateError, match="cannot be written: Permission denied"):
        a.save_state({"new": 2})
    monkeypatch.undo()
    assert job_area(layout) == [".httk-job/state.json"]
    assert attempt(layout).state == {"old": 1}


def test_declarations_are_written_compactly_by_name(layout: Layout) -> None:
    a = attempt(layout)
    path = a.declare("outputs", {"files": ["OUTCAR"], "note": 'a "b"'})
    a.declare("outputs.v2", {})
    a.declare("outputs", {"files": ["OUTCAR", "vasprun.xml"]})

    assert path == str(layout.job_dir / ".httk-job" / "declarations" / "outputs.json")
    assert Path(path).read_bytes() == b'{"files":["OUTCAR","vasprun.xml"]}\n'
    assert job_area(layout) == [
        ".httk-job/declarations",
        ".httk-job/declarations/outputs.json",
        ".httk-job/declarations/outputs.v2.json",
    ]


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "x" * 65, "two words", "../up", 3])
def test_an_invalid_declaration_name_is_refused(layout: Layout, name: Any) -> None:
    with pytest.raises(StateError, match="invalid declaration name"):
        attempt(layout).declare(name, {})
    assert job_area(layout) == []


@pytest.mark.parametrize("document", [[], "text", None, {"x": {1, 2}}])
def test_a_declaration_must_be_an_object(layout: Layout, document: Any) -> None:
    with pytest.raises(StateError, match="the declaration 'outputs'"):
        attempt(layout).declare("outputs", document)
    assert not (layout.job_dir / ".httk-job" / "declarations" / "outputs.json").exists()


def test_durable_writes_sync_the_file_before_the_rename_and_the_directories_after(
    layout: Layout, monkeypatch: Any
) -> None:
    a = attempt(layout, HTTK_WORKFLOW_DURABLE="1")
    events: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(f"fsync {fd_path(fd)}")
        real_fsync(fd)

    def rename(src: Any, dst: Any) -> None:
        events.append(f"rename {Path(src).name} -> {dst}")
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    a.declare("outputs", {"n": 1})

    area = layout.job_dir / ".httk-job"
    target = area / "declarations" / "outputs.json"
    [temporary] = [event.split()[1] for event in events if event.startswith("rename")]
    assert temporary.startswith(".outputs.json.tmp.")
    assert events == [
        f"fsync {layout.job_dir}",  # .httk-job/ was created
        f"fsync {area}",  # declarations/ was created
        f"fsync {area / 'declarations' / temporary}",
        f"rename {temporary} -> {target}",
        f"fsync {area / 'declarations'}",
    ]
    events.clear()
    a.save_state({"n": 2})
    [temporary] = [event.split()[1] for event in events if event.startswith("rename")]
    assert events == [
        f"fsync {area / temporary}",
        f"rename {temporary} -> {area / 'state.json'}",
        f"fsync {area}",
    ]
    assert json.loads((area / "state.json").read_text()) == {"n": 2}
