"""The httk-workflow engine: its public face, what the command line and library callers use.

Everything listed in ``__all__`` is public; everything else lives in the private modules of the engine's
layers (``core``, ``publish``, ``requests``, ``maintenance``, ``manager``, ``ops``; see DESIGN.md, "The
engine's floor plan") and may change without notice. The names, by what they are for:

* workspaces: :func:`init`, :func:`attach`, :func:`find_root`, :class:`Workspace` (policy and settings
  changes are its methods; :class:`Policy` is its ``policy``), :class:`MarkerLocation` (where a job's
  state marker is);
* workspace extensions: :func:`list_extensions`, :func:`enable_extension`, :class:`ExtensionView`;
* submission and the runner store: :class:`Submitter`, :class:`SubmitResult`, :class:`SubmitStatus`,
  :func:`publish_runner`, :class:`PublishedRunner`;
* new jobs (``job new``): the packaged workflows (:func:`packaged_workflows`, :func:`find_workflow`,
  :class:`WorkflowEntry`), a job of one or of an own runner checked whole before anything is written
  (:func:`plan_job`, :func:`plan_runner_job`, :class:`JobPlan`, :class:`SharedRunner`), and its
  submission (:func:`submit_plan`);
* selecting jobs: :func:`select_job`, :func:`select_jobs`, :func:`select_each`, :class:`Selection`,
  :class:`SelectorError`, :class:`Position` (a ``job list`` cursor);
* reading (nothing is written): :class:`Monitor` and :func:`job_detail` (the monitor's data, with
  :class:`MonitorSnapshot`, :class:`JobQuery`, :class:`JobsPage`, :class:`KindCount`,
  :class:`Certainty`, :class:`JobDetail`), :func:`workspace_status`, :func:`list_managers`, :func:`list_jobs`,
  :func:`job_row`, :func:`show_job`, :func:`job_history`, :func:`follow_history`, :func:`job_output`,
  :func:`diagnose` (``job why``), :func:`precheck`, and their reports; :func:`event_lines` (a
  job's runner-reported events, as both show them); :func:`collect_results` (``collect``: every
  finished job's result document);
* maintenance: :func:`fsck`, :func:`collect_garbage`;
* operator actions: :func:`publish_request`, :func:`plan_deletion` and :func:`delete_jobs`,
  :func:`debug_job`;
* detached transfers: :func:`detach_jobs`, :func:`import_bundles`, :func:`abort_transfer`,
  :func:`list_transfers`, :func:`show_transfer`, and their results (:class:`Detached`,
  :class:`Imported`, :class:`Aborted`); between machines, :func:`send_jobs` (each end an
  :class:`End`) and the plumbing at each end (:func:`fill_outbox`, :func:`receive_and_import`,
  :func:`inbox_staging`, :func:`acknowledge_records`, :func:`mark_delivered`, :func:`transfer_requirements`,
  :func:`environment_advisories`);
* remotes: :class:`Remote` and :func:`add_remote`, :func:`configure_remote`, :func:`find_remote`,
  :func:`lookup_remote`, :func:`list_remotes`, :func:`remove_remote`; over ssh, :func:`run_httk`,
  :func:`passthrough` and :func:`check_remote`;
* task managers: :class:`Manager` and :class:`ManagerConfig` (one in this process), :func:`run_manager`
  (what ``manager run --inline`` does), :func:`run_workspaces` (several workspaces and watch roots in
  one process), :func:`plan_run`, :func:`launch_managers`, :func:`wait_for_managers`,
  :func:`stop_managers`; a workspace's acknowledged detach: :func:`request_detach`,
  :func:`detach_quiescence` (a :class:`Quiescence`), :func:`withdraw_detach`;
* launchers: the :class:`Launcher` protocol with :class:`LaunchRequest` and :class:`LaunchReport`, the
  two packaged ones (:class:`ProcessLauncher`, :class:`SlurmLauncher`, which the entry point group
  ``httk.workflow.launchers`` names), and the bundles that select one.

Names load lazily: importing this package costs nothing, and a name costs only the modules it needs, so
a read command never imports the manager.

Examples
--------
>>> from httk.workflow.engine import Submitter, attach, init  # doctest: +SKIP
>>> workspace = init("runs/demo", name="demo")  # doctest: +SKIP
>>> Submitter(workspace).submit_payload(payload, "project-a/00")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from httk.workflow.engine.core._liveness import ManagerView, list_managers
    from httk.workflow.engine.core._user_dirs import config_home
    from httk.workflow.engine.core._workspace import MarkerLocation, Workspace, attach, find_root, init
    from httk.workflow.engine.maintenance._fsck import fsck
    from httk.workflow.engine.maintenance._fsck_check import FsckReport
    from httk.workflow.engine.maintenance._gc import GcReport, collect_garbage
    from httk.workflow.engine.manager._detach import (
        Quiescence,
        detach_quiescence,
        request_detach,
        withdraw_detach,
    )
    from httk.workflow.engine.manager._launchers import (
        Bundle,
        Launcher,
        LaunchReport,
        LaunchRequest,
        ProcessLauncher,
        Started,
        StopResult,
        add_bundle,
        find_bundle,
        global_directory,
        list_bundles,
        remove_bundle,
        settings_read,
        stop_managers,
        workspace_directory,
    )
    from httk.workflow.engine.manager._manager import Manager, RunSummary
    from httk.workflow.engine.manager._run import (
        RunPlan,
        launch_managers,
        plan_run,
        run_manager,
        run_workspaces,
        wait_for_managers,
    )
    from httk.workflow.engine.manager._slurm import SlurmLauncher
    from httk.workflow.engine.manager._state import ManagerConfig
    from httk.workflow.engine.ops._collect import ResultRecord, collect_results
    from httk.workflow.engine.ops._debug import DebugError, DebugOptions, DebugResult, debug_job
    from httk.workflow.engine.ops._delete import (
        DeleteError,
        DeletePlan,
        DeleteRefusedError,
        DeleteResult,
        delete_jobs,
        linger_seconds,
        plan_deletion,
    )
    from httk.workflow.engine.ops._destroy import Destroyed, destroy_workspace
    from httk.workflow.engine.ops._events import event_lines
    from httk.workflow.engine.ops._extensions import ExtensionView, enable_extension, list_extensions
    from httk.workflow.engine.ops._history import follow_history, job_history
    from httk.workflow.engine.ops._identity import Identity, IdentityStore, KeySigner, OperatorKey
    from httk.workflow.engine.ops._inspect import JobPage, StatusReport, job_row, list_jobs, workspace_status
    from httk.workflow.engine.ops._locate import (
        Located,
        Readings,
        locate_implicit,
        locate_word,
        per_user_default_path,
        workspace_readings,
    )
    from httk.workflow.engine.ops._monitor import (
        Certainty,
        JobDetail,
        JobQuery,
        JobsPage,
        KindCount,
        Monitor,
        MonitorSnapshot,
        job_detail,
    )
    from httk.workflow.engine.ops._new import (
        JobPlan,
        SharedRunner,
        WorkflowEntry,
        find_workflow,
        packaged_workflows,
        plan_job,
        plan_runner_job,
        submit_plan,
    )
    from httk.workflow.engine.ops._precheck import PrecheckReport, precheck
    from httk.workflow.engine.ops._registry import Registration, Registry, RegistryEntry
    from httk.workflow.engine.ops._remotes import (
        Remote,
        add_remote,
        configure_remote,
        find_remote,
        list_remotes,
        lookup_remote,
        remove_remote,
    )
    from httk.workflow.engine.ops._select import (
        Position,
        Selection,
        SelectorError,
        select_each,
        select_job,
        select_jobs,
    )
    from httk.workflow.engine.ops._show import RetainedAttempt, job_output, show_job
    from httk.workflow.engine.ops._ssh import check_remote, passthrough, run_httk
    from httk.workflow.engine.ops._transfer_detach import Detached, detach_jobs
    from httk.workflow.engine.ops._transfer_environment import environment_advisories, transfer_requirements
    from httk.workflow.engine.ops._transfer_import import Imported, import_bundles
    from httk.workflow.engine.ops._transfer_route import End, send_jobs
    from httk.workflow.engine.ops._transfer_send import (
        acknowledge_records,
        fill_outbox,
        inbox_staging,
        mark_delivered,
        receive_and_import,
    )
    from httk.workflow.engine.ops._transfers import Aborted, abort_transfer, list_transfers, show_transfer
    from httk.workflow.engine.ops._why import WhyContext, diagnose
    from httk.workflow.engine.ops._why_report import Diagnosis
    from httk.workflow.engine.publish._runners import PublishedRunner, publish_runner, stored_digest
    from httk.workflow.engine.publish._submit import (
        JobSpec,
        SubmitResult,
        SubmitStatus,
        Submitter,
        submit_jobs,
    )
    from httk.workflow.engine.requests._requests import PublishedRequest, publish_request
    from httk.workflow.engine.requests._signatures import (
        distrust_key,
        require_signatures,
        trust_key,
        trust_list,
    )
    from httk.workflow.protocol._policy import Policy
    from httk.workflow.protocol._signing import TrustList, fingerprint

# Where each public name is defined, by layer (a full module name outside the engine); loaded on first use.
_HOMES = {
    **dict.fromkeys(("Detached", "detach_jobs"), "ops._transfer_detach"),
    **dict.fromkeys(("Imported", "import_bundles"), "ops._transfer_import"),
    **dict.fromkeys(("Aborted", "abort_transfer", "list_transfers", "show_transfer"), "ops._transfers"),
    **dict.fromkeys(("MarkerLocation", "Workspace", "attach", "find_root", "init"), "core._workspace"),
    "config_home": "core._user_dirs",
    "Policy": "httk.workflow.protocol._policy",  # the type of Workspace.policy
    **dict.fromkeys(("ManagerView", "list_managers"), "core._liveness"),
    **dict.fromkeys(
        ("JobSpec", "SubmitResult", "SubmitStatus", "Submitter", "submit_jobs"), "publish._submit"
    ),
    **dict.fromkeys(("PublishedRunner", "publish_runner", "stored_digest"), "publish._runners"),
    **dict.fromkeys(("PublishedRequest", "publish_request"), "requests._requests"),
    **dict.fromkeys(
        ("distrust_key", "require_signatures", "trust_key", "trust_list"), "requests._signatures"
    ),
    **dict.fromkeys(("TrustList", "fingerprint"), "httk.workflow.protocol._signing"),
    **dict.fromkeys(("Identity", "IdentityStore", "KeySigner", "OperatorKey"), "ops._identity"),
    "fsck": "maintenance._fsck",
    "FsckReport": "maintenance._fsck_check",
    **dict.fromkeys(("GcReport", "collect_garbage"), "maintenance._gc"),
    **dict.fromkeys(("Manager", "RunSummary"), "manager._manager"),
    "ManagerConfig": "manager._state",
    **dict.fromkeys(
        ("RunPlan", "launch_managers", "plan_run", "run_manager", "run_workspaces", "wait_for_managers"),
        "manager._run",
    ),
    **dict.fromkeys(
        ("Quiescence", "detach_quiescence", "request_detach", "withdraw_detach"), "manager._detach"
    ),
    **dict.fromkeys(
        (
            "Bundle",
            "LaunchReport",
            "LaunchRequest",
            "Launcher",
            "ProcessLauncher",
            "Started",
            "StopResult",
            "add_bundle",
            "find_bundle",
            "global_directory",
            "list_bundles",
            "remove_bundle",
            "settings_read",
            "stop_managers",
            "workspace_directory",
        ),
        "manager._launchers",
    ),
    "SlurmLauncher": "manager._slurm",
    **dict.fromkeys(
        ("Position", "Selection", "SelectorError", "select_each", "select_job", "select_jobs"), "ops._select"
    ),
    **dict.fromkeys(("JobPage", "StatusReport", "job_row", "list_jobs", "workspace_status"), "ops._inspect"),
    **dict.fromkeys(("RetainedAttempt", "job_output", "show_job"), "ops._show"),
    **dict.fromkeys(("follow_history", "job_history"), "ops._history"),
    "event_lines": "ops._events",
    **dict.fromkeys(("ResultRecord", "collect_results"), "ops._collect"),
    **dict.fromkeys(("WhyContext", "diagnose"), "ops._why"),
    "Diagnosis": "ops._why_report",
    **dict.fromkeys(
        (
            "Certainty",
            "JobDetail",
            "JobQuery",
            "JobsPage",
            "KindCount",
            "Monitor",
            "MonitorSnapshot",
            "job_detail",
        ),
        "ops._monitor",
    ),
    **dict.fromkeys(("PrecheckReport", "precheck"), "ops._precheck"),
    **dict.fromkeys(("Destroyed", "destroy_workspace"), "ops._destroy"),
    **dict.fromkeys(
        (
            "Located",
            "Readings",
            "locate_implicit",
            "locate_word",
            "per_user_default_path",
            "workspace_readings",
        ),
        "ops._locate",
    ),
    **dict.fromkeys(("Registration", "Registry", "RegistryEntry"), "ops._registry"),
    **dict.fromkeys(
        (
            "Remote",
            "add_remote",
            "configure_remote",
            "find_remote",
            "list_remotes",
            "lookup_remote",
            "remove_remote",
        ),
        "ops._remotes",
    ),
    **dict.fromkeys(("check_remote", "passthrough", "run_httk"), "ops._ssh"),
    **dict.fromkeys(("End", "send_jobs"), "ops._transfer_route"),
    **dict.fromkeys(("environment_advisories", "transfer_requirements"), "ops._transfer_environment"),
    **dict.fromkeys(
        ("acknowledge_records", "fill_outbox", "inbox_staging", "mark_delivered", "receive_and_import"),
        "ops._transfer_send",
    ),
    **dict.fromkeys(
        (
            "DeleteError",
            "DeletePlan",
            "DeleteRefusedError",
            "DeleteResult",
            "delete_jobs",
            "linger_seconds",
            "plan_deletion",
        ),
        "ops._delete",
    ),
    **dict.fromkeys(("DebugError", "DebugOptions", "DebugResult", "debug_job"), "ops._debug"),
    **dict.fromkeys(("ExtensionView", "enable_extension", "list_extensions"), "ops._extensions"),
    **dict.fromkeys(
        (
            "JobPlan",
            "SharedRunner",
            "WorkflowEntry",
            "find_workflow",
            "packaged_workflows",
            "plan_job",
            "plan_runner_job",
            "submit_plan",
        ),
        "ops._new",
    ),
}

__all__ = [
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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = home if home.startswith("httk.") else f"{__name__}.{home}"
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
