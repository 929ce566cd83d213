from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any
from uuid import uuid4

import pytest
from httk.workflow.engine.core._scan import (
    Anomaly,
    AnomalyReason,
    MarkerStream,
    PassResult,
    StreamStatistics,
    _classify,
    normalize_prefixes,
    walk_markers,
)
from httk.workflow.engine.core._states import Kind
from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, init
from httk.workflow.protocol import InvalidNameError, JobKey, MarkerName, RecordRef, WorkspaceError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

READY = Kind.READY
Found = tuple[str, str]  # (placement, marker basename)


# -- building trees ------------------------------------------------------------------------------------
def _ref() -> RecordRef:
    return RecordRef(writer=str(uuid4()), segment=0, offset=12, length=10, checksum128="0" * 32)


def _name(priority: int = 500, generation: int = 0) -> MarkerName:
    name = MarkerName.initial(JobKey(str(uuid4()), "relax"), priority)
    for _ in range(generation):
        name = name.successor(_ref())
    return name


def _make(ws: Workspace, placement: str, count: int, kind: Kind = READY) -> set[Found]:
    directory = ws.marker_dir(kind, placement)
    directory.mkdir(parents=True, exist_ok=True)
    made = set()
    for index in range(count):
        name = str(_name(priority=index % 1000, generation=index % 3))
        (directory / name).touch()
        made.add((placement, name))
    return made


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return init(tmp_path / "ws", durable=False)


def _found(markers: Iterator[MarkerLocation] | list[MarkerLocation]) -> list[Found]:
    return [(m.placement, str(m.name)) for m in markers]


def _walk(ws: Workspace, **kwargs: Any) -> tuple[set[Found], list[Anomaly]]:
    items = list(walk_markers(ws, READY, **kwargs))
    markers = _found(m for m in items if isinstance(m, MarkerLocation))
    assert len(markers) == len(set(markers))
    return set(markers), [a for a in items if isinstance(a, Anomaly)]


def _cycle(stream: MarkerStream, limit: int = 10_000) -> list[PassResult]:
    passes = []
    for _ in range(limit):
        passes.append(stream.next_pass())
        if passes[-1].exhausted_cycle:
            return passes
    raise AssertionError(f"no cycle completed within {limit} passes")


def _cycle_markers(passes: list[PassResult]) -> list[Found]:
    return [found for result in passes for found in _found(result.markers)]


# -- recording what is opened and read -----------------------------------------------------------------
class _CountingListing:
    def __init__(self, inner: Any, recorder: _Recorder) -> None:
        self._inner = inner
        self._recorder = recorder
        recorder.open_now += 1

    def __iter__(self) -> _CountingListing:
        return self

    def __next__(self) -> os.DirEntry[str]:
        failure = self._recorder.fail_reading
        if failure is not None:
            raise failure
        entry: os.DirEntry[str] = next(self._inner)
        self._recorder.pulled += 1
        return entry

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()
            self._inner = None
            self._recorder.open_now -= 1

    def __enter__(self) -> _CountingListing:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


class _Recorder:
    """Stands in for os.scandir: records every directory opened and counts every entry read."""

    def __init__(self, refuse: dict[str, OSError] | None = None) -> None:
        self._real = os.scandir
        self.opened: list[str] = []
        self.pulled = 0
        self.open_now = 0
        self.refuse = refuse or {}
        self.fail_reading: OSError | None = None

    def __call__(self, path: str) -> _CountingListing:
        path = os.fspath(path)
        self.opened.append(path)
        for suffix, error in self.refuse.items():
            if path.endswith(suffix):
                raise error
        return _CountingListing(self._real(path), self)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    recording = _Recorder()
    monkeypatch.setattr(os, "scandir", recording)
    return recording


# -- the exhaustive walker -----------------------------------------------------------------------------
def test_walk_markers_finds_every_marker_including_placements_that_prefix_others(ws: Workspace) -> None:
    made = _make(ws, "a", 3) | _make(ws, "a/b", 4) | _make(ws, "a/b/c", 2) | _make(ws, "z/y", 5)
    markers, anomalies = _walk(ws)
    assert markers == made
    assert anomalies == []


def test_walk_markers_of_an_absent_kind_is_empty(ws: Workspace) -> None:
    shutil.rmtree(ws.state_dir(READY), ignore_errors=True)
    assert list(walk_markers(ws, READY)) == []
    assert list(walk_markers(ws, READY, placement_prefixes=["a"])) == []


def test_walk_markers_calls_on_entry_once_per_entry(ws: Workspace) -> None:
    _make(ws, "a/b", 4)
    _make(ws, "c", 2)
    calls = Counter[str]()
    list(walk_markers(ws, READY, on_entry=lambda: calls.update(["entry"])))
    assert calls["entry"] == 4 + 2 + 3  # markers, plus the directory entries a, a/b and c


def test_walk_markers_streams_and_closes_what_it_opened_when_abandoned(
    ws: Workspace, recorder: _Recorder
) -> None:
    _make(ws, "a/b/c", 10)
    walk = walk_markers(ws, READY)
    next(walk)
    assert recorder.open_now == 4  # state/ready, a, a/b, a/b/c: one listing per level
    walk.close()
    assert recorder.open_now == 0


# -- budgets --------------------------------------------------------------------------------------------
def test_discovery_budget_is_respected_exactly(ws: Workspace) -> None:
    made = _make(ws, "flat", 1000)
    with MarkerStream(ws, READY, discovery_budget=100, maximum_pass_markers=10_000) as stream:
        passes = _cycle(stream)
    assert [p.entries_visited for p in passes[:-1]] == [100] * 10
    assert passes[0].entries_visited == 100 and len(passes[0].markers) == 99  # the root's entry counts
    assert set(_cycle_markers(passes)) == made


def test_maximum_pass_markers_is_respected_exactly(ws: Workspace) -> None:
    made = _make(ws, "flat", 1000)
    with MarkerStream(ws, READY, maximum_pass_markers=37) as stream:
        passes = _cycle(stream)
    assert [len(p.markers) for p in passes[:27]] == [37] * 27
    assert sum(len(p.markers) for p in passes) == 1000
    assert set(_cycle_markers(passes)) == made


def test_budgets_must_be_positive(ws: Workspace) -> None:
    with pytest.raises(ValueError, match="discovery_budget"):
        MarkerStream(ws, READY, discovery_budget=0)
    with pytest.raises(ValueError, match="max_open_roots"):
        MarkerStream(ws, READY, max_open_roots=0)


def test_an_absent_kind_gives_an_empty_completed_pass(ws: Workspace) -> None:
    shutil.rmtree(ws.state_dir(READY), ignore_errors=True)
    with MarkerStream(ws, READY) as stream:
        assert stream.next_pass() == PassResult([], [], 0, True)
        assert stream.statistics() == StreamStatistics(
            passes=1, cycles=1, roots_in_rotation=0, open_directories=0
        )


def test_heartbeat_is_called_every_heartbeat_every_entries(ws: Workspace) -> None:
    _make(ws, "flat", 5000)
    beats: list[int] = []
    with MarkerStream(ws, READY, maximum_pass_markers=10_000, heartbeat=lambda: beats.append(1)) as stream:
        first = stream.next_pass()
        assert first.entries_visited == 4096 and len(beats) == 8
        second = stream.next_pass()  # the remaining 905 entries: one more multiple of 512
        assert second.entries_visited == 905 and len(beats) == 9


# -- cycles and resumption --------------------------------------------------------------------------------
def test_every_marker_is_found_exactly_once_per_cycle_and_again_next_cycle(ws: Workspace) -> None:
    made = set()
    for placement, count in [("a", 30), ("a/b", 50), ("a/b/c", 7), ("b/x/y", 90), ("c", 0), ("d/e", 1)]:
        made |= _make(ws, placement, count)
    with MarkerStream(ws, READY, discovery_budget=23, maximum_pass_markers=11, max_open_roots=2) as stream:
        for _ in range(2):
            found = _cycle_markers(_cycle(stream))
            assert len(found) == len(set(found)) == len(made)
            assert set(found) == made


def test_a_pass_resumes_mid_directory_without_relisting_it(ws: Workspace, recorder: _Recorder) -> None:
    made = _make(ws, "flat", 500)
    with MarkerStream(ws, READY, maximum_pass_markers=100) as stream:
        windows = [_found(stream.next_pass().markers) for _ in range(5)]
        assert all(len(w) == 100 for w in windows)
        assert set().union(*windows) == made
        # Invariant (module docstring): a root's cursor is its open listing, so a cycle opens each directory
        # once and reads each entry once, however many passes it takes.
        flat = str(ws.marker_dir(READY, "flat"))
        assert recorder.opened.count(flat) == 1
        assert recorder.pulled == 1 + 500
        assert stream.next_pass().exhausted_cycle


def test_a_completed_cycle_restarts_and_finds_new_markers(ws: Workspace) -> None:
    first = _make(ws, "a", 3)
    with MarkerStream(ws, READY) as stream:
        assert set(_cycle_markers(_cycle(stream))) == first
        second = _make(ws, "a", 2) | _make(ws, "new/root", 2)
        assert set(_cycle_markers(_cycle(stream))) == first | second
        assert stream.statistics().cycles == 2


def test_the_first_pass_reads_only_its_budget_from_a_huge_flat_directory(
    ws: Workspace, recorder: _Recorder
) -> None:
    _make(ws, "flat", 20_000)
    with MarkerStream(ws, READY) as stream:
        result = stream.next_pass()
    assert len(result.markers) == 256
    assert recorder.pulled == result.entries_visited == 257  # the root's entry and 256 markers


# -- fairness ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("big", "small"), [("a-big", "z-small"), ("z-big", "a-small")])
def test_a_huge_root_does_not_starve_a_small_sibling(ws: Workspace, big: str, small: str) -> None:
    _make(ws, big, 10_000)
    few = _make(ws, small, 5)
    with MarkerStream(ws, READY) as stream:
        first = stream.next_pass()
    assert few <= set(_found(first.markers))
    assert len(first.markers) == 256


def test_every_root_in_rotation_gets_its_share_of_every_pass(ws: Workspace) -> None:
    for root in "abcd":
        _make(ws, f"{root}/deep", 1000)
    with MarkerStream(ws, READY, discovery_budget=400, maximum_pass_markers=10_000) as stream:
        for _ in range(5):
            per_root = Counter(m.placement for m in stream.next_pass().markers)
            assert set(per_root) == {"a/deep", "b/deep", "c/deep", "d/deep"}
            assert min(per_root.values()) >= 400 // 4 - 2  # less the entries of the root and deep dirs


def test_the_first_place_rotates_by_one_root_per_pass(ws: Workspace) -> None:
    for root in ("r0", "r1", "r2"):
        _make(ws, root, 10)
    with MarkerStream(ws, READY, discovery_budget=1) as stream:
        for _ in range(4):  # one pass per root admitted, and one to find the listing's end
            stream.next_pass()
        served = [stream.next_pass().markers[0].placement for _ in range(12)]
    # Invariant (MarkerStream._rotation): a pass starts with the root after the previous pass's first.
    assert all(len(set(served[i : i + 3])) == 3 for i in range(len(served) - 2))


def test_roots_beyond_the_rotation_are_admitted_as_slots_free(ws: Workspace) -> None:
    made = set()
    for index in range(12):
        made |= _make(ws, f"r{index:02d}", 3 if index % 4 else 400)
    with MarkerStream(ws, READY, maximum_pass_markers=64, max_open_roots=3) as stream:
        passes = _cycle(stream)
        found = _cycle_markers(passes)
        assert len(found) == len(set(found)) and set(found) == made
        assert stream.statistics().open_directories == 0


def test_open_directories_stay_bounded(ws: Workspace, recorder: _Recorder) -> None:
    for index in range(20):
        _make(ws, f"r{index}/x/y", 50)
    with MarkerStream(ws, READY, discovery_budget=64, maximum_pass_markers=16, max_open_roots=4) as stream:
        for _ in range(200):
            result = stream.next_pass()
            stats = stream.statistics()
            assert stats.roots_in_rotation <= 4
            assert stats.open_directories == recorder.open_now <= 1 + 4 * 3
            if result.exhausted_cycle:
                break
        assert result.exhausted_cycle and recorder.open_now == 0
        stream.next_pass()
        assert recorder.open_now > 0
    assert recorder.open_now == 0  # close() releases every listing
    assert "roots_in_rotation=0" in repr(stream)


# -- concurrent changes --------------------------------------------------------------------------------
def test_markers_and_directories_vanishing_mid_walk_are_skipped(ws: Workspace) -> None:
    made = set()
    for index in range(20):
        made |= _make(ws, f"root/s{index:02d}", 10)
    claimed = ws.marker_dir(Kind.CLAIMED, "root")
    claimed.mkdir(parents=True)
    victims = sorted(made)

    def interfere() -> None:  # a concurrent manager claims markers and prunes a directory
        for placement, name in victims[:5]:
            source = ws.marker_dir(READY, placement) / name
            if source.exists():
                source.rename(claimed / name)
        del victims[:5]
        shutil.rmtree(ws.marker_dir(READY, victims[-1][0]), ignore_errors=True)

    with MarkerStream(ws, READY, discovery_budget=50, heartbeat_every=7, heartbeat=interfere) as stream:
        found = _cycle_markers(_cycle(stream))
    assert len(found) == len(set(found)) and set(found) <= made


def test_roots_appearing_and_disappearing_between_passes(ws: Workspace) -> None:
    _make(ws, "a", 300)
    _make(ws, "b", 300)
    with MarkerStream(ws, READY, maximum_pass_markers=50) as stream:
        stream.next_pass()
        shutil.rmtree(ws.marker_dir(READY, "b"))
        late = _make(ws, "c", 3)
        _cycle(stream)  # may still return what was read ahead from "b": candidates, not facts
        found = _cycle_markers(_cycle(stream))
        assert late <= set(found) and all(placement != "b" for placement, _ in found)


@pytest.mark.parametrize("error", [FileNotFoundError(), NotADirectoryError(), OSError(errno.ESTALE, "stale")])
def test_a_directory_vanishing_before_it_is_opened_is_skipped_silently(
    ws: Workspace, recorder: _Recorder, error: OSError
) -> None:
    kept = _make(ws, "a/keep", 2)
    _make(ws, "a/gone", 2)
    recorder.refuse["a/gone"] = error
    assert _walk(ws) == (kept, [])


def test_an_unreadable_directory_is_an_anomaly_and_other_errors_raise(
    ws: Workspace, recorder: _Recorder
) -> None:
    kept = _make(ws, "a/keep", 2)
    _make(ws, "a/locked", 2)
    recorder.refuse["a/locked"] = PermissionError(errno.EACCES, "denied")
    locked = ws.marker_dir(READY, "a/locked")
    assert _walk(ws) == (kept, [Anomaly(locked, AnomalyReason.UNREADABLE_DIRECTORY)])
    recorder.refuse["a/locked"] = OSError(errno.EIO, "I/O error")
    with pytest.raises(WorkspaceError, match="I/O error"):
        _walk(ws)


def test_a_listing_failing_while_read(ws: Workspace, recorder: _Recorder) -> None:
    _make(ws, "a", 2)
    recorder.fail_reading = OSError(errno.ESTALE, "stale")
    assert _walk(ws) == (set(), [])
    recorder.fail_reading = OSError(errno.EIO, "I/O error")
    with pytest.raises(WorkspaceError, match="I/O error"), MarkerStream(ws, READY) as stream:
        stream.next_pass()


def test_an_entry_of_no_type_that_vanished_is_skipped(tmp_path: Path) -> None:
    class Vanished:  # what a DT_UNKNOWN filesystem shows once the stat finds nothing
        name = str(_name())
        path = str(tmp_path / name)

        def is_file(self, *, follow_symlinks: bool) -> bool:
            return False

        is_dir = is_file

        def is_symlink(self) -> bool:
            return False

    assert _classify(Vanished(), READY, "a") is None  # type: ignore[arg-type]


# -- anomalies -------------------------------------------------------------------------------------------
def _anomalous_tree(ws: Workspace, tmp_path: Path) -> tuple[set[Found], set[tuple[Path, AnomalyReason]]]:
    made = _make(ws, "a", 2)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / str(_name())).touch()
    a = ws.marker_dir(READY, "a")
    state = ws.state_dir(READY)
    (a / "not-a-marker.txt").touch()
    (a / str(_name())).symlink_to(elsewhere / "x")
    (a / "linked-dir").symlink_to(elsewhere, target_is_directory=True)
    os.mkfifo(a / str(_name()))
    (a / ".httk-workflow").mkdir()
    (state / str(_name())).touch()
    expected = {
        (a / "not-a-marker.txt", AnomalyReason.UNPARSEABLE_NAME),
        (a / "linked-dir", AnomalyReason.SYMLINK),
        (a / ".httk-workflow", AnomalyReason.RESERVED_PLACEMENT),
    }
    for entry in a.iterdir():
        if entry.is_symlink() and entry.name != "linked-dir":
            expected.add((entry, AnomalyReason.SYMLINK))
        elif entry.is_fifo():
            expected.add((entry, AnomalyReason.NOT_A_REGULAR_FILE))
    expected |= {(entry, AnomalyReason.NO_PLACEMENT) for entry in state.iterdir() if entry.is_file()}
    return made, expected


def test_anomalies_are_reported_and_never_followed(ws: Workspace, tmp_path: Path) -> None:
    made, expected = _anomalous_tree(ws, tmp_path)
    markers, anomalies = _walk(ws)
    assert markers == made
    assert {(a.path, a.reason) for a in anomalies} == expected and len(anomalies) == len(expected)
    with MarkerStream(ws, READY) as stream:
        [result] = _cycle(stream)
    assert set(_found(result.markers)) == made
    assert {(a.path, a.reason) for a in result.anomalies} == expected


def test_a_prefix_through_a_symlink_is_not_followed(ws: Workspace, tmp_path: Path) -> None:
    target = tmp_path / "target"
    (target / "b").mkdir(parents=True)
    (target / "b" / str(_name())).touch()
    ws.state_dir(READY).mkdir(parents=True, exist_ok=True)
    (ws.state_dir(READY) / "a").symlink_to(target, target_is_directory=True)
    expected = [Anomaly(ws.state_dir(READY) / "a", AnomalyReason.SYMLINK)]
    assert _walk(ws, placement_prefixes=["a/b"]) == (set(), expected)
    with MarkerStream(ws, READY, placement_prefixes=["a/b"]) as stream:
        assert stream.next_pass() == PassResult([], expected, 0, True)


# -- placement prefixes --------------------------------------------------------------------------------
def test_prefixes_are_validated_and_overlaps_dropped() -> None:
    assert normalize_prefixes(["a/b", "a", "a", "ab", "c/d", "c/d/e"]) == ("a", "ab", "c/d")
    with pytest.raises(InvalidNameError):
        normalize_prefixes(["a/../b"])
    with pytest.raises(InvalidNameError):
        normalize_prefixes(["/a"])


def test_prefix_pruning_opens_nothing_outside_the_prefix(ws: Workspace, recorder: _Recorder) -> None:
    inside = _make(ws, "a/b", 5) | _make(ws, "a/b/deeper", 5)
    for placement in ("a", "a/c", "a/bb", "z", "z/a/b"):
        _make(ws, placement, 5)
    allowed = str(ws.marker_dir(READY, "a/b"))
    with MarkerStream(ws, READY, placement_prefixes=["a/b"], discovery_budget=3) as stream:
        assert set(_cycle_markers(_cycle(stream))) == inside
    assert _walk(ws, placement_prefixes=["a/b"]) == (inside, [])
    assert recorder.opened
    assert all(path == allowed or path.startswith(allowed + os.sep) for path in recorder.opened)


def test_overlapping_prefixes_yield_each_marker_once(ws: Workspace) -> None:
    made = _make(ws, "a", 3) | _make(ws, "a/b", 3) | _make(ws, "a/b/c", 3)
    _make(ws, "ab", 3)
    with MarkerStream(ws, READY, placement_prefixes=["a/b", "a"], maximum_pass_markers=2) as stream:
        found = _cycle_markers(_cycle(stream))
    assert len(found) == len(set(found)) and set(found) == made
    assert _walk(ws, placement_prefixes=["a", "a/b"])[0] == made


def test_a_prefix_without_a_directory_scans_nothing(ws: Workspace) -> None:
    _make(ws, "a", 1)
    with MarkerStream(ws, READY, placement_prefixes=["missing/x"]) as stream:
        assert stream.next_pass() == PassResult([], [], 0, True)


# -- the property: a cycle of passes is the exhaustive walk ---------------------------------------------
_components = st.sampled_from(["a", "b", "c"])
_placements = st.lists(_components, min_size=1, max_size=3).map("/".join)
_trees = st.dictionaries(_placements, st.integers(min_value=0, max_value=12), max_size=8)


_scenarios = st.fixed_dictionaries(
    {
        "tree": _trees,
        "junk": st.lists(_placements, max_size=3),
        "prefixes": st.lists(_placements, max_size=2),
        "entries": st.integers(min_value=1, max_value=30),
        "markers": st.integers(min_value=1, max_value=10),
        "rotation": st.integers(min_value=1, max_value=4),
    }
)


def _build(root: Path, scenario: dict[str, Any]) -> Workspace:
    ws = init(root / "ws", durable=False)
    for placement, count in scenario["tree"].items():
        _make(ws, placement, count)
    for placement in scenario["junk"]:
        ws.marker_dir(READY, placement).mkdir(parents=True, exist_ok=True)
        (ws.marker_dir(READY, placement) / f"junk-{uuid4()}").touch()
    return ws


def _stream(ws: Workspace, scenario: dict[str, Any], *, count_only: bool = False) -> MarkerStream:
    return MarkerStream(
        ws,
        READY,
        placement_prefixes=scenario["prefixes"],
        discovery_budget=scenario["entries"],
        maximum_pass_markers=scenario["markers"],
        max_open_roots=scenario["rotation"],
        count_only=count_only,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=_scenarios)
def test_a_cycle_of_passes_finds_what_walk_markers_finds(scenario: dict[str, Any]) -> None:
    entries: int = scenario["entries"]
    markers: int = scenario["markers"]
    with tempfile.TemporaryDirectory() as scratch:
        ws = _build(Path(scratch), scenario)
        expected, expected_anomalies = _walk(ws, placement_prefixes=scenario["prefixes"])
        with _stream(ws, scenario) as stream:
            for _ in range(2):
                passes = _cycle(stream, limit=500)
                assert all(p.entries_visited <= entries and len(p.markers) <= markers for p in passes)
                found = _cycle_markers(passes)
                assert len(found) == len(set(found)) and set(found) == expected
                anomalies = [a for p in passes for a in p.anomalies]
                assert Counter(anomalies) == Counter(expected_anomalies)
                assert all(not p.counted for p in passes)
            assert stream.statistics().open_directories == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=_scenarios)
def test_a_counting_cycle_counts_per_placement_what_walk_markers_finds(scenario: dict[str, Any]) -> None:
    entries: int = scenario["entries"]
    markers: int = scenario["markers"]
    with tempfile.TemporaryDirectory() as scratch:
        ws = _build(Path(scratch), scenario)
        expected, expected_anomalies = _walk(ws, placement_prefixes=scenario["prefixes"])
        with _stream(ws, scenario, count_only=True) as stream:
            for _ in range(2):
                passes = _cycle(stream, limit=500)
                assert all(p.entries_visited <= entries and p.counted.total() <= markers for p in passes)
                assert all(p.markers == [] for p in passes)
                counted = sum((p.counted for p in passes), Counter[str]())
                assert counted == Counter(placement for placement, _name in expected)
                anomalies = [a for p in passes for a in p.anomalies]
                assert Counter(anomalies) == Counter(expected_anomalies)
            assert stream.statistics().open_directories == 0


def test_counting_stops_a_pass_at_maximum_pass_markers(ws: Workspace) -> None:
    _make(ws, "flat", 100)
    with MarkerStream(ws, READY, maximum_pass_markers=30, count_only=True) as stream:
        passes = _cycle(stream)
    assert [p.counted.total() for p in passes] == [30, 30, 30, 10]
