"""The transfer environment check (spec/03, "Readiness and transfer environment advisories").

Before jobs move, what they need is described from the side that has them and judged by the side they
go to, each from its own files: the destination's settings, extensions, runner store and installed
modules, the jobs' own inputs, and never the process environment of the machine the command was typed
on. ``transfer send`` describes the jobs at the source (:func:`transfer_requirements`) before anything
moves; ``transfer import`` describes the bundles it was given (:func:`bundle_requirements`, from each
job.json and the ``environment`` member detach writes into the manifest: the source's engine and the
names of its settings). :func:`environment_advisories` is the destination's answer, one sentence per
shortfall; ``--strict-environment`` turns any answer into a refusal before anything changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from httk.workflow.engine.core._jobs import load_job
from httk.workflow.engine.core._workspace import Workspace
from httk.workflow.engine.publish._runners import RunnerReach, stored_digest
from httk.workflow.protocol import TransferError

from ._select import SelectorError, select_jobs

if TYPE_CHECKING:
    from ._transfer_bundle import Bundle

TRANSACTIONAL = "transactional-data-v1"
# The launch profile belongs to the machine that starts managers, not to the job: it differs by design.
_MACHINE_SETTINGS = ("manager.", "slurm.")


def engine_version() -> str:
    """This engine as ``httk --version`` names it (what remotes and bundles are compared by)."""
    from importlib.metadata import version

    return f"httk-workflow {version('httk-workflow')}"


def job_settings(workspace: Workspace) -> list[str]:
    """The names of the settings a job may read at ``workspace`` (not the machine's launch profile)."""
    return sorted(name for name in workspace.settings if not name.startswith(_MACHINE_SETTINGS))


def source_environment(workspace: Workspace) -> dict[str, Any]:
    """The manifest's ``environment``: what of a bundle's needs only its source can tell."""
    return {"engine_version": engine_version(), "settings": job_settings(workspace)}


def transfer_requirements(workspace: Workspace, selectors: Sequence[str]) -> dict[str, Any]:
    """What the jobs ``selectors`` name now (in the state tree) need of a destination: the settings the
    source holds, and each job's runner, inputs and data mode."""
    jobs: dict[str, dict[str, Any]] = {}
    for selector in selectors:
        try:
            markers = select_jobs(workspace, selector).markers
        except SelectorError:
            continue  # detach words the refusal; one an earlier send detached is not moving now
        for marker in markers:
            if marker.job_key in jobs:
                continue
            try:
                document = load_job(workspace, marker.placement, marker.job_key).document
            except (OSError, ValueError):
                continue  # detach refuses it, naming why
            jobs[marker.job_key] = _job_needs(marker.job_key, document)
    return {"version": engine_version(), "settings": job_settings(workspace), "jobs": list(jobs.values())}


def bundle_requirements(bundles: Iterable[Bundle]) -> dict[str, Any]:
    """What validated ``bundles`` need of the workspace importing them: their jobs', and from the
    manifests' ``environment`` (absent in bundles made before it) their sources' settings and engines."""
    jobs: list[dict[str, Any]] = []
    settings: set[str] = set()
    versions: set[str] = set()
    for bundle in bundles:
        jobs.append(_job_needs(bundle.job_key, bundle.job))
        environment = bundle.manifest.get("environment")
        if isinstance(environment, Mapping):
            settings.update(str(name) for name in environment.get("settings") or ())
            if isinstance(environment.get("engine_version"), str):
                versions.add(environment["engine_version"])
    return {
        "version": ", ".join(sorted(versions)) if versions else None,
        "settings": sorted(settings),
        "jobs": jobs,
    }


def _job_needs(job_key: str, document: Mapping[str, Any]) -> dict[str, Any]:
    inputs = document.get("inputs")
    data = document.get("data")
    return {
        "job_key": job_key,
        "runner": dict(document.get("runner") or {}),
        "inputs": sorted(inputs) if isinstance(inputs, Mapping) else [],
        "data": data.get("mode") if isinstance(data, Mapping) else None,
    }


def environment_advisories(workspace: Workspace, requirements: Mapping[str, Any]) -> list[str]:
    """What ``workspace``, a destination, lacks of ``requirements``; one sentence each."""
    advisories = []
    jobs = [job for job in requirements.get("jobs") or () if isinstance(job, Mapping)]
    if not jobs:
        return []
    here = engine_version()
    source = requirements.get("version")
    if source is not None and source != here:
        advisories.append(f"the destination runs {here}, the source {source}")
    transactional = [str(job["job_key"]) for job in jobs if job.get("data") == "transactional"]
    if transactional and TRANSACTIONAL not in workspace.extensions:
        advisories.append(
            f"{_some(transactional)} keep transactional data, and the destination does not enable "
            f"{TRANSACTIONAL}: an attempt committing a transaction there fails"
        )
    given = {str(name) for job in jobs for name in job.get("inputs") or ()}
    for name in requirements.get("settings") or ():
        if name not in workspace.settings and name not in given:
            advisories.append(
                f"setting {name} is set at the source but not at the destination, and no job's inputs "
                "give it: a runner reading it there finds only its default, if it has one"
            )
    reach = RunnerReach(workspace)
    for job in jobs:
        problem = _runner_problem(workspace, reach, job["runner"])
        if problem is not None:
            advisories.append(f"{job['job_key']}: {problem}")
    return advisories


def advise_or_refuse(
    advisories: Sequence[str], advise: Callable[[str], None] | None, *, strict: bool, refusal: str
) -> None:
    """Give each advisory to ``advise``; with ``strict``, any of them refuses the command before it
    changed anything (``refusal`` says what was not done and what lacks what, the advisories follow)."""
    for advisory in advisories:
        if advise is not None:
            advise(advisory)
    if advisories and strict:
        raise TransferError(f"{refusal}: " + "; ".join(advisories))


def _runner_problem(workspace: Workspace, reach: RunnerReach, runner: Mapping[str, Any]) -> str | None:
    source, path = runner.get("source", "payload"), str(runner.get("path", ""))
    if source == "workspace":  # carried in the bundle; a same-named runner with other content refuses it
        stored = stored_digest(workspace, path)
        if stored is not None and stored != runner.get("sha256"):
            return f"the destination's runner store holds another {path!r} ({stored}): its import is refused"
        return None
    if source != "installed":
        return None
    found = reach.check(runner, workspace.root)
    if found.reachable is False or (found.reachable is None and path.startswith("pkg:")):
        return f"its installed runner cannot be reached at the destination: {found.text}"
    return None


def _some(keys: Sequence[str]) -> str:
    return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
