"""The SDK's one exception hierarchy: the tree its module docstring draws, and what each error carries."""

from __future__ import annotations

from httk.workflow import sdk
from httk.workflow.sdk import _errors

TREE = {
    "SdkError": Exception,
    "ContextError": sdk.SdkError,
    "StepDefinitionError": sdk.SdkError,
    "OutcomeError": sdk.SdkError,
    "OutcomeAlreadyPublishedError": sdk.OutcomeError,
    "SettingNameError": sdk.SdkError,
    "SettingNotFoundError": sdk.SdkError,
    "StateError": sdk.SdkError,
    "TransactionError": sdk.OutcomeError,
}


def test_the_hierarchy_is_the_drawn_tree() -> None:
    for name, parent in TREE.items():
        klass = getattr(sdk, name)
        assert klass.__mro__[1] is parent, name
        assert name in (_errors.__doc__ or ""), f"{name} is not drawn in the module docstring"
    exported = {name for name in sdk.__all__ if name.endswith("Error")}
    assert exported == set(TREE)


def test_argument_errors_are_value_errors_and_a_missing_setting_a_lookup_error() -> None:
    for klass in (sdk.StepDefinitionError, sdk.OutcomeError, sdk.SettingNameError):
        assert issubclass(klass, ValueError)
    assert issubclass(sdk.SettingNotFoundError, LookupError)
    assert not issubclass(sdk.ContextError, ValueError)


def test_every_error_names_what_it_is_about() -> None:
    context = sdk.ContextError("must be true or false", path="/c.json", member="durable")
    assert (str(context), context.path, context.member) == (
        "/c.json: member 'durable' must be true or false",
        "/c.json",
        "durable",
    )
    assert str(sdk.ContextError("plain")) == "plain"
    outcome = sdk.OutcomeError("must not be empty", argument="reason")
    assert str(outcome) == "argument reason must not be empty"
    assert (outcome.argument, outcome.path) == ("reason", None)
    again = sdk.OutcomeAlreadyPublishedError("/a/outcome.ready")
    assert str(again) == "/a/outcome.ready: the attempt has already published its one outcome"
    assert (again.path, again.argument) == ("/a/outcome.ready", None)
    assert str(sdk.StepDefinitionError("is taken", step="relax")) == "step 'relax' is taken"
    assert str(sdk.StateError("is not a JSON object", path="/s.json")) == "/s.json: is not a JSON object"
    missing = sdk.SettingNotFoundError("a.b", ["x", "y"])
    assert str(missing).startswith("setting 'a.b' is not set: consulted x; y; pass default=")
