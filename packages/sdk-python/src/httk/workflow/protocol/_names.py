"""Names the protocol puts into paths: job UUIDs, tags, job keys, placements, labels and step names.

Every validator returns its input unchanged when it is valid and raises :class:`InvalidNameError` naming
the rule otherwise; parsers never trust a tag to find the UUID.

Tags, pool labels and capability labels share one conservative syntax: 1 to 48 ASCII bytes of lowercase
letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit, never containing ``--``. The
specification leaves step names open; this implementation accepts 1 to 128 bytes of letters, digits,
``.``, ``_`` and ``-`` starting with a letter, digit or ``_`` (so a step name is always safe in a path, an
environment variable value and a log line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._errors import InvalidNameError

TAG_MAX_BYTES = 48
UUID_LENGTH = 36
JOB_KEY_MAX_BYTES = TAG_MAX_BYTES + 2 + UUID_LENGTH
STEP_MAX_BYTES = 128
RESERVED_COMPONENT = ".httk-workflow"
DEFAULT_POOL = "default"

_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_LABEL_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,47}\Z")
_STEP_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")
_DECLARATION_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}\Z")


def validate_uuid(value: str, what: str = "job id") -> str:
    """Accept a lowercase canonical hyphenated UUID.

    Examples
    --------
    >>> validate_uuid("01234567-89ab-cdef-0123-456789abcdef")
    '01234567-89ab-cdef-0123-456789abcdef'
    """
    if not isinstance(value, str) or not _UUID_RE.match(value):
        raise InvalidNameError(what, value, "must be a lowercase canonical UUID (8-4-4-4-12 hex digits)")
    return value


def _validate_label(value: str, what: str) -> str:
    if not isinstance(value, str) or not _LABEL_RE.match(value):
        raise InvalidNameError(
            what,
            value,
            "must be 1-48 bytes of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
        )
    if "--" in value:
        raise InvalidNameError(what, value, "must not contain '--'")
    return value


def validate_tag(value: str) -> str:
    """Accept a job tag.

    Examples
    --------
    >>> validate_tag("silicon-relax")
    'silicon-relax'
    """
    return _validate_label(value, "tag")


def validate_pool(value: str) -> str:
    """Accept a pool label (tag syntax)."""
    return _validate_label(value, "pool")


def validate_capability(value: str) -> str:
    """Accept a capability label (tag syntax)."""
    return _validate_label(value, "capability")


def validate_child_label(value: str) -> str:
    """Accept the label of a child in a spawn set (tag syntax)."""
    return _validate_label(value, "child label")


def validate_step(value: str) -> str:
    """Accept a step name.

    Examples
    --------
    >>> validate_step("relax")
    'relax'
    """
    if not isinstance(value, str) or not _STEP_RE.match(value):
        raise InvalidNameError(
            "step name",
            value,
            "must be 1-128 bytes of letters, digits, '.', '_' and '-', not starting with '.' or '-'",
        )
    return value


def validate_declaration_name(value: str) -> str:
    """Accept a declaration name, which is also a file basename below ``.httk-job/declarations/``."""
    if not isinstance(value, str) or not _DECLARATION_RE.match(value):
        raise InvalidNameError("declaration name", value, "must match [A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
    return value


def validate_operation_id(value: str) -> str:
    """Accept a transaction operation id: one normalized protocol component."""
    if not isinstance(value, str) or not _DECLARATION_RE.match(value):
        raise InvalidNameError("operation id", value, "must match [A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
    return value


@dataclass(frozen=True, slots=True)
class JobKey:
    """``[<tag>--]<uuid>``: the payload directory name and the stem of every marker of one job."""

    job_id: str
    tag: str | None = None

    def __post_init__(self) -> None:
        validate_uuid(self.job_id)
        if self.tag is not None:
            validate_tag(self.tag)

    def __str__(self) -> str:
        return self.job_id if self.tag is None else f"{self.tag}--{self.job_id}"

    @classmethod
    def unchecked(cls, job_id: str, tag: str | None) -> JobKey:
        """A job key from parts already known valid (the fast marker pattern matched them)."""
        key = object.__new__(cls)
        object.__setattr__(key, "job_id", job_id)
        object.__setattr__(key, "tag", tag)
        return key

    @classmethod
    def parse(cls, text: str) -> JobKey:
        """Split a job key, identifying the final UUID rather than trusting the tag.

        Examples
        --------
        >>> JobKey.parse("silicon-relax--01234567-89ab-cdef-0123-456789abcdef").tag
        'silicon-relax'
        """
        if not isinstance(text, str) or len(text) < UUID_LENGTH:
            raise InvalidNameError("job key", text, "must end in a 36-character UUID")
        job_id = text[-UUID_LENGTH:]
        if not _UUID_RE.match(job_id):
            raise InvalidNameError("job key", text, "must end in a lowercase canonical UUID")
        if len(text) == UUID_LENGTH:
            return cls(job_id)
        prefix = text[:-UUID_LENGTH]
        if not prefix.endswith("--") or len(prefix) == 2:
            raise InvalidNameError("job key", text, "must be '<uuid>' or '<tag>--<uuid>'")
        try:
            return cls(job_id, prefix[:-2])
        except InvalidNameError as exc:
            raise InvalidNameError("job key", text, f"has an invalid tag: {exc.rule}") from None


def validate_placement(value: str, *, name_max: int = 255) -> str:
    """Accept a placement: a normalized relative POSIX path of one or more components.

    Empty components, ``.``, ``..``, NUL bytes, ``.httk-workflow`` and text that is not UTF-8 are refused,
    as is any component longer than ``name_max`` bytes (the filesystem's filename limit).

    Examples
    --------
    >>> validate_placement("project-17/0/03a")
    'project-17/0/03a'
    """
    if not isinstance(value, str) or value == "":
        raise InvalidNameError("placement", value, "must be a nonempty relative path")
    if "\0" in value:
        raise InvalidNameError("placement", value, "must not contain NUL bytes")
    if value.startswith("/"):
        raise InvalidNameError("placement", value, "must be relative, not absolute")
    for component in value.split("/"):
        if component == "":
            raise InvalidNameError("placement", value, "must not contain empty components")
        if component in (".", ".."):
            raise InvalidNameError("placement", value, f"must not contain {component!r} components")
        if component == RESERVED_COMPONENT:
            raise InvalidNameError("placement", value, "must not contain the reserved '.httk-workflow'")
        try:
            size = len(component.encode("utf-8"))
        except UnicodeEncodeError:
            # An undecodable filename byte (as os.fsdecode presents it) or a lone surrogate: a filename
            # may hold the first, but no protocol document naming the placement (a frame, a request, a
            # join) can, because they are UTF-8 JSON.
            raise InvalidNameError("placement", value, "has a character that is not UTF-8 text") from None
        if size > name_max:
            raise InvalidNameError("placement", value, f"has a component longer than {name_max} bytes")
    return value


def placement_prefix_matches(placement: str, prefix: str) -> bool:
    """Tell whether ``placement`` lies at or below the placement ``prefix`` (component-wise)."""
    return placement == prefix or placement.startswith(prefix + "/")
