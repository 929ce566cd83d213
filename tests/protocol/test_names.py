"""Names the protocol puts into paths: job UUIDs, tags, job keys, placements, labels and step names."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from httk.workflow.protocol import (
    JOB_KEY_MAX_BYTES,
    RESERVED_COMPONENT,
    STEP_MAX_BYTES,
    TAG_MAX_BYTES,
    UUID_LENGTH,
    InvalidNameError,
    JobKey,
    placement_prefix_matches,
    validate_capability,
    validate_child_label,
    validate_declaration_name,
    validate_operation_id,
    validate_placement,
    validate_pool,
    validate_step,
    validate_tag,
    validate_uuid,
)
from hypothesis import given, settings
from hypothesis import strategies as st

FAST = settings(deadline=None, max_examples=200)
UUID = "01234567-89ab-cdef-0123-456789abcdef"
LOWER_DIGITS = "abcdefghijklmnopqrstuvwxyz0123456789"

uuids = st.uuids().map(str)
tags = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,47}", fullmatch=True).filter(lambda t: "--" not in t)
# Tags of at most 41 bytes built from short words joined by '.', '-' or '_', so dots and single hyphens
# are frequent (the regex strategy alone rarely produces them).
dotted_tags = st.lists(
    st.from_regex(r"[a-z0-9][a-z0-9_]{0,5}", fullmatch=True), min_size=1, max_size=6
).flatmap(
    lambda parts: st.lists(st.sampled_from(".-_"), min_size=len(parts) - 1, max_size=len(parts) - 1).map(
        lambda seps: parts[0] + "".join(s + p for s, p in zip(seps, parts[1:], strict=True))
    )
)
job_keys = st.builds(JobKey, uuids, st.none() | tags | dotted_tags)
# Any code point, lone surrogates (as JSON "\ud800" escapes produce) and path punctuation included.
anything = st.text(st.characters() | st.sampled_from(["\ud800", "\udcff", "\0", "/", ".", "-"]), max_size=100)

LABEL_VALIDATORS: list[Callable[[str], str]] = [
    validate_tag,
    validate_pool,
    validate_capability,
    validate_child_label,
]
BAD_LABELS = [
    "",
    "a--b",
    "--",
    "a---b",
    "silicon--relax",
    "-a",
    "-",
    ".a",
    ".",
    "..",
    "_a",
    "A",
    "aB",
    "Silicon",
    "a b",
    " a",
    "a ",
    "a/b",
    "a\\b",
    "a:b",
    "a+b",
    "a\n",
    "a\0",
    "\u00e9",
    "caf\u00e9",
    "a\u0131",  # dotless i
    "\uff41",  # fullwidth a
    "a" * (TAG_MAX_BYTES + 1),
    "a" + "-b" * 24,  # 49 bytes
]


def _untyped(value: object) -> Any:
    return value


# ----------------------------------------------------------------------------------------------- UUIDs


@FAST
@given(st.uuids())
def test_canonical_uuids_are_accepted(value: uuid.UUID) -> None:
    assert validate_uuid(str(value)) == str(value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        UUID.upper(),
        "01234567-89AB-cdef-0123-456789abcdef",
        UUID.replace("-", ""),
        "{" + UUID + "}",
        "urn:uuid:" + UUID,
        UUID + "\n",
        " " + UUID,
        UUID[:-1],
        UUID + "0",
        "01234567-89ab-cdef-0123-456789abcdeg",
        "0123456-789ab-cdef-0123-456789abcdef",
        "01234567_89ab_cdef_0123_456789abcdef",
    ],
)
def test_non_canonical_uuids_are_refused(value: str) -> None:
    with pytest.raises(InvalidNameError, match="canonical UUID"):
        validate_uuid(value)


@pytest.mark.parametrize("value", [None, 5, b"01234567-89ab-cdef-0123-456789abcdef", uuid.UUID(UUID)])
def test_non_strings_are_refused_as_uuids(value: object) -> None:
    with pytest.raises(InvalidNameError):
        validate_uuid(_untyped(value))


def test_uuid_error_names_what() -> None:
    with pytest.raises(InvalidNameError, match="invalid writer id"):
        validate_uuid("x", "writer id")


# ------------------------------------------------------------------------------ tags and tag-like labels


@pytest.mark.parametrize("validator", LABEL_VALIDATORS)
@pytest.mark.parametrize(
    "value",
    [
        "a",
        "0",
        "silicon-relax",
        "si.relax_1",
        "a.b.c",
        "x-y-z",
        "a-",
        "a.",
        "a_",
        "9.-_",
        "a" * TAG_MAX_BYTES,
    ],
)
def test_valid_labels_are_accepted(validator: Callable[[str], str], value: str) -> None:
    assert validator(value) == value


@pytest.mark.parametrize("validator", LABEL_VALIDATORS)
@pytest.mark.parametrize("value", BAD_LABELS)
def test_malformed_labels_are_refused(validator: Callable[[str], str], value: str) -> None:
    with pytest.raises(InvalidNameError):
        validator(value)


@pytest.mark.parametrize("value", [None, 1, b"tag", ["tag"]])
def test_non_string_tags_are_refused(value: object) -> None:
    with pytest.raises(InvalidNameError):
        validate_tag(_untyped(value))


def test_label_errors_name_their_kind() -> None:
    for validator, what in zip(LABEL_VALIDATORS, ["tag", "pool", "capability", "child label"], strict=True):
        with pytest.raises(InvalidNameError) as info:
            validator("a--b")
        assert info.value.what == what
        assert "--" in info.value.rule


@FAST
@given(tags)
def test_generated_tags_are_accepted(tag: str) -> None:
    assert validate_tag(tag) == tag
    assert 1 <= len(tag.encode()) <= TAG_MAX_BYTES


@FAST
@given(dotted_tags)
def test_dotted_and_hyphenated_tags_are_accepted(tag: str) -> None:
    assert validate_tag(tag) == tag


@FAST
@given(anything)
def test_arbitrary_text_is_a_tag_or_refused(text: str) -> None:
    try:
        validate_tag(text)
    except InvalidNameError:
        return
    assert set(text) <= set(LOWER_DIGITS + "._-")
    assert 1 <= len(text) <= TAG_MAX_BYTES
    assert text[0] in LOWER_DIGITS
    assert "--" not in text


# ----------------------------------------------------------------------------------- steps and friends


@pytest.mark.parametrize("value", ["relax", "Relax", "_private", "0", "a.b-c_d", "x" * STEP_MAX_BYTES])
def test_valid_steps_are_accepted(value: str) -> None:
    assert validate_step(value) == value


@pytest.mark.parametrize(
    "value",
    ["", ".relax", "-relax", "re lax", "re/lax", "relax\n", "r\u00e9lax", "x" * (STEP_MAX_BYTES + 1), "a\0"],
)
def test_malformed_steps_are_refused(value: str) -> None:
    with pytest.raises(InvalidNameError):
        validate_step(value)


@pytest.mark.parametrize("validator", [validate_declaration_name, validate_operation_id])
@pytest.mark.parametrize("value", ["result", "Result_1", "_x", "a.json", "op-0001", "x" * 64])
def test_valid_declaration_names_and_operation_ids(validator: Callable[[str], str], value: str) -> None:
    assert validator(value) == value


@pytest.mark.parametrize("validator", [validate_declaration_name, validate_operation_id])
@pytest.mark.parametrize("value", ["", ".", "..", ".hidden", "-x", "a/b", "a b", "\u00e9", "x" * 65, "a\0"])
def test_malformed_declaration_names_and_operation_ids(validator: Callable[[str], str], value: str) -> None:
    with pytest.raises(InvalidNameError):
        validator(value)


@pytest.mark.parametrize(
    "validator", [validate_step, validate_declaration_name, validate_operation_id, validate_pool]
)
@FAST
@given(text=anything)
def test_arbitrary_text_is_a_name_or_refused(validator: Callable[[str], str], text: str) -> None:
    try:
        assert validator(text) == text
    except InvalidNameError:
        return
    assert text.isascii()
    assert "/" not in text
    assert text[0] not in ".-"


# -------------------------------------------------------------------------------------------- job keys


def test_job_key_without_tag() -> None:
    key = JobKey.parse(UUID)
    assert key == JobKey(UUID)
    assert key.tag is None
    assert key.job_id == UUID
    assert str(key) == UUID


def test_job_key_with_tag() -> None:
    key = JobKey.parse(f"silicon-relax--{UUID}")
    assert key == JobKey(UUID, "silicon-relax")
    assert str(key) == f"silicon-relax--{UUID}"


@pytest.mark.parametrize(
    "tag",
    ["a", "si.relax-1", "a.b.c", "x-y-z", "a-", "a.", "a-b.c_d", "x.p123.g1", "0", "a" * TAG_MAX_BYTES],
)
def test_job_keys_with_dotted_and_hyphenated_tags(tag: str) -> None:
    text = f"{tag}--{UUID}"
    key = JobKey.parse(text)
    assert key.tag == tag
    assert key.job_id == UUID
    assert str(key) == text


def test_tag_ending_in_hyphen_is_split_at_the_final_uuid() -> None:
    # "a---<uuid>" is the tag "a-" followed by "--": parsers find the UUID rather than trusting the tag.
    assert JobKey.parse(f"a---{UUID}") == JobKey(UUID, "a-")


def test_tag_that_looks_like_a_uuid_is_still_a_tag() -> None:
    other = "fedcba98-7654-3210-fedc-ba9876543210"
    assert JobKey.parse(f"{other}--{UUID}") == JobKey(UUID, other)


def test_longest_job_key_is_86_bytes() -> None:
    key = JobKey(UUID, "t" * TAG_MAX_BYTES)
    assert len(str(key)) == JOB_KEY_MAX_BYTES == TAG_MAX_BYTES + 2 + UUID_LENGTH == 86
    assert JobKey.parse(str(key)) == key


@FAST
@given(job_keys)
def test_job_key_round_trip(key: JobKey) -> None:
    text = str(key)
    assert JobKey.parse(text) == key
    assert str(JobKey.parse(text)) == text
    assert len(text) <= JOB_KEY_MAX_BYTES
    assert text.endswith(key.job_id)


@FAST
@given(uuids, tags)
def test_job_key_parse_agrees_with_construction(job_id: str, tag: str) -> None:
    assert JobKey.parse(f"{tag}--{job_id}") == JobKey(job_id, tag)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "silicon-relax",
        UUID[:-1],
        UUID.upper(),
        f"tag--{UUID.upper()}",
        f"tag-{UUID}",
        f"tag_{UUID}",
        f"tag.{UUID}",
        f"tag{UUID}",
        f"tag -- {UUID}",
        f"--{UUID}",
        f"-{UUID}",
        f"tag----{UUID}",
        f"a--b--{UUID}",
        f"{UUID}--tag",
        f"tag--{UUID}\n",
        f"tag--{UUID} ",
        f" tag--{UUID}",
        f"Tag--{UUID}",
        f"-tag--{UUID}",
        f".tag--{UUID}",
        f"caf\u00e9--{UUID}",
        f"{'a' * (TAG_MAX_BYTES + 1)}--{UUID}",
        f"a/b--{UUID}",
    ],
)
def test_malformed_job_keys_are_refused(text: str) -> None:
    with pytest.raises(InvalidNameError) as info:
        JobKey.parse(text)
    assert info.value.what == "job key"
    assert info.value.value == text


@pytest.mark.parametrize("value", [None, 5, UUID.encode()])
def test_non_string_job_keys_are_refused(value: object) -> None:
    with pytest.raises(InvalidNameError):
        JobKey.parse(_untyped(value))


@pytest.mark.parametrize(
    ("job_id", "tag"),
    [("not-a-uuid", None), (UUID.upper(), None), (UUID, ""), (UUID, "a--b"), (UUID, "-a"), (UUID, "A")],
)
def test_job_key_construction_validates(job_id: str, tag: str | None) -> None:
    with pytest.raises(InvalidNameError):
        JobKey(job_id, tag)


near_miss_keys = st.builds(
    lambda head, sep, job_id: head + sep + job_id,
    st.text("ab.-_A0", max_size=6),
    st.sampled_from(["", "-", "--", "---", "_", ".", "-.-"]),
    uuids | uuids.map(str.upper) | st.text("0123456789abcdef-", min_size=35, max_size=37),
)


@FAST
@given(anything | near_miss_keys)
def test_arbitrary_text_is_a_job_key_or_refused(text: str) -> None:
    try:
        key = JobKey.parse(text)
    except InvalidNameError:
        return
    assert str(key) == text
    assert validate_uuid(key.job_id) == text[-UUID_LENGTH:]


# ------------------------------------------------------------------------------------------ placements


components = st.text(st.characters(exclude_characters="/\0", codec="utf-8"), min_size=1, max_size=12).filter(
    lambda c: c not in (".", "..", RESERVED_COMPONENT)
)
placements = st.lists(components, min_size=1, max_size=6).map("/".join)


@pytest.mark.parametrize(
    "value",
    [
        "project-17/0/03a",
        "a",
        "...",
        ".hidden",
        ".httk-workflow2",
        "httk-workflow",
        "x/.httk-workflowx/y",
        "a b/c\td",
        "d\u00e9j\u00e0/vu",
        "back\\slash",
        "x" * 255,
        "\u00e9" * 127,  # 254 bytes
    ],
)
def test_valid_placements_are_accepted(value: str) -> None:
    assert validate_placement(value) == value


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("", "nonempty"),
        ("/", "absolute"),
        ("/a", "absolute"),
        ("/a/b", "absolute"),
        ("a/", "empty components"),
        ("a/b/", "empty components"),
        ("a//b", "empty components"),
        ("//a", "absolute"),
        (".", "'.'"),
        ("./a", "'.'"),
        ("a/./b", "'.'"),
        ("a/.", "'.'"),
        ("..", "'..'"),
        ("../a", "'..'"),
        ("a/../b", "'..'"),
        ("a/..", "'..'"),
        ("a\0b", "NUL"),
        ("\0", "NUL"),
        (".httk-workflow", "reserved"),
        (".httk-workflow/state", "reserved"),
        ("a/.httk-workflow", "reserved"),
        ("a/.httk-workflow/b", "reserved"),
        ("x" * 256, "longer than 255"),
        ("ok/" + "x" * 256, "longer than 255"),
        ("\u00e9" * 128, "longer than 255"),  # 128 characters, 256 bytes
        ("\ud800", "not UTF-8"),  # a lone surrogate, e.g. from a JSON "\ud800" escape
        ("a/\udfff/b", "not UTF-8"),
        ("\udcff", "not UTF-8"),  # an undecodable filename byte as os.fsdecode presents it: no frame names it
    ],
)
def test_malformed_placements_are_refused(value: str, rule: str) -> None:
    with pytest.raises(InvalidNameError, match=rule) as info:
        validate_placement(value)
    assert info.value.value == value


def test_placement_name_limit_is_configurable() -> None:
    assert validate_placement("x" * 213, name_max=213)
    with pytest.raises(InvalidNameError, match="longer than 213"):
        validate_placement("a/" + "x" * 214, name_max=213)


@pytest.mark.parametrize("value", [None, 1, b"a/b", ["a"]])
def test_non_string_placements_are_refused(value: object) -> None:
    with pytest.raises(InvalidNameError):
        validate_placement(_untyped(value))


@FAST
@given(placements)
def test_generated_placements_are_accepted(value: str) -> None:
    assert validate_placement(value) == value


@FAST
@given(
    anything | st.text("ab./\0", max_size=12) | st.lists(st.sampled_from(["a", ".", "..", ""])).map("/".join)
)
def test_arbitrary_text_is_a_placement_or_refused(text: str) -> None:
    try:
        validate_placement(text)
    except InvalidNameError:
        return
    parts = text.split("/")
    assert all(part not in ("", ".", "..", RESERVED_COMPONENT) for part in parts)
    assert "\0" not in text
    assert all(len(part.encode("utf-8")) <= 255 for part in parts)


@pytest.mark.parametrize(
    ("placement", "prefix", "expected"),
    [
        ("a/b/c", "a", True),
        ("a/b/c", "a/b", True),
        ("a/b/c", "a/b/c", True),
        ("a", "a", True),
        ("ab/c", "a", False),
        ("a/bc", "a/b", False),
        ("a", "a/b", False),
        ("b/a", "a", False),
    ],
)
def test_placement_prefix_matches_component_wise(placement: str, prefix: str, expected: bool) -> None:
    assert placement_prefix_matches(placement, prefix) is expected


@FAST
@given(placements, placements)
def test_placement_prefix_of_a_join(prefix: str, rest: str) -> None:
    assert placement_prefix_matches(f"{prefix}/{rest}", prefix)
    assert placement_prefix_matches(prefix, prefix)
    assert not placement_prefix_matches(prefix, f"{prefix}/{rest}")
