"""The request document (D13), its strict reading, and the action-validity table against the state machine."""

from __future__ import annotations

import json
import uuid

import pytest
from httk.workflow.engine.core._frames import kept_members
from httk.workflow.engine.core._states import CORE_KINDS, TRANSITIONS, Kind, Trigger
from httk.workflow.engine.requests._documents import (
    ACTIONS,
    VALID_KINDS,
    MalformedRequestError,
    parse_request,
    refusal,
    request_document,
)
from httk.workflow.models import validator

KEY = "silicon-relax--01234567-89ab-cdef-0123-456789abcdef"
REF = "w0123456789abcdef0123456789abcdef-s0-oc-l1c2-h04f3934b1b740ac6c076840100f0f3b2"


def document(action: str = "pause", **extra: object) -> dict[str, object]:
    return request_document(
        request_id=str(uuid.uuid4()),
        job_key=KEY,
        placement="proj/a",
        expected_generation=3,
        expected_record_ref=REF,
        action=action,
        operator="ann",
        reason="inputs repaired",
        created_at="2026-07-26T09:12:44.512314Z",
        **extra,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("action", "extra", "members"),
    [
        ("pause", {}, set()),
        ("cancel", {"force": True}, set()),  # force only where the action takes it
        ("set_priority", {"priority": 7}, {"priority"}),
        ("override_step", {"step": "relax", "force": True}, {"step", "force"}),
        ("continue", {"force": True}, {"force"}),
    ],
)
def test_documents_have_the_d13_shape(action: str, extra: dict[str, object], members: set[str]) -> None:
    built = document(action, **extra)
    common = {"format", "format_version", "request_id", "job_id", "job_key", "placement"}
    common |= {"expected_generation", "expected_record_ref", "action", "operator", "reason", "created_at"}
    assert set(built) == common | members
    assert built["job_id"] == "01234567-89ab-cdef-0123-456789abcdef"
    assert validator("request").is_valid(built)
    parsed = parse_request(json.dumps(built).encode(), f"{built['request_id']}.json")
    assert parsed.action == action and parsed.document == built
    assert parsed.frame_members() == {
        "operator": "ann",
        "operator_reason": "inputs repaired",
        "request_id": built["request_id"],
    }


def test_a_generation_zero_request_expects_init() -> None:
    built = document()
    built.update(expected_generation=0, expected_record_ref="init")
    parsed = parse_request(json.dumps(built).encode(), f"{built['request_id']}.json")
    assert parsed.expected_generation == 0 and parsed.expected_record_ref == "init"


@pytest.mark.parametrize(
    ("change", "member"),
    [
        ({"expected_generation": 0}, "expected_record_ref"),
        ({"expected_generation": True}, "expected_generation"),
        ({"expected_record_ref": "w-not-a-ref"}, "expected_record_ref"),
        ({"job_key": "x--01234567-89ab-cdef-0123-456789abcdee"}, "job_key"),
        ({"created_at": "yesterday"}, "created_at"),
        ({"reason": None}, "reason"),
        ({"format_version": 2}, "format"),
    ],
)
def test_defects_name_their_member(change: dict[str, object], member: str) -> None:
    built = {**document(), **change}
    with pytest.raises(MalformedRequestError) as caught:
        parse_request(json.dumps(built).encode(), f"{built['request_id']}.json")
    assert caught.value.member == member


def test_unknown_members_are_ignored() -> None:
    built = {**document(), "ticket": "OPS-1234"}
    parse_request(json.dumps(built).encode(), f"{built['request_id']}.json")


# The specification's "Action validity is deliberately narrow" list.
SPEC_VALIDITY = {
    "continue": {Kind.FAILED, Kind.PAUSED},
    "override_step": {Kind.FAILED, Kind.PAUSED},
    "set_priority": {Kind.SUBMITTED, Kind.READY, Kind.WAITING, Kind.PAUSED, Kind.FAILED},
    "pause": {Kind.SUBMITTED, Kind.READY, Kind.WAITING},
    "cancel": {k for k in CORE_KINDS if k not in (Kind.SUCCEEDED, Kind.FAILED, Kind.CANCELLED)},
}


def test_the_kinds_each_action_fits_are_the_specification_s() -> None:
    assert {action: set(kinds) for action, kinds in VALID_KINDS.items()} == SPEC_VALIDITY


_TRIGGERS = {
    "continue": Trigger.OPERATOR_CONTINUE,
    "override_step": Trigger.OPERATOR_CONTINUE,
    "pause": Trigger.PAUSE,
    "set_priority": Trigger.SET_PRIORITY,
}


@pytest.mark.parametrize("action", ACTIONS)
def test_every_admitted_action_has_its_transition(action: str) -> None:
    for kind in VALID_KINDS[action]:
        if action == "cancel":
            rows = {(kind, Kind.CANCELLED, Trigger.CANCEL), (kind, Kind.CANCELLING, Trigger.CANCEL_FENCE)}
            assert rows & TRANSITIONS or kind is Kind.CANCELLING, kind
            continue
        destination = {"continue": Kind.READY, "override_step": Kind.READY, "pause": Kind.PAUSED}.get(
            action, kind
        )
        assert (kind, destination, _TRIGGERS[action]) in TRANSITIONS, (action, kind)


@pytest.mark.parametrize("action", ACTIONS)
def test_every_refused_kind_has_a_reason(action: str) -> None:
    for kind in CORE_KINDS:
        reason = refusal(action, kind)
        assert (reason is None) is (kind in VALID_KINDS[action])
        if reason is not None:
            assert action in reason and kind.value in reason


def test_kept_members_drop_what_every_frame_writes_afresh() -> None:
    frame = {
        "format": "httk-workflow-state",
        "kind": "waiting",
        "state_generation": 4,
        "priority": 5,
        "reason": "commit",
        "join": {"children": []},
        "operator": "bob",
        "request_id": "x",
        "revival_hazard": {},
    }
    assert kept_members(frame) == {"join": {"children": []}}
    assert kept_members(None) == {}
