"""``httk workflow collect WORKSPACE``: one record per finished job, with the results its workflow committed.

Reads every succeeded, failed and cancelled job (:func:`httk.workflow.engine.collect_results`; at or
below ``--placement``, of ``--workflow`` only) and its result document, ``data/results.json`` unless
``--document`` names another path below ``data/``. A degraded record -- a failed or cancelled job, a
missing or broken document, warnings the document itself lists -- says why in ``problems``.

Output: a table for people (job, kind, workflow, and ``ok`` or why the record is degraded); with
``--json`` one JSON array of the records, written as they are read; with ``--csv`` one row per record,
the job's columns then every scalar member of its results by dotted path (``results.energy.energy``;
arrays such as forces and histories are in ``--json`` only), the columns being every one any record has.
On a terminal (standard error) and without ``--json``, a transient progress bar counts the jobs read,
and the table or CSV is printed once it is gone (their rows are held until then, not the documents:
a CSV's columns are known only at the end).
The exit status is 0 whatever the records say. The workspace is attached read-only and nothing is
written to it.
"""

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._inspect_cmd import PlacementOpt
from ._options import JsonOpt, UsageError, WorkspaceArg, WorkspaceOpt, bind
from ._progress import progress_bar, wanted
from ._render import print_table

if TYPE_CHECKING:
    from httk.workflow.engine import ResultRecord

WorkflowOpt = Annotated[
    str | None,
    typer.Option("--workflow", metavar="W", show_default=False, help="Only jobs of this workflow."),
]
DocumentOpt = Annotated[
    str,
    typer.Option("--document", metavar="PATH", help="The result document's path below data/."),
]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Print CSV: one row per job, scalar results as columns.")]
TEXT_HEADERS = ("job", "kind", "workflow", "results")


def collect(
    *,
    workspace: WorkspaceArg = None,
    workspace_option: WorkspaceOpt = None,
    workflow: WorkflowOpt = None,
    placement: PlacementOpt = None,
    document: DocumentOpt = "results.json",
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
) -> None:
    """One record per finished job: its results (data/results.json), or why it has none."""
    (root,) = bind([workspace], [("WORKSPACE", workspace_option)], writes=False)
    if as_json and as_csv:
        raise UsageError("--json and --csv cannot be combined")
    from httk.workflow.engine import attach, collect_results

    attached = attach(root, writable=False)
    if as_json:  # no bar: records are written as they are read
        _stream_json(collect_results(attached, workflow=workflow, placement=placement, document=document))
        return

    def row(record: "ResultRecord") -> Any:
        return record.columns() if as_csv else record.cells()

    with progress_bar("collecting results", enabled=wanted(as_json)) as bar:
        found = collect_results(
            attached, workflow=workflow, placement=placement, document=document, progress=bar.report
        )
        rows = [row(record) for record in found]  # a row each, not the documents: memory stays small
    (_write_csv if as_csv else _print_text)(rows)  # once the bar is gone from the terminal


def _stream_json(records: "Iterable[ResultRecord]") -> None:
    """One JSON array, written record by record so that memory stays that of one."""
    import json

    out = sys.stdout
    out.write("[")
    count = 0
    for record in records:
        text = json.dumps(record.as_dict(), indent=2).replace("\n", "\n  ")
        out.write(f"{',' if count else ''}\n  {text}")
        count += 1
    out.write("\n]\n" if count else "]\n")
    out.flush()


def _write_csv(rows: "Sequence[Mapping[str, Any]]") -> None:
    import csv

    columns = list(dict.fromkeys(name for row in rows for name in row))
    writer = csv.DictWriter(sys.stdout, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)


def _print_text(rows: "Sequence[tuple[str, str, str, str]]") -> None:
    if rows:
        print_table(TEXT_HEADERS, rows)
    degraded = sum(1 for _job, _kind, _workflow, verdict in rows if verdict != "ok")
    typer.echo(
        f"{len(rows)} finished job{'' if len(rows) == 1 else 's'}: {len(rows) - degraded} with results, "
        f"{degraded} degraded "
        "(--json for the records, --csv for a table of their results)"
    )
