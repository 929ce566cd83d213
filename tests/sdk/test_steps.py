"""The @step decorator, registries, and dispatch with its unknown_step / no_outcome / exception rules."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
from httk.workflow.sdk import Attempt, Registry, StepDefinitionError, dispatch, step

from tests.sdk.attempts import HEAD, Layout, make_attempt


def module_from(name: str, source: str) -> types.ModuleType:
    """Execute ``source`` as a fresh module named ``name`` (each test uses its own name)."""
    module = types.ModuleType(name)
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), module.__dict__)
    return module


RUNNER = """
from httk.workflow.sdk import Attempt, dispatch, step

@step
def prepare(a: Attempt) -> None:
    a.advance("relax")

@step(name="relax")
def run_vasp(a: Attempt) -> None:
    a.succeed(message="relaxed")

def main(path):
    return dispatch(context_path=path)
"""


# -- the decorator -----------------------------------------------------------------------------------
def test_bare_and_named_decorators_register_in_the_functions_module(request: Any) -> None:
    name = f"runner_{request.node.name}"
    module = module_from(name, RUNNER)
    registry = Registry.for_module(name)

    assert registry.steps == ("prepare", "relax")
    assert registry["prepare"] is module.prepare
    assert registry["relax"] is module.run_vasp
    assert module.run_vasp.__name__ == "run_vasp"
    assert repr(registry) == f"Registry({name!r}, steps=['prepare', 'relax'])"


def test_the_undecorated_function_is_the_decorated_one_and_callable(tmp_path: Path, request: Any) -> None:
    module = module_from(f"runner_{request.node.name}", RUNNER)
    layout = make_attempt(tmp_path, step="relax")
    a = Attempt.load(layout.context_path, environ={})

    module.run_vasp(a)  # called directly, as a unit test of a step would

    assert layout.outcome()["message"] == "relaxed"
    assert "runner_steps" not in layout.outcome()


def test_two_runner_modules_in_one_process_do_not_collide(request: Any) -> None:
    first = module_from(f"first_{request.node.name}", RUNNER)
    second = module_from(
        f"second_{request.node.name}",
        """
        from httk.workflow.sdk import step

        @step
        def prepare(a):
            a.succeed()
        """,
    )
    assert Registry.for_module(first.__name__).steps == ("prepare", "relax")
    assert Registry.for_module(second.__name__).steps == ("prepare",)
    assert Registry.for_module(second.__name__)["prepare"] is second.prepare


def test_explicit_registries_are_independent_mappings() -> None:
    one, two = Registry("one"), Registry()

    @one.step
    def prepare(a: Attempt) -> None:
        a.succeed()

    @one.step(name="collect")
    def gather(a: Attempt, *, dry_run: bool = False) -> None:
        a.succeed()

    two.register(prepare, "start")

    assert (one.steps, two.steps) == (("prepare", "collect"), ("start",))
    assert (list(one), len(one)) == (["prepare", "collect"], 2)
    assert ("collect" in one, "gather" in one) == (True, False)
    assert one["collect"] is gather and two["start"] is prepare
    assert dict(one.items()) == {"prepare": prepare, "collect": gather}
    assert repr(two) == "Registry(None, steps=['start'])"
    with pytest.raises(KeyError):
        one["start"]


def test_the_decorated_signature_is_kept_for_the_type_checker(tmp_path: Path) -> None:
    """mypy checks this test: the keyword calls only type-check if the real signature survives."""
    registry = Registry()
    calls: list[str] = []

    @registry.step
    def relax(a: Attempt, *, dry_run: bool = False) -> None:
        calls.append(f"relax dry_run={dry_run}")

    @step(name="typed_named_step_for_mypy")
    def named(a: Attempt, *, retries: int = 0) -> None:
        calls.append(f"named retries={retries}")

    def not_a_step(count: int) -> None:
        pass

    registry.register(not_a_step)  # type: ignore[type-var]  # mypy refuses a function that is no step
    a = Attempt.load(make_attempt(tmp_path).context_path, environ={})
    relax(a, dry_run=True)
    named(a, retries=2)
    assert calls == ["relax dry_run=True", "named retries=2"]


@pytest.mark.parametrize("name", ["two words", "", ".hidden", "-x", "x" * 129, 7])
def test_an_invalid_step_name_is_refused(name: Any) -> None:
    registry = Registry()
    with pytest.raises(StepDefinitionError, match="is not a valid step name") as caught:
        registry.register(lambda a: None, name)
    assert caught.value.step == name
    assert registry.steps == ()


def test_names_the_protocol_allows_beyond_identifiers_are_accepted() -> None:
    registry = Registry()
    for name in ("relax.scf", "relax-2", "2nd", "_private", "x" * 128):
        registry.register(lambda a: None, name)
    assert len(registry) == 5


def test_a_name_taken_by_another_function_is_refused() -> None:
    registry = Registry()

    @registry.step
    def prepare(a: Attempt) -> None:
        pass

    def other(a: Attempt) -> None:
        pass

    with pytest.raises(StepDefinitionError, match=r"'prepare' is already registered by .*\.prepare"):
        registry.register(other, "prepare")
    assert registry["prepare"] is prepare


def test_a_reexecuted_module_replaces_its_own_steps(request: Any) -> None:
    name = f"reloaded_{request.node.name}"
    module_from(name, RUNNER)
    again = module_from(name, RUNNER)
    registry = Registry.for_module(name)
    assert registry.steps == ("prepare", "relax")
    assert registry["prepare"] is again.prepare


def test_a_non_callable_is_refused() -> None:
    with pytest.raises(StepDefinitionError, match="must be a function"):
        Registry().register("prepare", "prepare")  # type: ignore[type-var]


# -- dispatch ----------------------------------------------------------------------------------------
def test_dispatch_runs_the_current_step_from_the_calling_modules_registry(
    tmp_path: Path, request: Any
) -> None:
    module = module_from(f"runner_{request.node.name}", RUNNER)
    layout = make_attempt(tmp_path, step="prepare")

    assert module.main(layout.context_path) == 0

    expected = HEAD + '"action":"advance","next_step":"relax","runner_steps":["prepare","relax"]}\n'
    assert layout.outcome_bytes() == expected.encode()


def test_dispatch_reads_the_context_from_the_environment(
    tmp_path: Path, request: Any, monkeypatch: Any
) -> None:
    module_from(f"runner_{request.node.name}", RUNNER)
    layout = make_attempt(tmp_path, step="relax")
    for variable, value in layout.environ().items():
        monkeypatch.setenv(variable, value)

    assert dispatch(Registry.for_module(f"runner_{request.node.name}")) == 0
    assert layout.outcome()["action"] == "succeed"


def test_an_unknown_step_publishes_unknown_step(tmp_path: Path, capsys: Any) -> None:
    registry = Registry()
    registry.register(lambda a: a.succeed(), "prepare")
    registry.register(lambda a: a.succeed(), "collect")
    layout = make_attempt(tmp_path, step="relax")

    assert registry.dispatch(context_path=layout.context_path) == 0

    message = "this runner does not implement step 'relax'; its steps are: 'prepare', 'collect'"
    assert (
        layout.outcome_bytes()
        == (
            HEAD + '"action":"fail","failure":{"code":"unknown_step","message":"' + message + '",'
            '"details":{"step":"relax","runner_steps":["prepare","collect"]}},'
            '"runner_steps":["prepare","collect"]}\n'
        ).encode()
    )
    assert capsys.readouterr().err == f"httk.workflow.sdk: {message} (publishing fail/unknown_step)\n"


def test_an_empty_registry_says_it_has_no_steps(tmp_path: Path, capsys: Any) -> None:
    layout = make_attempt(tmp_path, step="relax")
    Registry("__main__").dispatch(context_path=layout.context_path)
    assert "the registry '__main__' is empty" in capsys.readouterr().err
    assert layout.outcome()["failure"]["message"].endswith("its steps are: none")
    assert layout.outcome()["runner_steps"] == []


def test_a_step_returning_without_an_outcome_gets_no_outcome(tmp_path: Path, capsys: Any) -> None:
    registry = Registry()

    @registry.step
    def prepare(a: Attempt) -> None:
        a.save_state({"did": "something"})

    layout = make_attempt(tmp_path, step="prepare")
    assert registry.dispatch(context_path=layout.context_path) == 0

    function = f"{__name__}.test_a_step_returning_without_an_outcome_gets_no_outcome.<locals>.prepare"
    message = "step 'prepare' returned without publishing an outcome"
    assert (
        layout.outcome_bytes()
        == (
            HEAD + '"action":"fail","failure":{"code":"no_outcome","message":"' + message + '",'
            f'"details":{{"step":"prepare","function":"{function}"}}}},"runner_steps":["prepare"]}}\n'
        ).encode()
    )
    assert capsys.readouterr().err == f"httk.workflow.sdk: {message} (publishing fail/no_outcome)\n"


def test_an_exception_propagates_and_publishes_nothing(tmp_path: Path) -> None:
    registry = Registry()

    @registry.step
    def prepare(a: Attempt) -> None:
        raise RuntimeError("VASP crashed")

    layout = make_attempt(tmp_path, step="prepare")
    with pytest.raises(RuntimeError, match="VASP crashed"):
        registry.dispatch(context_path=layout.context_path)
    assert sorted(p.name for p in layout.control_dir.iterdir()) == ["context.json"]


def test_an_outcome_published_before_an_exception_stays(tmp_path: Path) -> None:
    registry = Registry()

    @registry.step
    def prepare(a: Attempt) -> None:
        a.succeed(message="done")
        raise RuntimeError("cleanup failed")

    layout = make_attempt(tmp_path, step="prepare")
    with pytest.raises(RuntimeError):
        registry.dispatch(context_path=layout.context_path)
    assert layout.outcome()["message"] == "done"


def test_an_outcome_published_by_another_process_is_not_overridden(tmp_path: Path) -> None:
    registry = Registry()

    @registry.step
    def prepare(a: Attempt) -> None:  # as if it ran a Bash helper that published
        ready = a.control_dir / "outcome.ready"
        ready.mkdir()
        (ready / "outcome.json").write_text("from bash\n")

    layout = make_attempt(tmp_path, step="prepare")
    assert registry.dispatch(context_path=layout.context_path) == 0
    assert layout.outcome_path.read_text() == "from bash\n"


# -- as a real process -------------------------------------------------------------------------------
SCRIPT = """\
import sys
from httk.workflow.sdk import Attempt, dispatch, step

@step
def prepare(a: Attempt) -> None:
    a.save_state({"command": a.setting("vasp.command", "vasp_std")})
    a.declare("outputs", {"files": ["OUTCAR"]})
    loaded = sorted(m for m in sys.modules if m.startswith("httk.workflow.protocol"))
    a.succeed(message=str(loaded), priority=5)

@step
def crash(a: Attempt) -> None:
    raise RuntimeError("boom")

if __name__ == "__main__":
    raise SystemExit(dispatch())
"""


def run_script(tmp_path: Path, layout: Layout) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "runner.py"
    script.write_text(SCRIPT)
    env = {**os.environ, **layout.environ()}
    argv = [sys.executable, str(script)]
    return subprocess.run(argv, env=env, cwd=layout.workdir, capture_output=True, text=True, check=False)


def test_a_runner_script_dispatches_and_the_common_path_never_loads_the_protocol(tmp_path: Path) -> None:
    """State, a setting, a declaration and succeed with a priority: all on the fast paths."""
    layout = make_attempt(tmp_path / "a", step="prepare")
    done = run_script(tmp_path, layout)
    assert (done.returncode, done.stderr) == (0, "")
    assert layout.outcome()["message"] == "[]"
    assert layout.outcome()["runner_steps"] == ["prepare", "crash"]


def test_a_runner_script_that_raises_exits_nonzero_without_an_outcome(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path / "a", step="crash")
    done = run_script(tmp_path, layout)
    assert done.returncode == 1
    assert "RuntimeError: boom" in done.stderr
    assert not (layout.control_dir / "outcome.ready").exists()
