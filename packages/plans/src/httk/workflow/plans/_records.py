"""A stage job's own history, read by the coordinator: one journal frame by its ``hwref-v1`` reference.

The coordinator is a runner, so it reads the journal the way any reader may (spec/01: reading is never
restricted) and never through the engine: a frame is found at ``journal/<writer>/<segment>.hwj`` at the
reference's offset, and returned only when its length prefix, SHA-256, reference checksum and trailer
all agree (D12). A frame that cannot be read so is ``None``: the progress log then says the time the
coordinator noted the change instead of inventing one.

Cost: one ``open`` and one ``pread`` of the frame's bytes per frame.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from httk.workflow.protocol import RecordRef, WorkflowError, encode_base36

_LENGTH = 8
_CHECKSUM = 32


def read_frame(workspace_dir: Path, ref_text: str) -> dict[str, Any] | None:
    """The state frame ``ref_text`` names in the workspace at ``workspace_dir``, or ``None``."""
    try:
        ref = RecordRef.parse(ref_text)
    except WorkflowError:
        return None
    path = workspace_dir / ".httk-workflow" / "journal" / ref.writer / f"{encode_base36(ref.segment)}.hwj"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        buffer = os.pread(fd, ref.frame_size, ref.offset)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _decoded(buffer, ref)


def _decoded(buffer: bytes, ref: RecordRef) -> dict[str, Any] | None:
    end = _LENGTH + ref.length
    prefix = buffer[:_LENGTH]
    if len(buffer) < ref.frame_size or int.from_bytes(prefix, "big") != ref.length:
        return None
    digest = hashlib.sha256(buffer[:end]).digest()
    if digest != buffer[end : end + _CHECKSUM] or digest[:16].hex() != ref.checksum128:
        return None
    if buffer[end + _CHECKSUM : ref.frame_size] != prefix:
        return None
    try:
        frame = json.loads(buffer[_LENGTH:end])
    except ValueError:
        return None
    return frame if isinstance(frame, dict) else None


def frames_since(workspace_dir: Path, ref_text: str, after_generation: int) -> list[dict[str, Any]]:
    """The job's frames from the one ``ref_text`` names back to (not including) ``after_generation``,
    oldest first; the walk stops early at a frame it cannot read."""
    frames: list[dict[str, Any]] = []
    ref: object = ref_text
    while isinstance(ref, str):
        frame = read_frame(workspace_dir, ref)
        if frame is None or not isinstance(frame.get("state_generation"), int):
            break
        if frame["state_generation"] <= after_generation:
            break
        frames.append(frame)
        ref = frame.get("previous_record_ref")
    frames.reverse()
    return frames
