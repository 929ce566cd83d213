"""The attempt context: every property from a manager-like context.json, and refusal of malformed ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.sdk import Attempt, ContextError

from tests.sdk.attempts import (
    ACTIVATION_ID,
    ATTEMPT_ID,
    JOB_ID,
    JOB_KEY,
    PLACEMENT,
    PREVIOUS_ATTEMPT_ID,
    WORKSPACE_ID,
    Layout,
    make_attempt,
)

SCHEMAS = Path(__file__).parents[2] / "schemas"
UNCLEAN_RETRY: dict[str, Any] = {
    "step": "relax",
    "attempt_ordinal": 2,
    "activation_ordinal": 3,
    "activation_reason": "advance",
    "is_restart": True,
    "is_unclean_restart": True,
    "attempt_reason": "lease_lost",
    "previous_attempt_id": PREVIOUS_ATTEMPT_ID,
    "data_generation": 4,
    "durable": True,
    "priority": 17,
    "resources": {"procs": 32},
}


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return make_attempt(tmp_path, **UNCLEAN_RETRY)


def test_every_property_reads_the_context(layout: Layout) -> None:
    a = Attempt.load(layout.context_path, environ={})

    assert (a.step, a.job_id, a.job_key, a.placement) == ("relax", JOB_ID, JOB_KEY, PLACEMENT)
    assert (a.workspace_id, a.activation_id, a.attempt_id) == (WORKSPACE_ID, ACTIVATION_ID, ATTEMPT_ID)
    assert (a.attempt_ordinal, a.activation_ordinal, a.activation_reason) == (2, 3, "advance")
    assert (a.is_restart, a.is_unclean_restart, a.attempt_reason) == (True, True, "lease_lost")
    assert (a.previous_attempt_id, a.data_generation, a.durable) == (PREVIOUS_ATTEMPT_ID, 4, True)
    assert (a.priority, a.resources, a.children) == (17, {"procs": 32}, [])
    assert (a.control_dir, a.job_dir) == (layout.control_dir, layout.job_dir)
    assert (a.workdir, a.workspace_dir) == (layout.workdir, layout.workspace_dir)
    assert a.context == layout.context
    assert a.runner_steps is None
    assert repr(a) == (
        f"<Attempt step='relax' job_key={JOB_KEY!r} attempt_ordinal=2 attempt_reason='lease_lost' "
        "published=False>"
    )


def test_the_property_types_are_exact(layout: Layout) -> None:
    a = Attempt.load(layout.context_path, environ={})
    assert all(isinstance(path, Path) for path in (a.workdir, a.job_dir, a.control_dir, a.workspace_dir))
    assert type(a.attempt_ordinal) is int and type(a.is_restart) is bool


def test_resources_are_a_copy(layout: Layout) -> None:
    a = Attempt.load(layout.context_path, environ={})
    a.resources["procs"] = 1
    assert a.resources == {"procs": 32}


def test_the_first_attempt_of_an_activation(tmp_path: Path) -> None:
    a = Attempt.load(make_attempt(tmp_path).context_path, environ={})
    assert (a.is_restart, a.previous_attempt_id, a.data_generation, a.durable) == (False, None, None, False)


def test_join_children_are_read_only(tmp_path: Path) -> None:
    child = {"label": "branch-a", "job_id": JOB_ID, "state": "succeeded", "failure": None, "tags": ["x"]}
    layout = make_attempt(tmp_path, children=[child])
    a = Attempt.load(layout.context_path, environ={})

    [observed] = a.children
    assert observed["label"] == "branch-a" and observed["tags"] == ("x",)
    assert dict(observed) == {**child, "tags": ("x",)}
    with pytest.raises(TypeError):
        observed["label"] = "changed"  # type: ignore[index]
    a.children.clear()
    assert len(a.children) == 1


def test_optional_members_absent_fall_back(tmp_path: Path) -> None:
    """A context with only the schema's required members: paths from the environment and the layout."""
    layout = make_attempt(tmp_path)
    required = json.loads((SCHEMAS / "attempt-context.schema.json").read_text())["required"]
    assert len(required) == 13
    minimal = {key: layout.context[key] for key in required}
    layout.context_path.write_text(json.dumps(minimal))

    a = Attempt.load(layout.context_path, environ={"HTTK_WORKFLOW_WORKDIR": "/elsewhere/run"})

    assert (a.control_dir, a.job_dir, a.job_key) == (layout.control_dir, layout.job_dir, JOB_KEY)
    assert a.workdir == Path("/elsewhere/run")
    assert (a.activation_ordinal, a.activation_reason, a.priority, a.resources) == (None, None, None, {})
    assert (a.durable, a.children) == (False, [])
    with pytest.raises(ContextError, match="workspace_dir"):
        _ = a.workspace_dir
    assert Attempt.load(layout.context_path, environ={"HTTK_WORKFLOW_DURABLE": "1"}).durable is True


def test_the_context_is_found_through_the_environment(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path)
    a = Attempt.load(environ=layout.environ())
    assert a.attempt_id == ATTEMPT_ID
    with pytest.raises(ContextError, match="HTTK_WORKFLOW_CONTEXT is not set"):
        Attempt.load(environ={})


@pytest.mark.parametrize(
    ("change", "member"),
    [
        ({"format": "httk-workflow-outcome"}, "format"),
        ({"format_version": 2}, "format"),
        ({"job_id": ""}, "job_id"),
        ({"step": None}, "step"),
        ({"attempt_ordinal": 0}, "attempt_ordinal"),
        ({"attempt_ordinal": True}, "attempt_ordinal"),
        ({"attempt_ordinal": "1"}, "attempt_ordinal"),
        ({"is_restart": 1}, "is_restart"),
        ({"workdir_mode": "shared"}, "workdir_mode"),
        ({"durable": "yes"}, "durable"),
        ({"priority": True}, "priority"),
        ({"resources": []}, "resources"),
        ({"children": {}}, "children"),
        ({"previous_attempt_id": 7}, "previous_attempt_id"),
        ({"control_dir": 3}, "control_dir"),
    ],
)
def test_a_malformed_context_is_refused_naming_the_member(
    tmp_path: Path, change: dict[str, Any], member: str
) -> None:
    layout = make_attempt(tmp_path, **change)
    with pytest.raises(ContextError, match=f"member '{member}'") as caught:
        Attempt.load(layout.context_path, environ={})
    assert caught.value.member == member
    assert caught.value.path == str(layout.context_path)


def test_a_removed_member_is_refused(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path)
    del layout.context["attempt_reason"]
    layout.context_path.write_text(json.dumps(layout.context))
    with pytest.raises(ContextError, match="member 'attempt_reason' must be a nonempty string"):
        Attempt.load(layout.context_path, environ={})


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"", "not UTF-8 JSON"), (b"[1]", "not a JSON object"), (b"\xff{}", "not UTF-8 JSON")],
)
def test_an_unreadable_context_is_refused(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "context.json"
    path.write_bytes(data)
    with pytest.raises(ContextError, match=message):
        Attempt.load(path, environ={})
    with pytest.raises(ContextError, match="cannot be read"):
        Attempt.load(tmp_path / "absent.json", environ={})


def test_unknown_members_are_ignored(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path, future_member={"anything": [1, 2]})
    assert Attempt.load(layout.context_path, environ={}).context["future_member"] == {"anything": [1, 2]}


def test_a_context_given_as_a_dict_needs_its_control_dir(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path)
    assert Attempt(layout.context, environ={}).control_dir == layout.control_dir
    del layout.context["control_dir"]
    with pytest.raises(ContextError, match="member 'control_dir'"):
        Attempt(layout.context, environ={})
