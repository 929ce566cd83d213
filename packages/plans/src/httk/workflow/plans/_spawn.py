"""Spawning a job from a template: the job.json members a plan stored for it, and its payload files.

Both runners of the plans package spawn this way -- the coordinator each stage's job, a checked stage
its work -- so the members a template carries reach the child the same way in both.

Imports: the SDK and the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from httk.workflow.sdk import Attempt, ChildRef


def spawn_template(
    a: Attempt,
    template: Mapping[str, Any],
    files: Mapping[str, bytes],
    *,
    label: str,
    tag: str,
    placement: str | None = None,
) -> ChildRef:
    """Spawn the job ``template`` describes, with ``files`` beside its job.json, as child ``label``."""
    return a.spawn(
        template["initial_step"],
        label=label,
        tag=tag,
        placement=placement,
        name=template.get("name"),
        runner=template["runner"],
        workdir=template["workdir"],
        data=template["data"],
        claim=template["claim"],
        priority=template.get("priority"),
        retry_policy=template.get("retry_policy"),
        resources=template.get("resources") or None,
        inputs=template.get("inputs") or None,
        files=dict(files) or None,
    )
