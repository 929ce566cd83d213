"""Signed requests end to end (D20): ``config init``, ``job request``, ``workspace trust`` and a real manager.

Every command is the installed ``httk`` run as a process, with its own per-user configuration directory
(``HTTK_CONFIG_HOME``: the autouse fixture's, or another one for a second operator); the manager is
``httk workflow run``, which serves until the workspace is idle. What is asserted is what an operator
sees: the frames, ``job log`` and ``job show``, the quarantine records and format.json.
"""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.models import validator

from tests import launchkit
from tests.runners import (
    WAIT_SECONDS,
    current_marker,
    frame_chain,
    runner_fixture,  # noqa: F401 (a fixture)
    scripted_job,
    submit,
    ws_fixture,  # noqa: F401 (a fixture)
)

BAD_KEYS = [
    ("ed25519:not*base64", "not valid base64"),
    ("ed25519:" + "A" * 40 + "==", "decodes to 30 bytes"),
    ("ssh-ed25519:" + "A" * 43 + "=", "does not start with 'ed25519:'"),
]


def httk(*args: str | Path, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed ``httk``, as the operator whose configuration is ``home`` (else the test's own)."""
    return launchkit.httk(*args, env=None if home is None else {"HTTK_CONFIG_HOME": str(home)})


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def make_identity(name: str = "Ann Operator", home: Path | None = None) -> str:
    """``config init`` for ``name`` (in ``home``, else the test's own configuration); the operator_key."""
    email = name.split(maxsplit=1)[0].lower() + "@example.org"
    ok(httk("workflow", "config", "init", "--name", name, "--email", email, "--non-interactive", home=home))
    shown = json.loads(ok(httk("workflow", "config", "show", "--json", home=home)))
    return str(shown["operator_key"])


@pytest.fixture
def failed(ws: Workspace, runner: dict[str, Any]) -> dict[str, Any]:
    """A job that failed its first attempt and succeeds its second."""
    job = scripted_job(
        {"prepare": {"attempts": [{"action": "exit", "exit": 3}, {"action": "succeed"}]}}, runner, retry_on=[]
    )
    submit(ws, job)
    ok(httk("workflow", "run", ws.root))
    assert current_marker(ws, job).kind.value == "failed"
    return job


def request(ws: Workspace, job: dict[str, Any], *words: str, home: Path | None = None) -> dict[str, Any]:
    """Publish a request by ``job request`` (signed when the configuration has an identity); its document."""
    out = ok(
        httk("workflow", "job", "request", ws.root, job["id"], *words, "--reason", "why", "--json", home=home)
    )
    document: dict[str, Any] = json.loads(out)["request"]
    return document


def quarantine_reasons(ws: Workspace) -> list[str]:
    directory = ws.control / "quarantine"
    return [json.loads(path.read_text())["reason"] for path in sorted(directory.glob("*.quarantine"))]


def test_a_signed_request_is_applied_and_its_key_recorded(ws: Workspace, failed: dict[str, Any]) -> None:
    key = make_identity()
    document = request(ws, failed, "set_priority", "--priority", "5")
    assert document["operator_key"] == key and document["operator"] == "Ann Operator <ann@example.org>"
    assert validator("request").is_valid(document)

    ok(httk("workflow", "run", ws.root))

    marker = current_marker(ws, failed)
    assert marker.kind.value == "failed"
    frame = frame_chain(ws, marker)[-1]
    assert frame["reason"] == "operator_set_priority" and frame["operator_key"] == key
    assert validator("state-frame").is_valid(frame)
    shown = ok(httk("workflow", "job", "show", ws.root, failed["id"]))
    assert f"operator key  {key} (signature verified)" in shown
    assert f"operator_key={key}" in ok(httk("workflow", "job", "log", ws.root, failed["id"]))
    assert quarantine_reasons(ws) == []

    request(ws, failed, "continue")
    ok(httk("workflow", "run", ws.root))
    marker = current_marker(ws, failed)
    assert marker.kind.value == "succeeded"
    revived = next(f for f in frame_chain(ws, marker) if f.get("reason") == "operator_continue")
    assert revived["operator_key"] == key and revived["operator"] == "Ann Operator <ann@example.org>"
    assert "operator_key" not in frame_chain(ws, marker)[-1]  # a request's members are never carried on


def test_an_unsigned_request_still_works_and_records_no_key(ws: Workspace, failed: dict[str, Any]) -> None:
    document = request(ws, failed, "continue")
    assert "signature" not in document and "operator_key" not in document
    ok(httk("workflow", "run", ws.root))
    marker = current_marker(ws, failed)
    assert marker.kind.value == "succeeded"
    assert all("operator_key" not in frame for frame in frame_chain(ws, marker))


def test_a_tampered_request_is_quarantined(ws: Workspace, failed: dict[str, Any]) -> None:
    make_identity()
    document = request(ws, failed, "continue")
    ready = ws.control / "requests" / "ready" / f"{document['request_id']}.json"
    ready.write_text(json.dumps({**document, "reason": "someone else's reason"}))

    ok(httk("workflow", "run", ws.root))

    assert current_marker(ws, failed).kind.value == "failed"
    assert quarantine_reasons(ws) == [
        f"its signature does not verify against its operator_key {document['operator_key']}"
    ]
    assert not list(ready.parent.iterdir())


def test_required_signatures_quarantine_unsigned_and_untrusted_requests(
    ws: Workspace, failed: dict[str, Any], tmp_path: Path
) -> None:
    trusted = make_identity()
    stranger_home, nobody_home = tmp_path / "stranger", tmp_path / "nobody"
    stranger = make_identity("Sam Stranger", home=stranger_home)
    ok(httk("workflow", "workspace", "trust", "add", ws.root, trusted))
    # Published while nothing is required (as an older client would); the manager rereads the trust list.
    request(ws, failed, "set_priority", "--priority", "1", home=nobody_home)
    request(ws, failed, "set_priority", "--priority", "2", home=stranger_home)
    ok(httk("workflow", "workspace", "trust", "require", ws.root))

    ok(httk("workflow", "run", ws.root))

    assert current_marker(ws, failed).kind.value == "failed"
    reasons = sorted(quarantine_reasons(ws))
    assert len(reasons) == 2
    assert any("requires signed requests" in reason and "unsigned" in reason for reason in reasons)
    assert any(f"its operator_key {stranger}" in reason and "is not trusted" in reason for reason in reasons)

    request(ws, failed, "continue")  # the trusted operator
    ok(httk("workflow", "run", ws.root))
    marker = current_marker(ws, failed)
    assert marker.kind.value == "succeeded"
    revived = next(f for f in frame_chain(ws, marker) if f.get("reason") == "operator_continue")
    assert revived["operator_key"] == trusted


def test_a_client_refuses_up_front_what_required_signatures_would_quarantine(
    ws: Workspace, failed: dict[str, Any], tmp_path: Path
) -> None:
    ok(httk("workflow", "workspace", "trust", "add", ws.root, make_identity()))
    ok(httk("workflow", "workspace", "trust", "require", ws.root))
    stranger = make_identity("Sam Stranger", home=tmp_path / "stranger")
    unsigned = httk("workflow", "job", "request", ws.root, failed["id"], "continue", home=tmp_path / "nobody")
    untrusted = httk(
        "workflow", "job", "request", ws.root, failed["id"], "continue", home=tmp_path / "stranger"
    )
    assert unsigned.returncode == 1 and "you have no operator identity" in unsigned.stderr
    assert untrusted.returncode == 1
    assert f"it does not trust yours, {stranger}: ask its owner to run" in untrusted.stderr
    assert not list((ws.control / "requests" / "ready").iterdir())


def test_without_required_an_untrusted_signature_is_attribution(
    ws: Workspace, failed: dict[str, Any]
) -> None:
    ok(
        httk(
            "workflow",
            "workspace",
            "trust",
            "add",
            ws.root,
            make_identity("Bea Other", home=ws.root.parent / "b"),
        )
    )
    key = make_identity()
    request(ws, failed, "continue")
    ok(httk("workflow", "run", ws.root))
    marker = current_marker(ws, failed)
    assert marker.kind.value == "succeeded" and quarantine_reasons(ws) == []
    assert any(frame.get("operator_key") == key for frame in frame_chain(ws, marker))


def test_the_manager_loads_no_cryptography_for_unsigned_requests(
    ws: Workspace, failed: dict[str, Any]
) -> None:
    request(ws, failed, "continue")
    code = (
        "import sys\n"
        "from httk.workflow.cli._app import main\n"
        f"sys.argv = ['httk', 'workflow', 'run', {str(ws.root)!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print(sorted(m for m in ('cryptography', 'rfc8785') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.splitlines()[-1] == "[]"
    assert current_marker(ws, failed).kind.value == "succeeded"


# -- workspace trust ---------------------------------------------------------------------------------------
def trust_member(ws: Workspace) -> Any:
    return json.loads(ws.format_path.read_text()).get("request_signatures")


def test_trust_add_list_require_and_remove(ws: Workspace) -> None:
    key = make_identity()
    assert ok(httk("workflow", "workspace", "trust", "list", ws.root)) == (
        "signed, trusted requests required: no\nno key is trusted\n"
    )
    refused = httk("workflow", "workspace", "trust", "require", ws.root)
    assert refused.returncode == 2 and "no key is trusted" in refused.stderr
    assert trust_member(ws) is None

    assert ok(httk("workflow", "workspace", "trust", "add", ws.root, key)).startswith(
        f"trusted {key} (SHA256:"
    )
    again = httk("workflow", "workspace", "trust", "add", ws.root, key)
    assert again.returncode == 0 and "already trusted" in again.stderr
    ok(httk("workflow", "workspace", "trust", "require", ws.root))
    document = json.loads(ws.format_path.read_text())
    assert document["request_signatures"] == {"required": True, "trusted_keys": [key]}
    assert validator("format").is_valid(document)
    listed = json.loads(ok(httk("workflow", "workspace", "trust", "list", ws.root, "--json")))
    assert listed == {"required": True, "trusted_keys": [key]}

    last = httk("workflow", "workspace", "trust", "remove", ws.root, key)
    assert last.returncode == 2 and "is the last trusted key" in last.stderr
    ok(httk("workflow", "workspace", "trust", "require", ws.root, "--off"))
    assert ok(httk("workflow", "workspace", "trust", "remove", ws.root, key)) == f"no longer trusted: {key}\n"
    assert trust_member(ws) == {"required": False, "trusted_keys": []}
    missing = httk("workflow", "workspace", "trust", "remove", ws.root, key)
    assert missing.returncode == 0 and "was not trusted" in missing.stderr


@pytest.mark.parametrize(("key", "rule"), BAD_KEYS, ids=["malformed-base64", "wrong-length", "bad-prefix"])
def test_an_invalid_key_is_refused_naming_it(ws: Workspace, key: str, rule: str) -> None:
    before = ws.format_path.read_bytes()
    result = httk("workflow", "workspace", "trust", "add", ws.root, key)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: invalid operator key {key!r}: ") and rule in result.stderr
    assert ws.format_path.read_bytes() == before


# -- the identity ------------------------------------------------------------------------------------------
def test_config_init_makes_a_private_key_only_its_owner_reads(user_homes: dict[str, Path]) -> None:
    key = make_identity()
    shown = json.loads(ok(httk("workflow", "config", "show", "--json")))
    private = Path(shown["private_key_file"])
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(private.parent.stat().st_mode) == 0o700
    assert private.parent.parent == user_homes["HTTK_CONFIG_HOME"]
    text = ok(httk("workflow", "config", "show"))
    assert text.splitlines()[:3] == [
        "operator     Ann Operator <ann@example.org>",
        f"operator_key {key}",
        f"fingerprint  {shown['fingerprint']}",
    ]

    identity = Path(shown["identity_file"]).read_bytes()
    again = httk("workflow", "config", "init", "--name", "X", "--email", "x@example.org", "--non-interactive")
    assert again.returncode == 1 and "is never overwritten" in again.stderr
    assert Path(shown["identity_file"]).read_bytes() == identity and len(list(private.parent.iterdir())) == 1


def test_a_private_key_others_can_read_is_refused(ws: Workspace, failed: dict[str, Any]) -> None:
    make_identity()
    private = Path(json.loads(ok(httk("workflow", "config", "show", "--json")))["private_key_file"])
    private.chmod(0o644)
    result = httk("workflow", "job", "request", ws.root, failed["id"], "continue")
    assert result.returncode == 1
    assert "permissions 0644 let others read it; it must be 0600" in result.stderr
    assert not list((ws.control / "requests" / "ready").iterdir())


def test_rotate_keeps_the_old_key_and_says_how_to_trust_the_new_one() -> None:
    old = make_identity()
    rotated = ok(httk("workflow", "config", "rotate"))
    shown = json.loads(ok(httk("workflow", "config", "show", "--json")))
    new = shown["operator_key"]
    assert new != old
    assert f"  httk workflow workspace trust add WORKSPACE {new}" in rotated.splitlines()
    assert [(k["operator_key"], "retired_at" in k) for k in shown["keys"]] == [(old, True), (new, False)]
    assert len(list(Path(shown["private_key_file"]).parent.iterdir())) == 2


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (("--name", "Ann"), 2, "missing --email"),
        (("--name", "Ann", "--email", "not an address"), 2, "invalid email address"),
        (("--name", " ", "--email", "a@example.org"), 2, "invalid name"),
    ],
)
def test_config_init_refuses_what_is_missing_or_invalid(
    args: tuple[str, ...], status: int, message: str
) -> None:
    result = httk("workflow", "config", "init", *args, "--non-interactive")
    assert result.returncode == status and message in result.stderr
    show = httk("workflow", "config", "show")
    assert show.returncode == 1 and "no operator identity" in show.stderr


def test_hostile_signature_members_are_quarantined_naming_the_member(
    ws: Workspace, failed: dict[str, Any]
) -> None:
    make_identity()
    document = request(ws, failed, "continue")
    ready = ws.control / "requests" / "ready"
    (ready / f"{document['request_id']}.json").unlink()
    cases = {
        "signature": "bad*base64==",
        "operator_key": "ed25519:" + "A" * 40 + "==",
    }
    hostile = [
        {**document, "signature": cases["signature"]},
        {**document, "operator_key": cases["operator_key"]},
        {**document, "operator_key": "rsa:" + document["operator_key"][8:]},
        {name: value for name, value in document.items() if name != "operator_key"},
    ]
    for index, item in enumerate(hostile):
        request_id = f"00000000-0000-4000-8000-00000000000{index}"
        (ready / f"{request_id}.json").write_text(json.dumps({**item, "request_id": request_id}))

    ok(httk("workflow", "run", ws.root))

    assert current_marker(ws, failed).kind.value == "failed"
    reasons = quarantine_reasons(ws)
    assert len(reasons) == 4
    expected = [
        "not valid base64",
        "decodes to 30 bytes",
        "does not start with 'ed25519:'",
        "is required in a signed",
    ]
    for rule in expected:
        assert sum(rule in reason for reason in reasons) == 1, (rule, reasons)


def test_config_init_asks_on_a_terminal_for_what_is_missing(user_homes: dict[str, Path]) -> None:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [str(launchkit.BIN / "httk"), "workflow", "config", "init"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    try:
        said = ""
        for prompt, answer in (("Name: ", "Ann Operator"), ("Email: ", "ann@example.org")):
            said = read_until(leader, said, prompt)
            os.write(leader, answer.encode() + b"\r")
        said = read_until(leader, said, "trust add WORKSPACE ed25519:")
        assert process.wait(timeout=WAIT_SECONDS) == 0
    finally:
        process.kill()
        process.wait()
        os.close(leader)
    shown = json.loads(ok(httk("workflow", "config", "show", "--json")))
    assert shown["operator"] == "Ann Operator <ann@example.org>"
    assert "created the operator identity Ann Operator <ann@example.org>" in said


def read_until(fd: int, said: str, text: str) -> str:
    """What the terminal showed so far, read until it shows ``text`` after what was ``said`` before."""
    start, deadline = len(said), time.monotonic() + WAIT_SECONDS
    while text not in said[start:]:
        if time.monotonic() > deadline:
            raise AssertionError(f"the terminal never showed {text!r}; it showed {said!r}")
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            said += os.read(fd, 4096).decode("utf-8", "replace")
    return said


def test_racing_config_inits_leave_one_identity_and_one_key(user_homes: dict[str, Path]) -> None:
    def racer(index: int) -> subprocess.Popen[str]:
        name, email = f"Racer {index}", f"racer{index}@example.org"
        command = ["workflow", "config", "init", "--non-interactive", "--name", name, "--email", email]
        return subprocess.Popen(
            [str(launchkit.BIN / "httk"), *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    racers = [racer(index) for index in range(4)]
    results = [(racer.wait(timeout=WAIT_SECONDS), racer.communicate()[1]) for racer in racers]
    assert sorted(status for status, _ in results) == [0, 1, 1, 1]
    for status, stderr in results:
        assert status == 0 or "exists already" in stderr or "created an operator identity first" in stderr
    shown = json.loads(ok(httk("workflow", "config", "show", "--json")))
    keys = user_homes["HTTK_CONFIG_HOME"] / "keys"
    assert [path.name for path in keys.iterdir()] == [Path(shown["private_key_file"]).name]
