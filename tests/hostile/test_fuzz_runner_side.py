"""Hostile documents a runner reads through the SDKs: context.json (Python and Bash) and job state.

The manager writes context.json, so a hostile one means a damaged file or a runner started by hand on
the wrong file; the job's state is the runner's own. Either way the SDK must answer with its documented
error naming the file and the member — :class:`ContextError`, :class:`StateError`, or the Bash API's
status 1 with a message on stderr — and never with a traceback of another type, a hang or a crash of
the runner's shell. Where both SDKs read a context, they must read the same value.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from httk.workflow.sdk import Attempt, ContextError, StateError
from httk.workflow.sdk._state import read_state
from hypothesis import given
from hypothesis import strategies as st

from tests.hostile.fuzzkit import assert_clear_refusal, decoded_object, document, unchanged
from tests.sdk.attempts import make_attempt
from tests.strategies import broken_encoding, hostile_bytes, mutated

BASH_API = Path(__file__).resolve().parents[2] / "sdk-bash" / "httk-workflow.sh"


def test_a_hostile_context_is_refused_clearly_by_the_python_sdk(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path)
    bases = [layout.context, document("attempt-context.after-join.json")]

    @given(hostile_bytes(bases))
    def run(data: bytes) -> None:
        layout.context_path.write_bytes(data)
        with unchanged(tmp_path):
            try:
                attempt = Attempt.load(layout.context_path, environ={})
                _ = attempt.step, attempt.attempt_ordinal, attempt.children, attempt.resources
            except ContextError as exc:
                assert_clear_refusal(str(exc), document="context.json", schema="attempt-context", data=data)

    run()


def test_hostile_job_state_is_refused_clearly_by_the_python_sdk(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path)
    path = layout.job_dir / ".httk-job" / "state.json"
    path.parent.mkdir()

    @given(hostile_bytes([{"relaxed": True, "ladder": [1, 2]}, {}]))
    def run(data: bytes) -> None:
        path.write_bytes(data)
        with unchanged(tmp_path):
            try:
                state = read_state(layout.job_dir)
            except StateError as exc:
                assert_clear_refusal(str(exc), document="state.json")
            else:
                assert isinstance(state, dict)

    run()


_BASH_READ = r"""
source "$1"
httk_workflow_context value "$2"
status=$?
printf '%s' "$value" >"$3"
exit "$status"
"""


@st.composite
def _indented_context(draw: st.DrawFn, base: dict[str, object]) -> bytes:
    """A context in the layout the manager writes (indented), mutated, and sometimes broken."""
    mutant = draw(mutated(base))
    if draw(st.booleans()):
        return draw(broken_encoding(mutant))
    return json.dumps(mutant, indent=2, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"


def test_a_hostile_context_is_refused_clearly_by_the_bash_api(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path)
    out = tmp_path / "value"
    members = st.sampled_from(["step", "job_id", "attempt_ordinal", "is_restart", "workdir", "nonexistent"])

    @given(_indented_context(layout.context), members)
    def run(data: bytes, member: str) -> None:
        layout.context_path.write_bytes(data)
        result = subprocess.run(
            ["bash", "-c", _BASH_READ, "bash", str(BASH_API), member, str(out)],
            env={**layout.environ(), "PATH": os.environ["PATH"]},
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert result.returncode in (0, 1), (result.returncode, result.stderr)
        if result.returncode == 1:
            assert_clear_refusal(result.stderr.decode(errors="replace"), document="context")
            return
        parsed = decoded_object(data)
        value = parsed.get(member) if parsed is not None else None
        if isinstance(value, str):  # both SDKs read the same text
            assert out.read_bytes() == value.encode(), (member, value, out.read_bytes())

    run()
