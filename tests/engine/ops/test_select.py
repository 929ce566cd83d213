"""Job selectors: every form an operator may type, the ladder behind them, and how they fail."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from httk.workflow.engine.core._frames import Frame
from httk.workflow.engine.core._states import CORE_KINDS, Kind, Trigger
from httk.workflow.engine.core._transition import move_marker
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, init
from httk.workflow.engine.ops import _select
from httk.workflow.engine.ops._select import (
    AMBIGUITY_LISTED,
    SelectorError,
    SelectorKind,
    locate_job,
    select_job,
    select_jobs,
    walk_sorted,
)
from httk.workflow.engine.publish._submit import JobSpec, submit_jobs
from httk.workflow.protocol import InvalidNameError, MarkerName

from tests.conftest import minimal_job

ID = "01234567-89ab-cdef-0123-456789abcdef"
OTHER = "01234567-0000-4000-8000-000000000000"


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    workspace = init(tmp_path / "ws", durable=False)
    submit_jobs(
        workspace,
        [
            JobSpec(minimal_job(id=ID, tag="silicon-relax"), "proj/a"),
            JobSpec(minimal_job(id=OTHER, tag="silicon-band"), "proj/b"),
            JobSpec(minimal_job(tag="carbon"), "other"),
        ],
    )
    workspace.close()
    yield attach(workspace.root, writable=False)


def key_of(ws: Workspace, selector: str, cwd: Path | None = None) -> str:
    return select_job(ws, selector, cwd=cwd or ws.root).job_key


def test_a_uuid_and_a_job_key_select_their_job(ws: Workspace) -> None:
    assert key_of(ws, ID) == f"silicon-relax--{ID}"
    assert key_of(ws, f"silicon-relax--{ID}") == f"silicon-relax--{ID}"
    assert select_jobs(ws, ID, cwd=ws.root).how is SelectorKind.JOB_ID
    assert select_jobs(ws, f"silicon-relax--{ID}", cwd=ws.root).how is SelectorKind.JOB_KEY


def test_a_uppercase_uuid_is_read_as_the_lowercase_one(ws: Workspace) -> None:
    assert key_of(ws, ID.upper()) == f"silicon-relax--{ID}"


def test_a_job_key_with_the_wrong_tag_names_no_job(ws: Workspace) -> None:
    with pytest.raises(SelectorError, match="matches no job"):
        select_job(ws, f"silicon-band--{ID}", cwd=ws.root)


def test_a_unique_prefix_of_a_uuid_or_of_a_key_selects_its_job(ws: Workspace) -> None:
    assert key_of(ws, "01234567-89") == f"silicon-relax--{ID}"
    assert key_of(ws, "silicon-b") == f"silicon-band--{OTHER}"
    assert key_of(ws, "carb").startswith("carbon--")
    assert select_jobs(ws, "carb", cwd=ws.root).how is SelectorKind.PREFIX


def test_an_ambiguous_prefix_is_refused_listing_the_matches(ws: Workspace) -> None:
    with pytest.raises(SelectorError) as caught:
        select_job(ws, "01234567", cwd=ws.root)
    assert len(caught.value.matches) == 2
    assert "matches 2 jobs" in str(caught.value)
    assert f"silicon-relax--{ID} (submitted at proj/a)" in str(caught.value)
    assert isinstance(caught.value, InvalidNameError)
    with pytest.raises(SelectorError, match="matches 2 jobs") as many:
        select_jobs(ws, "silicon", cwd=ws.root)  # spec/03: a prefix is unique, for every command
    assert len(many.value.matches) == 2
    assert [m.job_key for m in select_jobs(ws, "silicon-r", cwd=ws.root).markers] == [f"silicon-relax--{ID}"]


def test_an_ambiguity_lists_at_most_a_few_and_counts_the_rest() -> None:
    markers = [
        MarkerLocation(Kind.READY, "p", MarkerName.parse(f"{ID[:-2]}{n:02d}.p500.g0.init"))
        for n in range(AMBIGUITY_LISTED + 3)
    ]
    text = _select.ambiguity(markers)
    assert text.endswith("and 3 more")
    assert text.count(" (ready at p)") == AMBIGUITY_LISTED


def test_nothing_matching_is_refused(ws: Workspace) -> None:
    for selector in ("zzz", "ffffffff-ffff-4fff-8fff-ffffffffffff", "a/b/c"):
        with pytest.raises(SelectorError):
            select_job(ws, selector, cwd=ws.root)
    for selector in ("", " x"):
        with pytest.raises(SelectorError, match="nonempty"):
            select_job(ws, selector, cwd=ws.root)


def test_a_payload_path_and_a_path_inside_it_select_their_job(ws: Workspace, tmp_path: Path) -> None:
    payload = ws.root / "proj" / "a" / f"silicon-relax--{ID}"
    (payload / "run").mkdir()
    (payload / "run" / "OUTCAR").write_text("")
    assert key_of(ws, str(payload)) == payload.name
    assert key_of(ws, str(payload / "run" / "OUTCAR")) == payload.name
    assert key_of(ws, "OUTCAR", cwd=payload / "run") == payload.name
    assert key_of(ws, f"proj/a/silicon-relax--{ID}", cwd=tmp_path) == payload.name  # workspace-relative
    assert select_jobs(ws, str(payload), cwd=ws.root).how is SelectorKind.PAYLOAD_PATH


def test_a_child_placed_inside_its_parents_payload_is_the_child(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=False)
    parent = f"parent--{ID}"
    submit_jobs(ws, [JobSpec(minimal_job(id=ID, tag="parent"), "p")])
    submit_jobs(ws, [JobSpec(minimal_job(id=OTHER, tag="child"), f"p/{parent}/children")])
    child_payload = ws.root / "p" / parent / "children" / f"child--{OTHER}"

    assert key_of(ws, str(child_payload / "job.json")) == f"child--{OTHER}"
    assert key_of(ws, str(ws.root / "p" / parent / "job.json")) == parent


def test_a_marker_path_selects_its_job_where_it_is_now(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=False)
    [result] = submit_jobs(ws, [JobSpec(minimal_job(id=ID), "p")])
    old_path = result.marker.path(ws)
    moved = move_marker(ws, result.marker, Frame(Kind.READY, {}), Trigger.REGISTER).current
    assert moved is not None
    reader = attach(ws.root, writable=False)

    selection = select_jobs(reader, str(old_path), cwd=tmp_path)

    assert selection.how is SelectorKind.MARKER_PATH
    assert selection.markers == (moved,)
    assert select_job(reader, str(moved.path(ws))) == moved


def test_a_placement_directory_selects_every_job_below_it(ws: Workspace) -> None:
    selection = select_jobs(ws, "proj", cwd=ws.root)
    assert selection.how is SelectorKind.PLACEMENT
    assert [m.job_id for m in selection.markers] == [ID, OTHER]
    with pytest.raises(SelectorError, match="matches 2 jobs"):
        select_job(ws, "proj", cwd=ws.root)
    assert key_of(ws, "proj/b") == f"silicon-band--{OTHER}"
    assert len(select_jobs(ws, str(ws.root), cwd=ws.root).markers) == 3
    (ws.root / "empty").mkdir()
    with pytest.raises(SelectorError, match="no job: there is none below placement empty"):
        select_jobs(ws, "empty", cwd=ws.root)


def test_a_state_directory_selects_the_jobs_of_its_kind(ws: Workspace) -> None:
    submitted = ws.state_dir(Kind.SUBMITTED)
    assert len(select_jobs(ws, str(submitted), cwd=ws.root).markers) == 3
    assert key_of(ws, str(submitted / "proj" / "b")) == f"silicon-band--{OTHER}"
    with pytest.raises(SelectorError, match="neither an existing path"):
        select_jobs(ws, ".httk-workflow/state/ready", cwd=ws.root)  # no job was ever ready
    ws.state_dir(Kind.READY).mkdir()
    with pytest.raises(SelectorError, match="no ready job"):
        select_jobs(ws, ".httk-workflow/state/ready", cwd=ws.root)


def test_paths_that_name_no_job_are_refused(ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(SelectorError, match="not inside the workspace"):
        select_jobs(ws, str(tmp_path), cwd=ws.root)
    with pytest.raises(SelectorError, match="only state/<kind>"):
        select_jobs(ws, ".httk-workflow/journal", cwd=ws.root)
    orphan = ws.root / "proj" / "a" / f"lost--{OTHER[:-1]}9"
    orphan.mkdir()
    (orphan / "job.json").write_text("{}")
    with pytest.raises(SelectorError, match="orphan payload"):
        select_jobs(ws, str(orphan), cwd=ws.root)


def test_a_path_through_a_symlink_into_the_workspace_is_inside_it(ws: Workspace, tmp_path: Path) -> None:
    link = tmp_path / "shortcut"
    os.symlink(ws.root / "proj", link)
    assert len(select_jobs(ws, str(link / "a"), cwd=tmp_path).markers) == 1


# -- the ladder -----------------------------------------------------------------------------------------
def test_the_ladder_probes_the_placement_before_any_walk(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_walk(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("walked the workspace")

    monkeypatch.setattr(_select, "walk_sorted", no_walk, raising=True)
    found = locate_job(ws, ID, job_key=f"silicon-relax--{ID}", placement="proj/a")
    assert found is not None and found.kind is Kind.SUBMITTED


def test_a_confirmed_index_hit_is_used_and_a_stale_one_is_not(tmp_path: Path) -> None:
    ws = init(tmp_path / "ws", durable=False)
    [result] = submit_jobs(ws, [JobSpec(minimal_job(id=ID), "p")])
    reader = attach(ws.root, writable=False)
    assert locate_job(reader, ID) == result.marker  # the walk noted it in the index
    moved = move_marker(ws, result.marker, Frame(Kind.READY, {}), Trigger.REGISTER).current

    # the index still says submitted; rule 1 refuses the stale hit, rule 2 walks again and finds ready
    assert locate_job(reader, ID) == moved


def test_a_miss_is_reported_only_after_a_complete_walk(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[Kind] = []
    real = walk_sorted

    def counting(workspace: Workspace, kind: Kind, **kwargs: object) -> object:
        walked.append(kind)
        return real(workspace, kind, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_select, "walk_sorted", counting)
    assert locate_job(ws, "ffffffff-ffff-4fff-8fff-ffffffffffff", placement="proj/a", job_key="x") is None
    assert walked == list(CORE_KINDS)
