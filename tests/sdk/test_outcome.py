"""Outcome documents byte for byte (docs/outcome-documents.md), their checks, and their publication."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.publish._outcome import validate_outcome
from httk.workflow.models import validator
from httk.workflow.protocol._jsonio import read_json_object
from httk.workflow.sdk import Attempt, OutcomeAlreadyPublishedError, OutcomeError
from httk.workflow.sdk import _attempt as _attempt_module
from httk.workflow.sdk._transaction import stage_transaction

from tests.sdk.attempts import (
    ACTIVATION_ID,
    ATTEMPT_ID,
    HEAD,
    JOB_ID,
    Layout,
    ascii_and_hostile,
    fd_path,
    make_attempt,
)

STEPS = ["prepare", "collect"]
TAIL = ',"runner_steps":["prepare","collect"]}\n'


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return make_attempt(tmp_path)


def attempt(layout: Layout, **environ: str) -> Attempt:
    return Attempt.load(layout.context_path, runner_steps=STEPS, environ=environ)


# -- exact bytes -------------------------------------------------------------------------------------
def test_advance_with_every_member(layout: Layout) -> None:
    attempt(layout).advance("collect", resources={"procs": 4, "gpus": 0}, priority=10, message="converged")
    assert (
        layout.outcome_bytes()
        == (
            HEAD + '"action":"advance","next_step":"collect","priority":10,'
            '"resources":{"procs":4,"gpus":0},"message":"converged"' + TAIL
        ).encode()
    )


def test_advance_alone(layout: Layout) -> None:
    attempt(layout).advance("collect")
    assert layout.outcome_bytes() == (HEAD + '"action":"advance","next_step":"collect"' + TAIL).encode()


def test_succeed(layout: Layout) -> None:
    attempt(layout).succeed()
    assert layout.outcome_bytes() == (HEAD + '"action":"succeed"' + TAIL).encode()


def test_succeed_with_message_and_priority(layout: Layout) -> None:
    attempt(layout).succeed(message="done", priority=0)
    expected = HEAD + '"action":"succeed","priority":0,"message":"done"' + TAIL
    assert layout.outcome_bytes() == expected.encode()


def test_fail_with_every_member(layout: Layout) -> None:
    details = {"iterations": 61, "log": "vasp/convergence.log", "ok": None, "ratio": 0.5}
    attempt(layout).fail("vasp.nonconvergent", "did not converge", details, retryable=False)
    assert (
        layout.outcome_bytes()
        == (
            HEAD + '"action":"fail","failure":{"code":"vasp.nonconvergent","message":"did not converge",'
            '"details":{"iterations":61,"log":"vasp/convergence.log","ok":null,"ratio":0.5},"retryable":false}'
            + TAIL
        ).encode()
    )


def test_fail_alone_and_retryable_without_details(tmp_path: Path) -> None:
    first, second = make_attempt(tmp_path / "1"), make_attempt(tmp_path / "2")
    attempt(first).fail("x.y", "broken")
    attempt(second).fail("x.y", "broken", retryable=True)
    body = '"action":"fail","failure":{"code":"x.y","message":"broken"'
    assert first.outcome_bytes() == (HEAD + body + "}" + TAIL).encode()
    assert second.outcome_bytes() == (HEAD + body + ',"retryable":true}' + TAIL).encode()


def test_retry(layout: Layout) -> None:
    attempt(layout).retry("ZBRENT error")
    expected = HEAD + '"action":"retry","retry":{"reason":"ZBRENT error"}' + TAIL
    assert layout.outcome_bytes() == expected.encode()


def test_pause(layout: Layout) -> None:
    attempt(layout).pause("check the cell")
    expected = HEAD + '"action":"pause","pause":{"reason":"check the cell"}' + TAIL
    assert layout.outcome_bytes() == expected.encode()


def test_retry_and_pause_with_priority_and_message(tmp_path: Path) -> None:
    first, second = make_attempt(tmp_path / "1"), make_attempt(tmp_path / "2")
    attempt(first).retry("ZBRENT error", priority=3, message="m")
    attempt(second).pause("check", message="m", priority=999)
    assert (
        first.outcome_bytes()
        == (
            HEAD + '"action":"retry","retry":{"reason":"ZBRENT error"},"priority":3,"message":"m"' + TAIL
        ).encode()
    )
    assert (
        second.outcome_bytes()
        == (HEAD + '"action":"pause","pause":{"reason":"check"},"priority":999,"message":"m"' + TAIL).encode()
    )


def test_runner_steps_are_left_out_when_unknown(layout: Layout) -> None:
    Attempt.load(layout.context_path, environ={}).succeed()
    assert layout.outcome_bytes() == (HEAD + '"action":"succeed"}\n').encode()


def test_an_empty_runner_has_an_empty_runner_steps(layout: Layout) -> None:
    Attempt.load(layout.context_path, environ={}, runner_steps=[]).succeed()
    assert layout.outcome_bytes() == (HEAD + '"action":"succeed","runner_steps":[]}\n').encode()


# -- hostile strings ---------------------------------------------------------------------------------
CONTROL_ESCAPES = (
    '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f'
    "\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d"
    '\\u001e\\u001f"'
)


def test_every_control_character_is_escaped_as_the_contract_says(layout: Layout) -> None:
    text = "".join(chr(code) for code in range(0x20))
    attempt(layout).succeed(message=text + '"\\\x7f')
    expected = HEAD + '"action":"succeed","message":' + CONTROL_ESCAPES[:-1] + '\\"\\\\\x7f"' + TAIL
    assert layout.outcome_bytes() == expected.encode()


def test_non_ascii_is_written_as_utf8_unescaped(layout: Layout) -> None:
    attempt(layout).succeed(message="Grüße 🧪")
    data = layout.outcome_bytes()
    assert "Grüße 🧪".encode() in data
    assert b"\\u" not in data
    assert not data.startswith(b"\xef\xbb\xbf")


@pytest.mark.parametrize("text", list(ascii_and_hostile()))
def test_hostile_strings_round_trip_in_every_text_member(tmp_path: Path, text: str) -> None:
    padded = f"x{text}x"  # never blank, whatever ``text`` is
    actions: list[tuple[str, Any]] = [
        ("advance", lambda a: a.advance("collect", message=padded)),
        ("succeed", lambda a: a.succeed(message=padded)),
        ("fail", lambda a: a.fail("x.y", padded, {padded: [padded, {"k": padded}]})),
        ("retry", lambda a: a.retry(padded)),
        ("pause", lambda a: a.pause(padded)),
    ]
    for name, act in actions:
        layout = make_attempt(tmp_path / name)
        act(attempt(layout))
        data = layout.outcome_bytes()
        document = json.loads(data)
        assert data == json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        if name == "fail":
            assert document["failure"]["message"] == padded
            assert document["failure"]["details"] == {padded: [padded, {"k": padded}]}
        elif name in ("retry", "pause"):
            assert document[name]["reason"] == padded
        else:
            assert document["message"] == padded


def test_a_lone_surrogate_is_refused_before_writing(layout: Layout) -> None:
    with pytest.raises(OutcomeError, match=r"argument message .*surrogate"):
        attempt(layout).succeed(message="half \ud800 a pair")
    with pytest.raises(OutcomeError, match=r"argument details .*surrogate"):
        attempt(layout).fail("x.y", "m", {"log": "\udfff"})
    assert layout.files() == untouched(layout)


# -- arguments are checked before anything is written -----------------------------------------------
def untouched(layout: Layout, *control: str) -> list[str]:
    """The files of a fresh attempt, plus ``control`` below its control directory."""
    prefix = layout.control_dir.name
    names = ["job.json", "run", prefix, f"{prefix}/context.json", *(f"{prefix}/{name}" for name in control)]
    return sorted(names)


@pytest.mark.parametrize(
    ("act", "argument"),
    [
        (lambda a: a.advance("two words"), "step"),
        (lambda a: a.advance(".hidden"), "step"),
        (lambda a: a.advance("x" * 129), "step"),
        (lambda a: a.advance(7), "step"),
        (lambda a: a.advance("collect", priority=1000), "priority"),
        (lambda a: a.advance("collect", priority=-1), "priority"),
        (lambda a: a.advance("collect", priority=True), "priority"),
        (lambda a: a.advance("collect", priority="5"), "priority"),
        (lambda a: a.advance("collect", resources={"procs": -1}), "resources"),
        (lambda a: a.advance("collect", resources={"procs": 1.5}), "resources"),
        (lambda a: a.advance("collect", resources={"procs": True}), "resources"),
        (lambda a: a.advance("collect", resources={"Bad Label": 1}), "resources"),
        (lambda a: a.advance("collect", resources=[("procs", 1)]), "resources"),
        (lambda a: a.advance("collect", message=""), "message"),
        (lambda a: a.succeed(message="  \n"), "message"),
        (lambda a: a.succeed(message=b"bytes"), "message"),
        (lambda a: a.fail("two words", "m"), "code"),
        (lambda a: a.fail("", "m"), "code"),
        (lambda a: a.fail("tab\tcode", "m"), "code"),
        (lambda a: a.fail("x" * 129, "m"), "code"),
        (lambda a: a.fail("é" * 65, "m"), "code"),
        (lambda a: a.fail(None, "m"), "code"),
        (lambda a: a.fail("x.y", ""), "message"),
        (lambda a: a.fail("x.y", "m", ["not", "an", "object"]), "details"),
        (lambda a: a.fail("x.y", "m", {1: "int key"}), "details"),
        (lambda a: a.fail("x.y", "m", {"nan": float("nan")}), "details"),
        (lambda a: a.fail("x.y", "m", {"set": {1, 2}}), "details"),
        (lambda a: a.fail("x.y", "m", retryable="yes"), "retryable"),
        (lambda a: a.retry(""), "reason"),
        (lambda a: a.retry("r", priority=1000), "priority"),
        (lambda a: a.pause(None), "reason"),
        (lambda a: a.pause("p", message=""), "message"),
    ],
)
def test_an_invalid_argument_is_named_and_nothing_is_written(layout: Layout, act: Any, argument: str) -> None:
    a = attempt(layout)
    with pytest.raises(OutcomeError, match=f"^argument {argument} ") as caught:
        act(a)
    assert caught.value.argument == argument
    assert not isinstance(caught.value, OutcomeAlreadyPublishedError)
    assert layout.files() == untouched(layout)
    assert a.published is False


def test_the_largest_code_and_deepest_details_the_manager_reads_are_accepted(tmp_path: Path) -> None:
    deep: Any = "leaf"
    for _ in range(61):  # outcome > failure > details > 61 more levels = 64, the protocol's limit
        deep = [deep]
    first = make_attempt(tmp_path / "ok")
    attempt(first).fail("é" * 64, "m", {"deep": deep})
    assert first.outcome()["failure"]["code"] == "é" * 64
    read_json_object(first.outcome_path, document="outcome.json")  # the manager's reader takes it
    second = make_attempt(tmp_path / "deep")
    with pytest.raises(OutcomeError, match="argument details nests 65 levels"):
        attempt(second).fail("x.y", "m", {"deep": [deep]})


def test_read_only_mappings_and_tuples_are_written_as_json(layout: Layout) -> None:
    from types import MappingProxyType

    attempt(layout).fail("x.y", "m", MappingProxyType({"child": MappingProxyType({"ids": (1, 2)})}))
    assert layout.outcome()["failure"]["details"] == {"child": {"ids": [1, 2]}}


@pytest.mark.parametrize(
    "act",
    [
        lambda a: a.advance("collect", resources={"procs": 4}, priority=3, message="m"),
        lambda a: a.succeed(message="m", priority=999),
        lambda a: a.fail("x.y", "m", {"k": [1]}, retryable=True),
        lambda a: a.retry("r"),
        lambda a: a.pause("p"),
    ],
)
def test_every_outcome_passes_the_managers_validation_and_the_schema(layout: Layout, act: Any) -> None:
    act(attempt(layout))
    document = read_json_object(layout.outcome_path, document="outcome.json")
    cleaned, notes = validate_outcome(
        document, job_id=JOB_ID, activation_id=ACTIVATION_ID, attempt_id=ATTEMPT_ID
    )
    assert (cleaned, notes) == (document, [])
    assert list(validator("outcome").iter_errors(document)) == []


# -- exactly one outcome -----------------------------------------------------------------------------
def test_a_second_outcome_is_refused_and_the_first_stays(layout: Layout) -> None:
    a = attempt(layout)
    assert a.published is False
    a.succeed(message="first")
    assert a.published is True
    with pytest.raises(OutcomeAlreadyPublishedError) as caught:
        a.fail("x.y", "second")
    assert caught.value.path == str(layout.control_dir / "outcome.ready")
    assert layout.outcome()["message"] == "first"
    assert layout.files() == untouched(layout, "outcome.ready", "outcome.ready/outcome.json")


def test_an_outcome_another_process_published_is_respected(layout: Layout) -> None:
    a = attempt(layout)
    ready = layout.control_dir / "outcome.ready"
    ready.mkdir()
    (ready / "outcome.json").write_text('{"from":"bash"}\n')
    assert a.published is True
    with pytest.raises(OutcomeAlreadyPublishedError):
        a.succeed()
    with pytest.raises(OutcomeAlreadyPublishedError):
        a.advance("collect")
    with pytest.raises(OutcomeAlreadyPublishedError):
        a.retry("r")
    assert (ready / "outcome.json").read_text() == '{"from":"bash"}\n'
    assert sorted(p.name for p in layout.control_dir.iterdir()) == ["context.json", "outcome.ready"]


def test_transaction_calls_after_an_outcome_another_process_published_are_refused(tmp_path: Path) -> None:
    """The transaction would be lost with the outcome gone: the call is refused, naming it."""
    layout = make_attempt(tmp_path, data_generation=0, data_dir=str(tmp_path / "ws" / "data"))
    a = Attempt.load(layout.context_path, environ={})
    tx = a.transaction()
    tx.make_dir("results")
    (layout.control_dir / "outcome.ready").mkdir()
    for operation, call in (
        ("put_file", lambda: tx.put_file("results/e", b"1")),
        ("remove", lambda: tx.remove("results")),
        ("transaction", a.transaction),
    ):
        with pytest.raises(OutcomeAlreadyPublishedError, match=f": {operation} refused: ") as caught:
            call()
        assert caught.value.operation == operation
        assert caught.value.path == str(layout.control_dir / "outcome.ready")
    assert tx.operation_ids == ("op1",)


def test_losing_the_race_for_outcome_ready_leaves_no_draft(layout: Layout, monkeypatch: Any) -> None:
    """Another process publishes between the SDK's check and its rename: the rename refuses."""
    a = attempt(layout)
    real_rename = os.rename

    def rename_after_a_rival(src: Any, dst: Any) -> None:
        rival = Path(dst)
        rival.mkdir()
        (rival / "outcome.json").write_text("rival\n")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename_after_a_rival)
    with pytest.raises(OutcomeAlreadyPublishedError):
        a.succeed()
    monkeypatch.undo()
    assert (layout.control_dir / "outcome.ready" / "outcome.json").read_text() == "rival\n"
    assert sorted(p.name for p in layout.control_dir.iterdir()) == ["context.json", "outcome.ready"]


def test_a_missing_control_directory_is_an_outcome_error(layout: Layout) -> None:
    a = attempt(layout)
    (layout.control_dir / "context.json").unlink()
    layout.control_dir.rmdir()
    with pytest.raises(OutcomeError, match="cannot create an outcome draft"):
        a.succeed()


# -- durability --------------------------------------------------------------------------------------
def record_syncs(monkeypatch: Any) -> list[tuple[str, str]]:
    """Record every fsync (by path) and rename, in order."""
    events: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(("fsync", fd_path(fd)))
        real_fsync(fd)

    def rename(src: Any, dst: Any) -> None:
        events.append(("rename", f"{src} -> {dst}"))
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    return events


@pytest.mark.parametrize("how", ["context", "environment"])
def test_durable_publication_syncs_the_draft_then_renames_then_syncs_the_control_dir(
    tmp_path: Path, monkeypatch: Any, how: str
) -> None:
    layout = make_attempt(tmp_path, durable=how == "context")
    environ = {"HTTK_WORKFLOW_DURABLE": "1"} if how == "environment" else {}
    a = Attempt.load(layout.context_path, runner_steps=STEPS, environ=environ)
    events = record_syncs(monkeypatch)
    a.succeed()
    control = layout.control_dir
    [(_, renamed)] = [event for event in events if event[0] == "rename"]
    draft = renamed.split(" -> ")[0]
    assert Path(draft).parent == control and Path(draft).name.startswith("outcome.tmp.")
    assert events == [
        ("fsync", f"{draft}/outcome.json"),
        ("fsync", draft),
        ("rename", f"{draft} -> {control}/outcome.ready"),
        ("fsync", str(control)),
    ]


def test_a_non_durable_publication_syncs_nothing(layout: Layout, monkeypatch: Any) -> None:
    a = Attempt.load(layout.context_path, runner_steps=STEPS, environ={"HTTK_WORKFLOW_DURABLE": "0"})
    events = record_syncs(monkeypatch)
    a.succeed()
    assert [kind for kind, _ in events] == ["rename"]


def test_a_publication_refused_after_its_transaction_was_staged_leaves_no_draft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process published while the bundle was staged: the draft is removed whole, bundle included."""
    layout = make_attempt(tmp_path, data_generation=0, data_dir=str(tmp_path / "ws" / "data"))
    a = Attempt.load(layout.context_path, environ={})
    tx = a.transaction()
    tx.make_dir("results")
    tx.put_file("results/energy.json", b"-10.8\n")
    real_stage = stage_transaction

    def stage_then_lose_the_race(*args: Any, **kwargs: Any) -> Any:
        staged = real_stage(*args, **kwargs)
        (layout.control_dir / "outcome.ready").mkdir()  # the other publication, first after all
        return staged

    monkeypatch.setattr(_attempt_module, "stage_transaction", stage_then_lose_the_race)
    with pytest.raises(OutcomeAlreadyPublishedError):
        a.succeed()

    assert sorted(path.name for path in layout.control_dir.iterdir()) == ["context.json", "outcome.ready"]
