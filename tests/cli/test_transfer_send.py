"""``httk workflow transfer send``: jobs to a workspace on a remote and back, over a real sshd.

The commands run as the real ``httk`` executable; the remote ``kappa`` is this machine with its own httk
configuration (``tests/cli/remotekit.py``), so its workspace is inspected here directly after each step.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from httk.workflow.engine.core._workspace import attach
from httk.workflow.engine.publish._submit import Submitter

from tests.cli.remotekit import HTTK, Far
from tests.runners import publish_scripted_runner, scripted_job, wait_until
from tests.sshkit import SshServer
from tests.transferkit import run_manager, transfer_workspace

EXTENSION = "detached-transfer-v1"


def httk(*words: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HTTK, *map(str, words)], capture_output=True, text=True, timeout=timeout, check=False
    )


def ok(*words: str | Path) -> str:
    result = httk(*words)
    assert result.returncode == 0, f"{words} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def far_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "far-disk" / "runs"
    root.parent.mkdir()
    ok("workspace", "init", "--no-durable", "--extension", EXTENSION, f"kappa:{root}")
    return root


def desk_jobs(
    tmp_path: Path, count: int, *, pool: str = "default", size: int = 2048
) -> tuple[Path, list[str]]:
    """A desk workspace with ``count`` succeeded-or-ready jobs, each carrying ``data/input.bin``."""
    desk = transfer_workspace(tmp_path / "desk")
    runner = publish_scripted_runner(desk, tmp_path)
    keys = []
    steps = {"prepare": {"action": "succeed", "write": {"name": "result.txt", "text": "computed on kappa"}}}
    for index in range(count):
        job = scripted_job(steps, runner, claim={"pool": pool, "required_capabilities": []})
        source = tmp_path / "payloads" / f"{index:03d}"
        (source / "data").mkdir(parents=True)
        (source / "job.json").write_text(json.dumps(job))
        (source / "data" / "input.bin").write_bytes(os.urandom(size))
        Submitter(desk).submit_payload(source, "p")
        keys.append(f"{job['tag']}--{job['id']}")
    desk.close()
    run_manager(tmp_path / "desk")  # registers every job; runs those of the default pool
    return tmp_path / "desk", sorted(keys)


def kinds(root: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for row in json.loads(ok("job", "list", "--json", "--limit", "1000", root))["jobs"]:
        found.setdefault(row["kind"], []).append(row["job_key"])
    return {kind: sorted(keys) for kind, keys in found.items()}


def test_jobs_go_to_the_remote_and_come_back_with_their_data(kappa: Far, tmp_path: Path) -> None:
    far = far_workspace(tmp_path)
    desk, keys = desk_jobs(tmp_path, 3)
    inputs = {key: (desk / "p" / key / "data" / "input.bin").read_bytes() for key in keys}

    report = json.loads(ok("workflow", "transfer", "send", desk, "p", "--to", "kappa:runs", "--json"))

    assert report["via"] == "rsync"  # both ends have it
    assert sorted(report["sent"]) == keys and len(report["acknowledged"]) == 3
    assert kinds(far) == {"succeeded": keys}
    assert kinds(desk) == {}
    assert all((far / "p" / key / "data" / "input.bin").read_bytes() == inputs[key] for key in keys)

    back = json.loads(
        ok("workflow", "transfer", "send", "kappa:runs", *keys, "--to", desk, "--via", "tar", "--json")
    )

    assert back["via"] == "tar"
    assert sorted(back["sent"]) == keys and len(back["acknowledged"]) == 3
    assert kinds(desk) == {"succeeded": keys} and kinds(far) == {}
    assert all((desk / "p" / key / "data" / "input.bin").read_bytes() == inputs[key] for key in keys)
    log = ok("job", "log", desk, keys[0])
    assert log.count("transfer_import") == 2 and log.count("transfer_detach") == 2


def test_fifty_jobs_run_on_the_remote_and_come_back_finished_with_their_data(
    kappa: Far, tmp_path: Path
) -> None:
    far = far_workspace(tmp_path)
    desk, keys = desk_jobs(tmp_path, 50, pool="kappa")  # ready: no manager here serves pool kappa
    assert kinds(desk) == {"ready": keys}
    inputs = {key: (desk / "p" / key / "data" / "input.bin").read_bytes() for key in keys}

    ok("workflow", "transfer", "send", desk, "p", "--to", "kappa:runs")
    assert kinds(far) == {"ready": keys} and kinds(desk) == {}
    ok("workflow", "run", "--workspace", "kappa:runs", "--count", "2", "--pool", "kappa")

    def finished() -> bool:
        status = json.loads(ok("workspace", "status", "--json", "kappa:runs"))
        return bool(status["kinds"]["succeeded"] == 50 and status["managers"]["live"] == 0)

    wait_until(finished, "the remote managers to run the fifty jobs and exit", timeout=300)
    ok("workflow", "transfer", "send", "kappa:runs", "p", "--to", desk)

    assert kinds(desk) == {"succeeded": keys} and kinds(far) == {}
    for key in keys:
        assert (desk / "p" / key / "data" / "input.bin").read_bytes() == inputs[key]
        assert (desk / "p" / key / "run" / "result.txt").read_text() == "computed on kappa"
    rows = json.loads(ok("workflow", "transfer", "list", "--json", desk))
    assert sorted(row["state"] for row in rows).count("retired") == 50


@pytest.mark.parametrize("via", ["tar", "rsync"])
def test_a_connection_killed_mid_transfer_is_resumed_without_loss_or_duplication(
    kappa: Far, sshd: SshServer, tmp_path: Path, via: str
) -> None:
    far = far_workspace(tmp_path)
    desk, keys = desk_jobs(tmp_path, 50, size=1 << 20)
    desk_id = attach(desk, writable=False).workspace_id
    incoming = kappa.data / "transfers" / "inbox" / desk_id
    send = [HTTK, "workflow", "transfer", "send", str(desk), "p", "--to", "kappa:runs", "--via", via]
    sending = subprocess.Popen(
        send, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    arriving = ".incoming.*" if via == "tar" else ".rsync"

    def streaming() -> bool:
        return incoming.is_dir() and any(
            path.is_file() for part in incoming.glob(arriving) for path in part.rglob("*")
        )

    wait_until(streaming, "the bundles to be arriving at the remote", timeout=120)
    # The sender stops writing first (httk, and the rsync or ssh it runs: its whole session): what is
    # still buffered between the ends (a few MB at most) cannot complete 50 MB of bundles, so the
    # connection is cut mid-stream whatever the machine's speed.
    os.killpg(sending.pid, signal.SIGSTOP)
    for pid in sshd.connections():  # the connection, and the remote receiver with it
        os.kill(pid, signal.SIGKILL)
    os.killpg(sending.pid, signal.SIGCONT)
    _out, err = sending.communicate(timeout=120)

    assert sending.returncode == 1, err
    assert "ssh failed: the connection was lost" in err and "run the same command again" in err
    assert kinds(far) == {}  # nothing was imported from the cut stream
    assert sum(len(v) for v in kinds(desk).values()) == 0  # every job is sealed at the source

    if via == "rsync":  # what the cut copy left is kept for the next one to continue from
        assert any(path.is_file() for path in (incoming / ".rsync").rglob("*"))
    again = json.loads(ok(*send[1:], "--json"))

    assert again["via"] == via and sorted(again["sent"]) == keys
    assert kinds(far) == {"succeeded": keys} and kinds(desk) == {}
    assert sorted(os.listdir(incoming)) == []
    states = [row["state"] for row in json.loads(ok("workflow", "transfer", "list", "--json", desk))]
    assert states == ["retired"] * 50


def test_a_changed_host_key_refuses_the_send_and_changes_nothing(
    kappa: Far, sshd: SshServer, tmp_path: Path
) -> None:
    far_workspace(tmp_path)
    desk, keys = desk_jobs(tmp_path, 2)
    recorded = sshd.known_hosts.read_text()
    sshd.change_host_key()
    sshd.known_hosts.write_text(recorded)

    result = httk("workflow", "transfer", "send", desk, "p", "--to", "kappa:runs")

    assert result.returncode == 1
    assert "the host key is not the one recorded in" in result.stderr
    assert kinds(desk) == {"succeeded": keys}
    assert json.loads(ok("workflow", "transfer", "list", "--json", desk)) == []


def test_excluded_workdir_files_stay_at_the_source_of_a_send(kappa: Far, tmp_path: Path) -> None:
    far = far_workspace(tmp_path)
    desk, keys = desk_jobs(tmp_path, 2)
    wavecar = os.urandom(1 << 16)
    for key in keys:
        (desk / "p" / key / "run" / "WAVECAR").write_bytes(wavecar)

    report = json.loads(
        ok(
            "workflow",
            "transfer",
            "send",
            desk,
            "p",
            "--to",
            "kappa:runs",
            "--exclude",
            "run/WAVECAR",
            "--json",
        )
    )

    assert len(report["acknowledged"]) == 2 and kinds(far) == {"succeeded": keys}
    for key in keys:
        assert (far / "p" / key / "run" / "result.txt").read_text() == "computed on kappa"
        assert not (far / "p" / key / "run" / "WAVECAR").exists()
        shown = ok("job", "show", "kappa:runs", key)
        assert "left behind  run/WAVECAR at workspace" in shown
    for row in json.loads(ok("workflow", "transfer", "list", "--json", desk)):
        ledger = json.loads(ok("workflow", "transfer", "show", desk, row["transfer_id"]))["retired"]
        kept = Path(ledger["left_behind"]["kept_in"])
        assert (kept / "run" / "WAVECAR").read_bytes() == wavecar and kept.name == row["job_key"]


def test_what_the_destination_lacks_is_advised_and_refused_with_strict_environment(
    kappa: Far, tmp_path: Path
) -> None:
    far = far_workspace(tmp_path)
    desk, keys = desk_jobs(tmp_path, 2)
    for key, value in (
        ("vasp.command", "srun vasp_std"),
        ("vasp.pseudo_library", "/p"),
        ("slurm.partition", "x"),
    ):
        ok("workspace", "settings", "set", "--key", key, "--value", json.dumps(value), desk)
    ok("workspace", "settings", "set", "--key", "vasp.pseudo_library", "--value", '"/q"', "kappa:runs")
    runner = next((desk / ".httk-workflow" / "runners").iterdir())
    far_store = far / ".httk-workflow" / "runners"
    far_store.mkdir(parents=True, exist_ok=True)
    (far_store / runner.name).write_text("#!/bin/sh\necho another runner\n")

    refused = httk("workflow", "transfer", "send", desk, "p", "--to", "kappa:runs", "--strict-environment")

    assert refused.returncode == 2  # a refused transfer, as bad input
    assert "nothing was moved (--strict-environment)" in refused.stderr
    assert "run the same command again" not in refused.stderr
    assert "setting vasp.command is set at the source but not at the destination" in refused.stderr
    assert "vasp.pseudo_library" not in refused.stderr and "slurm.partition" not in refused.stderr
    assert f"the destination's runner store holds another {runner.name!r}" in refused.stderr
    assert kinds(desk) == {"succeeded": keys} and kinds(far) == {}
    assert json.loads(ok("workflow", "transfer", "list", "--json", desk)) == []

    (far_store / runner.name).unlink()
    sent = httk("workflow", "transfer", "send", desk, "p", "--to", "kappa:runs", "--json")

    assert sent.returncode == 0, sent.stderr
    assert sent.stderr.count("advisory: ") == 1 and "advisory: setting vasp.command" in sent.stderr
    assert json.loads(sent.stdout)["advisories"] == [
        "setting vasp.command is set at the source but not at the destination, and no job's inputs give "
        "it: a runner reading it there finds only its default, if it has one"
    ]
    assert kinds(far) == {"succeeded": keys}

    ok("workspace", "settings", "set", "--key", "vasp.command", "--value", '"srun vasp_std"', "kappa:runs")
    back = httk("workflow", "transfer", "send", "kappa:runs", "p", "--to", desk, "--strict-environment")

    assert back.returncode == 0 and "advisory" not in back.stderr, back.stderr
    assert kinds(desk) == {"succeeded": keys}


def test_the_destination_learns_each_acknowledgement_so_gc_collects_its_import_records(
    kappa: Far, tmp_path: Path
) -> None:
    far = far_workspace(tmp_path)
    desk, keys = desk_jobs(tmp_path, 2)
    received = far / ".httk-workflow" / "transfers" / "imported"

    ok("workflow", "transfer", "send", desk, keys[0], "--to", "kappa:runs")

    [first] = list(received.iterdir())
    record = json.loads(first.read_text())
    assert "delivered_at" in record
    # A send cut right after the source took the acknowledgement leaves exactly this record behind:
    del record["delivered_at"]
    first.write_text(json.dumps(record))

    report = json.loads(ok("workflow", "transfer", "send", desk, keys[1], "--to", "kappa:runs", "--json"))

    assert sorted(report["delivered"]) == sorted(
        json.loads(path.read_text())["transfer_id"] for path in received.iterdir()
    )
    assert all("delivered_at" in json.loads(path.read_text()) for path in received.iterdir())
    ok("workspace", "policy", "set", "--key", "retention.trash_days", "--value", "0", "kappa:runs")
    collected = json.loads(ok("workspace", "gc", "--json", "kappa:runs"))

    assert collected["categories"]["transfer_receipts"]["removed"] == 2
    assert list(received.iterdir()) == [] and kinds(far) == {"succeeded": keys}
