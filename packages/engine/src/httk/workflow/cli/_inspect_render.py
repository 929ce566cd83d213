"""Text for people from the reports of the read commands (``--json`` prints the reports themselves).

Plain aligned tables and ``key  value`` lines, no rich: a read command's start-up is part of its speed.
This module imports typer and the standard library only.
"""

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ._render import json_text, print_table

if TYPE_CHECKING:
    from httk.workflow.engine import RetainedAttempt, StatusReport

MANAGER_HEADERS = (
    "manager",
    "state",
    "heartbeat",
    "lease",
    "host",
    "batch job",
    "resources",
    "pools",
    "capabilities",
    "executors",
    "runner modules",
    "placement prefixes",
)
JOB_HEADERS = ("kind", "priority", "gen", "placement", "job")


def _listed(values: Sequence[Any] | None) -> str:
    return ",".join(str(v) for v in values) if values else "-"


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f}s"


# -- workspace ---------------------------------------------------------------------------------------
def status(report: "StatusReport") -> None:
    named = f"name {report.name}, " if report.name else ""
    typer.echo(f"workspace {report.root} ({named}id {report.workspace_id})")
    if report.read_only_reason:
        typer.echo(f"read-only: {report.read_only_reason}")
    rows = [(kind, str(count)) for kind, count in report.kinds.items()]
    rows.append(("total", str(report.total)))
    print_table(("kind", "jobs"), rows)
    typer.echo(f"managers: {report.managers_live} live, {report.managers_other} stale or exited")
    if report.anomalies:
        typer.echo(
            f"anomalies: {report.anomalies} entries of the state tree are not markers (run workspace fsck)"
        )
    if report.depth is not None:
        _by_placement(report)


def _by_placement(report: "StatusReport") -> None:
    kinds = [kind for kind, count in report.kinds.items() if count]
    rows = []
    for prefix, counts in report.by_placement.items():
        rows.append([prefix, *(str(counts.get(kind, 0)) for kind in kinds), str(sum(counts.values()))])
    typer.echo("")
    print_table((f"placement (depth {report.depth})", *kinds, "total"), rows)


def manager_row(view: Mapping[str, Any]) -> list[str]:
    return [
        str(view["manager_id"]) + (f" ({view['label']})" if view.get("label") else ""),
        str(view["state"])
        + ("" if view.get("manifest_problem") is None else f" ({view['manifest_problem']})"),
        _seconds(view["heartbeat_age_seconds"]),
        f"{view['lease_seconds']:g}s",
        str(view.get("host") or "-"),
        _batch_job(view.get("batch")),
        ",".join(f"{k}={v}" for k, v in sorted((view.get("resources") or {}).items())) or "-",
        _listed(view["pools"]),
        _listed(view["capabilities"]),
        _listed(view["executors"]),
        _listed(view["runner_modules"]),
        _listed(view["placement_prefixes"]),
    ]


def _batch_job(batch: Mapping[str, Any] | None) -> str:
    """``slurm 4711`` (``@cluster`` when known), or ``-`` for a manager outside a batch job."""
    if not batch:
        return "-"
    cluster = f"@{batch['cluster']}" if batch.get("cluster") else ""
    return f"{batch.get('system', '?')} {batch.get('job_id', '?')}{cluster}"


# -- job list ----------------------------------------------------------------------------------------
def job_list_row(row: Mapping[str, Any]) -> list[str]:
    return [row["kind"], f"{row['priority']:03d}", str(row["generation"]), row["placement"], row["job_key"]]


# -- job show ----------------------------------------------------------------------------------------
def show(report: Mapping[str, Any]) -> None:
    for line in show_lines(report):
        typer.echo(line)


def show_lines(report: Mapping[str, Any]) -> list[str]:
    """``job show``'s text: one ``key  value`` line per member, keys aligned."""
    lines: list[tuple[str, str]] = [
        ("job", f"{report['job_key']}"),
        ("kind", f"{report['kind']} (generation {report['generation']}, priority {report['priority']:03d})"),
        ("placement", report["placement"]),
    ]
    state = report["state"]
    if report.get("frame_problem"):
        problem = report["frame_problem"]
        lines.append(("frame", f"NOT READABLE: {problem['code']}: {problem['detail']} (run workspace fsck)"))
    lines.extend(_step_lines(report, state))
    job = report.get("job")
    if report.get("job_problem"):
        lines.append(("job.json", f"PROBLEM: {report['job_problem']}"))
    if job is not None:
        lines.extend(_job_lines(job))
    if "owner" in report:
        lines.append(("manager", _owner(report["owner"])))
    for member in ("failure", "last_failure"):
        if member in report:
            lines.append((member.replace("_", " "), _failure(report[member])))
    if "operator" in report:
        said = f": {report['operator_reason']}" if report.get("operator_reason") else ""
        lines.append(("operator", f"{report['operator']}{said}"))
    if "operator_key" in report:
        lines.append(("operator key", f"{report['operator_key']} (signature verified)"))
    for member in ("pause", "retry"):
        if member in report:
            value = report[member]
            lines.append((member, str(value.get("reason", value) if isinstance(value, Mapping) else value)))
    if "takeover" in report:
        lines.append(("takeover", _takeover(report["takeover"])))
    if "confinement" in report:
        lines.append(("confinement", confinement(report["confinement"])))
        for path in report["confinement"].get("writable") or []:
            lines.append(("writable", str(path)))
        for refused in report["confinement"].get("refused") or []:
            lines.append(
                ("refused", f"{refused.get('path')} ({refused.get('origin')}): {refused.get('reason')}")
            )
    if "join" in report:
        lines.append(("join", str(report["join"].get("condition", "-"))))
        for child in report.get("join_children", []):
            where = child["kind"] or "not found at its placement"
            lines.append(("child", f"{child['job_key']} at {child['placement']}: {where}"))
    lines.extend(_declaration_lines(report.get("declarations") or []))
    missing = "" if report["payload_exists"] else " (MISSING)"
    lines.append(("payload", report["payload_path"] + missing))
    lines.append(("workdir", report.get("workdir_path") or "-"))
    if report.get("data_path"):
        lines.append(("data", report["data_path"]))
    lines.extend(_left_behind_lines(report))
    lines.append(("marker", report["marker"]))
    lines.append(("record", report["record_ref"]))
    events: list[str] = []
    record = report.get("events")
    if record and (record["events"] or record["problem"]):
        from httk.workflow.engine import event_lines

        heading, *events = event_lines(record, more="older: --events N")
        lines.append(("events", heading))
    width = max(len(key) for key, _ in lines)
    return [f"{key.ljust(width)}  {value}" for key, value in lines] + events


def _left_behind_lines(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    left = report.get("left_behind")
    if left is None:
        return []
    where = f"at workspace {left['source_workspace_id']} (transfer {left['transfer_id']})"
    return [("left behind", f"{', '.join(left['paths'])} {where}")]


def _step_lines(report: Mapping[str, Any], state: Mapping[str, Any]) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    step = state.get("step") or report.get("initial_step")
    if step is not None:
        initial = report.get("initial_step")
        suffix = f" (initial {initial})" if initial and initial != step else ""
        lines.append(("step", f"{step}{suffix}"))
    budgets = report["budgets"]
    parts = []
    for label, key in (
        ("activations", "maximum_activations"),
        ("attempts this activation", "maximum_attempts_per_activation"),
        ("attempts in total", "maximum_total_attempts"),
    ):
        limit = budgets[key]["limit"]
        parts.append(f"{label} {budgets[key]['used']}/{'unlimited' if limit is None else limit}")
    lines.append(("counters", ", ".join(parts)))
    if state.get("created_at"):
        lines.append(("updated", f"{state['created_at']} ({state.get('reason', '-')})"))
    if state.get("runner_steps"):
        lines.append(("runner steps", _listed(state["runner_steps"])))
    return lines


def _job_lines(job: Mapping[str, Any]) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    if job.get("name") or job.get("workflow"):
        lines.append(("name", " / ".join(str(job[k]) for k in ("name", "workflow") if job.get(k))))
    runner = job.get("runner") or {}
    where = runner.get("path") or runner.get("module") or "-"
    lines.append(("runner", f"{runner.get('backend', '-')} {runner.get('source', 'payload')}:{where}"))
    claim = job.get("claim") or {}
    capabilities = _listed(claim.get("required_capabilities"))
    lines.append(("claim", f"pool {claim.get('pool', '-')}, capabilities {capabilities}"))
    workdir, data = job.get("workdir") or {}, job.get("data") or {}
    lines.append(("modes", f"workdir {workdir.get('mode', '-')}, data {data.get('mode', '-')}"))
    lines.append(("digest", str(job.get("digest"))))
    return lines


def _declaration_lines(declarations: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Each declaration's declared and observed document on lines of their own: side by side, unmerged."""
    lines: list[tuple[str, str]] = []
    for entry in declarations:
        observed = "-" if entry["observed"] is None else json_text(entry["observed"])
        if entry.get("observed_problem"):
            observed = f"UNREADABLE: {entry['observed_problem']}"
        declared = "-" if entry["declared"] is None else json_text(entry["declared"])
        lines.append((f"declared {entry['name']}", declared))
        lines.append((f"observed {entry['name']}", observed))
    return lines


def _owner(owner: Mapping[str, Any]) -> str:
    life = "live" if owner.get("manager_live") else "not live"
    text = (
        f"{owner.get('manager_id')} ({life}, heartbeat {_seconds(owner.get('heartbeat_age_seconds'))} old, "
        f"lease {owner.get('lease_seconds')}s from {owner.get('lease_started_at')})"
    )
    process = owner.get("process")
    if isinstance(process, Mapping):
        text += f"; process {process.get('pid')} on {process.get('host')}"
    return text


def _failure(failure: Any) -> str:
    if not isinstance(failure, Mapping):
        return str(failure)
    return f"{failure.get('code')}: {failure.get('message')}"


def _takeover(takeover: Any) -> str:
    if not isinstance(takeover, Mapping):
        return str(takeover)
    text = f"rule {takeover.get('rule')}"
    age = takeover.get("heartbeat_age_seconds")
    if age is not None:
        text += f", heartbeat {float(age):.0f}s old"
    if takeover.get("previous_manager_id"):
        text += f", previous manager {takeover['previous_manager_id']}"
    if takeover.get("unsafe"):
        text += ", UNSAFE override"
    return text


def confinement(record: Any) -> str:
    """``landlock ABI 7`` or why the runner ran unconfined (``off: --no-confine``)."""
    if not isinstance(record, Mapping):
        return str(record)
    if record.get("enforced"):
        return f"{record.get('mechanism', 'landlock')} ABI {record.get('abi')}"
    what = "unavailable" if record.get("reason") == "unavailable" else "off"
    return f"{what}: {record.get('detail') or record.get('reason')}"


# -- job log -----------------------------------------------------------------------------------------
def log_line(entry: Mapping[str, Any]) -> str:
    generation = entry.get("generation")
    where = f"g{generation}" if generation is not None else "g?"
    if "problem" in entry:
        problem = entry["problem"]
        return (
            f"{'?':<27}  {where:<4}  UNREADABLE {problem['code']}: {problem['detail']} "
            "(older history cannot be followed; run workspace fsck)"
        )
    parts = [
        f"{entry.get('created_at') or '-':<27}",
        f"{where:<4}",
        f"{entry.get('from') or '?'} -> {entry.get('kind')}",
        f"step={entry.get('step') or '-'}",
        f"attempt={entry.get('attempt_ordinal', '-')}",
        f"reason={entry.get('reason') or '-'}",
    ]
    if entry.get("manager_id") and entry.get("kind") in ("claimed", "running"):
        parts.append(f"manager={entry['manager_id']}")
    if entry.get("failure"):
        parts.append(f"failure={_failure(entry['failure'])}")
    elif entry.get("last_failure"):
        parts.append(f"after={_failure(entry['last_failure'])}")
    if entry.get("takeover"):
        parts.append(f"takeover=({_takeover(entry['takeover'])})")
    if entry.get("confinement"):
        parts.append(f"confinement=({confinement(entry['confinement'])})")
    if entry.get("operator"):
        said = f" ({entry['operator_reason']})" if entry.get("operator_reason") else ""
        parts.append(f"operator={entry['operator']}{said}")
    if entry.get("operator_key"):
        parts.append(f"operator_key={entry['operator_key']}")
    line = "  ".join(parts)
    if entry.get("note"):  # generations a repair jumped over: they lie before the repair's line
        line = f"{'-':<27}  {'':<4}  note: {entry['note']}\n{line}"
    return line


def json_line(entry: Mapping[str, Any]) -> str:
    import json

    return json.dumps(entry, sort_keys=True, separators=(",", ":"))


# -- job log --output ----------------------------------------------------------------------------------
def _read_text(path: Path | None) -> str | None:
    return None if path is None else path.read_bytes().decode("utf-8", "replace")


def output_json(stdio: Path | None, attempts: "Sequence[RetainedAttempt]") -> dict[str, Any]:
    return {
        "stdio_log": _read_text(stdio),
        "retained_attempts": [
            {
                "attempt_id": attempt.attempt_id,
                "step": attempt.step,
                "attempt_ordinal": attempt.attempt_ordinal,
                "total_attempts": attempt.total_attempts,
                "control_dir": str(attempt.directory),
                "stdout": _read_text(attempt.stdout),
                "stderr": _read_text(attempt.stderr),
            }
            for attempt in attempts
        ],
    }


def stream_output(stdio: Path | None, attempts: "Sequence[RetainedAttempt]") -> None:
    """Copy the captured output to standard output as bytes, with one header per retained attempt."""
    sys.stdout.flush()
    out = sys.stdout.buffer
    if stdio is not None:
        _copy(stdio, out)
    for attempt in attempts:
        out.write(
            f"== attempt {attempt.attempt_ordinal} of step {attempt.step!r} ({attempt.attempt_id}), "
            "retained control directory ==\n".encode()
        )
        if attempt.stdout is not None:
            _copy(attempt.stdout, out)
        if attempt.stderr is not None and attempt.stderr.stat().st_size:
            out.write(b"-- stderr --\n")
            _copy(attempt.stderr, out)
    out.flush()


def _copy(path: Path, out: Any) -> None:
    """Copy one file in bounded chunks, ending it with a newline so the next header starts a line."""
    last = b""
    with open(path, "rb") as source:
        while chunk := source.read(1 << 16):
            out.write(chunk)
            last = chunk[-1:]
    if last and last != b"\n":
        out.write(b"\n")
