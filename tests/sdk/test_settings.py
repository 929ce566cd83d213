"""Setting layers: job inputs, then HTTK_<NAME>, then the workspace snapshot, then the default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from httk.workflow.sdk import Attempt, ContextError, SettingNameError, SettingNotFoundError

from tests.sdk.attempts import make_attempt

NAME = "vasp.command"
VARIABLE = "HTTK_VASP_COMMAND"


def attempt(
    tmp_path: Path,
    *,
    inputs: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    settings: dict[str, Any] | None = None,
) -> Attempt:
    layout = make_attempt(tmp_path, inputs=inputs, settings=settings)
    return Attempt.load(layout.context_path, environ=environ or {})


def test_each_layer_shadows_the_next(tmp_path: Path) -> None:
    layers: list[tuple[str, dict[str, Any]]] = [
        ("from inputs", {"inputs": {NAME: "from inputs"}}),
        ("from the environment", {"environ": {VARIABLE: "from the environment"}}),
        ("from the workspace", {"settings": {NAME: "from the workspace"}}),
    ]
    for index, (expected, _) in enumerate(layers):
        present: dict[str, Any] = {}
        for _, layer in layers[index:]:
            present.update(layer)
        a = attempt(tmp_path / str(index), **present)
        assert a.setting(NAME) == expected
        assert a.setting(NAME, "the default") == expected
    assert attempt(tmp_path / "none").setting(NAME, "the default") == "the default"


def test_the_input_layer_wins_even_with_a_falsy_value(tmp_path: Path) -> None:
    a = attempt(tmp_path, inputs={NAME: None}, environ={VARIABLE: "env"}, settings={NAME: "ws"})
    assert a.setting(NAME) is None


def test_non_scalar_settings_come_from_the_snapshot(tmp_path: Path) -> None:
    value = {"Si": "PAW_PBE Si 05Jan2001", "order": [1, 2]}
    a = attempt(tmp_path, settings={"vasp.potcars": value})
    assert a.setting("vasp.potcars") == value


def test_the_managers_export_of_the_snapshot_comes_back_typed(tmp_path: Path) -> None:
    settings = {"manager.workers": 4, "run.ratio": 0.5, "run.dry": False, "vasp.command": "srun vasp"}
    environ = {
        "HTTK_MANAGER_WORKERS": "4",
        "HTTK_RUN_RATIO": "0.5",
        "HTTK_RUN_DRY": "false",
        VARIABLE: "srun vasp",
    }
    a = attempt(tmp_path, settings=settings, environ=environ)
    assert {name: a.setting(name) for name in settings} == settings
    assert type(a.setting("manager.workers")) is int


def test_a_deployment_override_is_the_string_it_is(tmp_path: Path) -> None:
    a = attempt(
        tmp_path,
        settings={"manager.workers": 4, NAME: "srun vasp"},
        environ={"HTTK_MANAGER_WORKERS": "8", VARIABLE: "mpirun vasp"},
    )
    assert a.setting("manager.workers") == "8"
    assert a.setting(NAME) == "mpirun vasp"


def test_an_environment_value_without_a_snapshot_is_text(tmp_path: Path) -> None:
    assert attempt(tmp_path, environ={"HTTK_MANAGER_WORKERS": "4"}).setting("manager.workers") == "4"


def test_a_missing_setting_names_every_layer(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    with pytest.raises(SettingNotFoundError) as caught:
        a.setting(NAME)
    error = caught.value
    assert error.name == NAME
    assert error.layers == (
        f"job inputs member {NAME!r}",
        f"environment variable {VARIABLE}",
        f"workspace settings snapshot in {a.control_dir / 'context.json'}",
    )
    assert f"settings set WORKSPACE {NAME} VALUE" in str(error)
    assert isinstance(error, LookupError)


def test_an_explicit_none_default_is_a_default(tmp_path: Path) -> None:
    assert attempt(tmp_path).setting(NAME, None) is None


@pytest.mark.parametrize("name", ["VASP.command", "vasp command", "", "vasp..command", ".vasp", 7])
def test_an_invalid_name_is_refused(tmp_path: Path, name: Any) -> None:
    a = attempt(tmp_path, inputs={"VASP.command": "x"})
    with pytest.raises(SettingNameError, match="invalid setting name") as caught:
        a.setting(name, "default")
    assert caught.value.name == name


def test_inputs_are_read_once_from_job_json(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path, inputs={"kpoints": 4})
    a = Attempt.load(layout.context_path, environ={})
    assert a.inputs == {"kpoints": 4}
    (layout.job_dir / "job.json").write_text("{}")
    assert a.inputs == {"kpoints": 4}
    assert Attempt.load(layout.context_path, environ={}).inputs == {}


@pytest.mark.parametrize("text", ["[]", '{"inputs": 3}'])
def test_malformed_inputs_are_a_context_error(tmp_path: Path, text: str) -> None:
    layout = make_attempt(tmp_path)
    (layout.job_dir / "job.json").write_text(text)
    with pytest.raises(ContextError, match="member 'inputs' must be a JSON object"):
        _ = Attempt.load(layout.context_path, environ={}).inputs


def test_a_missing_job_json_is_a_context_error(tmp_path: Path) -> None:
    layout = make_attempt(tmp_path)
    (layout.job_dir / "job.json").unlink()
    with pytest.raises(ContextError, match=r"job\.json: cannot be read"):
        Attempt.load(layout.context_path, environ={}).setting(NAME, "x")
