"""Workspace policy and application settings: the two administrative maps kept in format.json.

Policy is closed: exactly the four members of the specification, each validated on write, an absent
member reading as its default. Settings are an open, flat map of dotted names to small JSON values that
runners resolve at run time; scalar settings are exported to attempts as ``HTTK_<NAME>``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._errors import PolicyError

DEFAULT_VISIBILITY_DEADLINE_SECONDS = 5.0
DEFAULT_LEASE_SECONDS = 900.0
DEFAULT_JOURNAL_SEGMENT_BYTES = 64 * 1024 * 1024
MAX_VISIBILITY_DEADLINE_SECONDS = 86400.0
MIN_LEASE_SECONDS = 1.0
MIN_JOURNAL_SEGMENT_BYTES = 4096
RETENTION_KEYS = ("attempt_control_days", "journal_days", "trash_days")
POLICY_KEYS = ("visibility_deadline_seconds", "lease_seconds", "journal_segment_bytes", "retention")
KEEP = "keep"

_SETTING_NAME_RE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)*\Z")
MAX_SETTING_NAME_BYTES = 128


@dataclass(frozen=True, slots=True)
class Policy:
    """The effective policy of a workspace; retention limits are days, ``None`` meaning keep."""

    visibility_deadline_seconds: float = DEFAULT_VISIBILITY_DEADLINE_SECONDS
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    journal_segment_bytes: int = DEFAULT_JOURNAL_SEGMENT_BYTES
    retention: Mapping[str, float | None] = field(default_factory=dict)

    def retention_days(self, category: str) -> float | None:
        """The limit of one retention category in days, or ``None`` for keep (absent, null or "keep")."""
        return self.retention.get(category)

    @classmethod
    def default(cls) -> Policy:
        """The policy of a workspace that sets no member."""
        return cls()

    def as_dict(self) -> dict[str, Any]:
        """Every member as ``policy show --json`` prints it: each retention category present, null = keep."""
        return {
            "visibility_deadline_seconds": self.visibility_deadline_seconds,
            "lease_seconds": self.lease_seconds,
            "journal_segment_bytes": self.journal_segment_bytes,
            "retention": {category: self.retention_days(category) for category in RETENTION_KEYS},
        }


def _number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PolicyError(f"policy.{key} must be a finite number, not {value!r}")
    return float(value)


def _retention(value: object) -> dict[str, float | None]:
    if not isinstance(value, Mapping):
        raise PolicyError(f"policy.retention must be an object, not {value!r}")
    out: dict[str, float | None] = {}
    for key, limit in value.items():
        if key not in RETENTION_KEYS:
            raise PolicyError(
                f"unknown policy member 'retention.{key}'; known members are {', '.join(RETENTION_KEYS)}"
            )
        if limit is None or limit == KEEP:
            out[key] = None
            continue
        days = _number(f"retention.{key}", limit)
        if days < 0:
            raise PolicyError(f"policy.retention.{key} must not be negative, not {limit!r}")
        out[key] = days
    return out


def parse_policy(document: object) -> Policy:
    """Validate a format.json ``policy`` object (absent → defaults) and return the effective policy."""
    if document is None:
        return Policy()
    if not isinstance(document, Mapping):
        raise PolicyError(f"policy must be an object, not {document!r}")
    unknown = sorted(set(document) - set(POLICY_KEYS))
    if unknown:
        raise PolicyError(f"unknown policy member {unknown[0]!r}; known members are {', '.join(POLICY_KEYS)}")
    deadline = _number("visibility_deadline_seconds", document.get("visibility_deadline_seconds", 5.0))
    if not 0 < deadline <= MAX_VISIBILITY_DEADLINE_SECONDS:
        raise PolicyError(
            f"policy.visibility_deadline_seconds must be > 0 and at most one day, not {deadline}"
        )
    lease = _number("lease_seconds", document.get("lease_seconds", DEFAULT_LEASE_SECONDS))
    if lease < MIN_LEASE_SECONDS:
        raise PolicyError(f"policy.lease_seconds must be at least one second, not {lease}")
    segment = document.get("journal_segment_bytes", DEFAULT_JOURNAL_SEGMENT_BYTES)
    if isinstance(segment, bool) or not isinstance(segment, int) or segment < MIN_JOURNAL_SEGMENT_BYTES:
        raise PolicyError(
            f"policy.journal_segment_bytes must be an integer of at least 4096, not {segment!r}"
        )
    return Policy(deadline, lease, segment, _retention(document.get("retention", {})))


def set_policy_member(document: Mapping[str, Any] | None, key: str, value: object) -> dict[str, Any]:
    """Return a copy of a ``policy`` object with ``key`` (``retention.X`` allowed) set and validated."""
    policy: dict[str, Any] = dict(document or {})
    if key.startswith("retention."):
        retention = dict(policy.get("retention") or {})
        retention[key.removeprefix("retention.")] = value
        policy["retention"] = retention
    else:
        policy[key] = value
    parse_policy(policy)
    return policy


def validate_setting_name(name: str) -> str:
    """Accept a dotted setting name such as ``vasp.command`` (lowercase, digits, underscores)."""
    if (
        not isinstance(name, str)
        or not _SETTING_NAME_RE.match(name)
        or len(name.encode()) > MAX_SETTING_NAME_BYTES
    ):
        raise PolicyError(
            f"invalid setting name {name!r}: use dotted lowercase words such as 'vasp.command' "
            f"(a-z, 0-9, '_', at most {MAX_SETTING_NAME_BYTES} bytes)"
        )
    return name


def setting_environment_name(name: str) -> str:
    """The variable a scalar setting is exported as: ``vasp.command`` → ``HTTK_VASP_COMMAND``."""
    return "HTTK_" + validate_setting_name(name).replace(".", "_").upper()


def parse_settings(document: object) -> dict[str, Any]:
    """Validate the format.json ``settings`` map (absent → empty)."""
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise PolicyError(f"settings must be an object, not {document!r}")
    for name in document:
        validate_setting_name(name)
    return dict(document)
