"""The engine's public face: ``httk.workflow.engine`` exports exactly these names, and each one resolves.

The command line and library callers use these names and nothing else of the engine (the layering test
keeps the command line to them); a name added or removed here is a change of the engine's interface.
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import subprocess
import sys

import pytest
from httk.workflow import engine

EXPECTED = [
    "Aborted",
    "Bundle",
    "Certainty",
    "DebugError",
    "DebugOptions",
    "DebugResult",
    "DeleteError",
    "DeletePlan",
    "DeleteRefusedError",
    "DeleteResult",
    "Destroyed",
    "Detached",
    "Diagnosis",
    "End",
    "ExtensionView",
    "FsckReport",
    "GcReport",
    "Identity",
    "IdentityStore",
    "Imported",
    "JobDetail",
    "JobPage",
    "JobPlan",
    "JobQuery",
    "JobSpec",
    "JobsPage",
    "KeySigner",
    "KindCount",
    "LaunchReport",
    "LaunchRequest",
    "Launcher",
    "Located",
    "Manager",
    "ManagerConfig",
    "ManagerView",
    "MarkerLocation",
    "Monitor",
    "MonitorSnapshot",
    "OperatorKey",
    "Policy",
    "Position",
    "PrecheckReport",
    "ProcessLauncher",
    "PublishedRequest",
    "PublishedRunner",
    "Quiescence",
    "Readings",
    "Registration",
    "Registry",
    "RegistryEntry",
    "Remote",
    "ResultRecord",
    "RetainedAttempt",
    "RunPlan",
    "RunSummary",
    "Selection",
    "SelectorError",
    "SharedRunner",
    "SlurmLauncher",
    "Started",
    "StatusReport",
    "StopResult",
    "SubmitResult",
    "SubmitStatus",
    "Submitter",
    "TrustList",
    "WhyContext",
    "WorkflowEntry",
    "Workspace",
    "abort_transfer",
    "acknowledge_records",
    "add_bundle",
    "add_remote",
    "attach",
    "check_remote",
    "collect_garbage",
    "collect_results",
    "config_home",
    "configure_remote",
    "debug_job",
    "delete_jobs",
    "destroy_workspace",
    "detach_jobs",
    "detach_quiescence",
    "diagnose",
    "distrust_key",
    "enable_extension",
    "environment_advisories",
    "event_lines",
    "fill_outbox",
    "find_bundle",
    "find_remote",
    "find_root",
    "find_workflow",
    "fingerprint",
    "follow_history",
    "fsck",
    "global_directory",
    "import_bundles",
    "inbox_staging",
    "init",
    "job_detail",
    "job_history",
    "job_output",
    "job_row",
    "launch_managers",
    "linger_seconds",
    "list_bundles",
    "list_extensions",
    "list_jobs",
    "list_managers",
    "list_remotes",
    "list_transfers",
    "locate_implicit",
    "locate_word",
    "lookup_remote",
    "mark_delivered",
    "packaged_workflows",
    "passthrough",
    "per_user_default_path",
    "plan_deletion",
    "plan_job",
    "plan_run",
    "plan_runner_job",
    "precheck",
    "publish_request",
    "publish_runner",
    "receive_and_import",
    "remove_bundle",
    "remove_remote",
    "request_detach",
    "require_signatures",
    "run_httk",
    "run_manager",
    "run_workspaces",
    "select_each",
    "select_job",
    "select_jobs",
    "send_jobs",
    "settings_read",
    "show_job",
    "show_transfer",
    "stop_managers",
    "stored_digest",
    "submit_jobs",
    "submit_plan",
    "transfer_requirements",
    "trust_key",
    "trust_list",
    "wait_for_managers",
    "withdraw_detach",
    "workspace_directory",
    "workspace_readings",
    "workspace_status",
]


def test_all_is_exactly_the_pinned_names_sorted() -> None:
    assert engine.__all__ == EXPECTED
    assert sorted(set(EXPECTED)) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_every_name_resolves_to_a_public_object_of_a_layer(name: str) -> None:
    value = getattr(engine, name)
    module = inspect.getmodule(value)
    assert module is not None and module.__name__.startswith("httk.workflow."), name
    assert getattr(value, "__name__", name) == name  # exported as itself, never renamed
    assert name in dir(engine)


def test_the_lazy_table_and_the_type_checking_imports_name_the_same_names() -> None:
    """What mypy sees (the TYPE_CHECKING imports) is what ``__getattr__`` loads (the homes table)."""
    tree = ast.parse(inspect.getsource(engine))
    guarded = next(
        node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    typed = {
        f"{node.module}:{alias.name}"
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    homes = {
        f"{home if home.startswith('httk.') else f'{engine.__name__}.{home}'}:{name}"
        for name, home in engine._HOMES.items()
    }
    assert typed == homes


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Journal'"):
        engine.Journal  # noqa: B018 -- the access is the test


def test_importing_the_face_loads_no_layer() -> None:
    code = "import sys, httk.workflow.engine; print(sorted(m for m in sys.modules if '.engine.' in m))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_packaged_launchers_are_registered_by_their_public_names() -> None:
    registered = {
        ep.name: ep.value for ep in importlib.metadata.entry_points(group="httk.workflow.launchers")
    }
    assert registered["process"] == "httk.workflow.engine:ProcessLauncher"
    assert registered["slurm"] == "httk.workflow.engine:SlurmLauncher"
