"""``httk workflow remote add|configure|list|show|remove|check``: remotes in the per-user configuration,
checked against a real sshd on 127.0.0.1 (``tests/sshkit.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from tests.cli.remotekit import Far, ok
from tests.sshkit import SshServer


def remotes_dir() -> Path:
    return Path(os.environ["HTTK_CONFIG_HOME"]) / "remotes"


def test_a_remote_is_added_configured_listed_shown_and_removed(invoke: Invoke) -> None:
    ok(invoke("workflow", "remote", "add", "--template", "ssh", "kappa"))
    ok(
        invoke(
            "workflow",
            "remote",
            "configure",
            "--set",
            "host=kappa.example.org",
            "--set",
            "username=rar",
            "--set",
            "port=2222",
            "--set",
            "known_hosts=~/kappa_hosts",
            "kappa",
        )
    )
    document = json.loads((remotes_dir() / "kappa.json").read_text())
    assert document["format"] == "httk-workflow-remote" and document["template"] == "ssh"
    assert document["settings"] == {
        "host": "kappa.example.org",
        "username": "rar",
        "port": "2222",
        "known_hosts": os.path.expanduser("~/kappa_hosts"),
    }

    listed = ok(invoke("workflow", "remote", "list"))
    assert listed.stdout == "kappa\tssh\trar@kappa.example.org:2222\n"
    shown = json.loads(ok(invoke("workflow", "remote", "show", "--json", "kappa")).stdout)
    assert shown["settings"]["httk_command"] == "httk"  # the default is shown
    ok(invoke("workflow", "remote", "configure", "--unset", "port", "kappa"))
    assert "port" not in json.loads((remotes_dir() / "kappa.json").read_text())["settings"]

    ok(invoke("workflow", "remote", "remove", "kappa"))
    assert not (remotes_dir() / "kappa.json").exists()
    assert invoke("workflow", "remote", "list").stdout == ""


@pytest.mark.parametrize(
    ("assignment", "words"),
    [
        ("hots=kappa", ["unknown setting 'hots'", "known: check_connectivity"]),
        ("port=70000", ["port='70000' is refused", "1 to 65535"]),
        ("host=-oProxyCommand=evil", ["host=", "is refused"]),
        ("username=rar x", ["username=", "one word"]),
        ("check_connectivity=maybe", ["yes or no"]),
    ],
)
def test_a_bad_setting_is_refused_by_name_and_nothing_is_written(
    invoke: Invoke, assignment: str, words: list[str]
) -> None:
    ok(invoke("workflow", "remote", "add", "--template", "ssh", "kappa"))
    ok(invoke("workflow", "remote", "configure", "--set", "host=kappa.example.org", "kappa"))
    before = (remotes_dir() / "kappa.json").read_bytes()

    result = invoke(
        "workflow", "remote", "configure", "--set", "host=other.example.org", "--set", assignment, "kappa"
    )

    assert result.exit_code == 2
    assert all(word in result.stderr for word in words), result.stderr
    assert (remotes_dir() / "kappa.json").read_bytes() == before


def test_a_taken_name_an_unknown_template_and_an_unknown_remote_are_refused(invoke: Invoke) -> None:
    ok(invoke("workflow", "remote", "add", "--template", "ssh", "kappa"))
    again = invoke("workflow", "remote", "add", "--template", "ssh", "kappa")
    assert again.exit_code == 2 and "a remote named 'kappa' exists already" in again.stderr
    template = invoke("workflow", "remote", "add", "--template", "telnet", "tau")
    assert template.exit_code == 2 and "unknown remote template 'telnet'" in template.stderr
    missing = invoke("workflow", "remote", "show", "sigma")
    assert missing.exit_code == 2 and "no remote named 'sigma'" in missing.stderr
    no_host = invoke("workflow", "remote", "check", "kappa")
    assert no_host.exit_code == 2 and "has no host" in no_host.stderr


def test_a_corrupt_remote_file_is_named_and_can_be_removed(invoke: Invoke) -> None:
    remotes_dir().mkdir(parents=True)
    (remotes_dir() / "kappa.json").write_text('{"format": "something-else"}')

    shown = invoke("workflow", "remote", "show", "kappa")

    assert shown.exit_code == 2
    assert "corrupt remote" in shown.stderr and "remote remove kappa" in shown.stderr
    ok(invoke("workflow", "remote", "remove", "kappa"))


def test_check_connects_over_ssh_and_reports_the_remote_httk(invoke: Invoke, kappa: Far) -> None:
    report = json.loads(ok(invoke("workflow", "remote", "check", "--json", "kappa")).stdout)

    assert report["connected"] is True
    assert report["httk"].startswith("httk-workflow ")
    assert report["tar"] is True and report["rsync"] == {"remote": True, "local": True}
    assert report["problems"] == [] and report["advisories"] == []


def test_check_reports_a_remote_without_httk_as_a_problem(invoke: Invoke, kappa: Far) -> None:
    ok(invoke("workflow", "remote", "configure", "--set", "httk_command=/nonexistent/httk", "kappa"))

    result = invoke("workflow", "remote", "check", "kappa")

    assert result.exit_code == 1
    assert "httk there: not found" in result.stdout
    assert "problem: running '/nonexistent/httk' there failed with exit status 127" in result.stdout
    assert "--set httk_command=" in result.stdout


def test_configure_with_check_connectivity_checks_after_saving(invoke: Invoke, kappa: Far) -> None:
    result = ok(invoke("workflow", "remote", "configure", "--set", "check_connectivity=yes", "kappa"))

    assert "kappa: connected to" in result.stdout and "httk there: httk-workflow" in result.stdout


def test_a_changed_host_key_is_refused_with_a_clear_message(
    invoke: Invoke, kappa: Far, sshd: SshServer
) -> None:
    recorded = sshd.known_hosts.read_text()
    sshd.change_host_key()
    sshd.known_hosts.write_text(recorded)  # the client still knows the old key

    result = invoke("workflow", "remote", "check", "kappa")

    assert result.exit_code == 1
    assert "the host key is not the one recorded in" in result.stderr
    assert "nothing was done" in result.stderr


def test_an_unknown_host_key_is_never_accepted(invoke: Invoke, kappa: Far, sshd: SshServer) -> None:
    sshd.known_hosts.write_text("")

    result = invoke("workflow", "remote", "check", "kappa")

    assert result.exit_code == 1
    assert "its host key is not known" in result.stderr and "never accepted unchecked" in result.stderr
    assert sshd.known_hosts.read_text() == ""


def test_commands_share_one_master_connection(invoke: Invoke, kappa: Far, sshd: SshServer) -> None:
    ok(invoke("workflow", "remote", "check", "kappa"))
    log = (sshd.root / "sshd.log").read_text()

    assert log.count("Accepted publickey") == 1  # three commands, one login
