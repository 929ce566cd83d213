"""Steps: the ``@step`` decorator, the :class:`Registry` of a runner's steps, and :func:`dispatch`.

A registry maps step names to step functions in the order they were declared; that order is the
``runner_steps`` every outcome declares. The module-level :func:`step` and :func:`dispatch` use the
registry of one module -- the decorated function's module, the module calling ``dispatch`` -- so two
runner modules imported into one process never share steps. Tests and libraries build a ``Registry()``
of their own and use its :meth:`Registry.step` and :meth:`Registry.dispatch`.

Decorating returns the function itself, unchanged: it stays directly callable with an ``Attempt``, and a
type checker sees its real signature. Only a function that takes an ``Attempt`` and returns ``None`` is a
step to a type checker.

Dispatch runs the step the context names and makes sure the attempt ends with an outcome:

* a step the registry does not have -> the SDK publishes ``fail`` with code ``unknown_step``, naming the
  step and listing the known ones, on the runner's behalf (the Bash API's ``httk_workflow_dispatch``
  words and details it identically);
* a step function that returns without an outcome -> ``fail`` with code ``no_outcome``, naming the
  step, and the function (``module.qualname``) in its details;
* an exception -> it propagates, nothing more is published: the process exits nonzero, which the manager
  records as ``process_failure`` (retried when the job's ``retry_on`` says so). An outcome the step
  published before raising stays published and is authoritative.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping

from . import _checks
from ._attempt import Attempt
from ._errors import StepDefinitionError

StepFunction = Callable[[Attempt], None]
"""What a step is: a function that takes the :class:`Attempt` and ends it with one outcome."""

# The type variable and the overloads are for type checkers only: a runner does not import typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar, overload

    F = TypeVar("F", bound=StepFunction)

_BY_MODULE: dict[str, Registry] = {}
_EMPTY_HINT = (
    "; the registry {name!r} is empty: to dispatch steps that @step registered in another module, "
    "call dispatch(Registry.for_module(that_module.__name__))"
)


class Registry(Mapping[str, StepFunction]):
    """The steps one runner implements: a read-only mapping of step name to function, in declaration order.

    Parameters
    ----------
    name
        A label for ``repr`` and messages, such as the module name.

    Examples
    --------
    >>> from httk.workflow.sdk import Attempt, Registry
    >>> steps = Registry("relaxation")
    >>> @steps.step
    ... def prepare(a: Attempt) -> None:
    ...     a.advance("relax")
    >>> @steps.step(name="relax")
    ... def run_vasp(a: Attempt) -> None:
    ...     a.succeed()
    >>> list(steps)
    ['prepare', 'relax']
    >>> steps["relax"] is run_vasp
    True
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self._functions: dict[str, StepFunction] = {}

    @classmethod
    def for_module(cls, module: str) -> Registry:
        """The registry that the module-level :func:`step` and :func:`dispatch` use for ``module``.

        Parameters
        ----------
        module
            A module's ``__name__`` (``"__main__"`` for a runner run as a script).

        Returns
        -------
        Registry
            That module's registry, created empty on first use.

        Examples
        --------
        >>> from httk.workflow.sdk import Registry
        >>> Registry.for_module(__name__) is Registry.for_module(__name__)
        True
        """
        registry = _BY_MODULE.get(module)
        if registry is None:
            registry = _BY_MODULE[module] = cls(module)
        return registry

    def __getitem__(self, name: str) -> StepFunction:
        return self._functions[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def __repr__(self) -> str:
        return f"Registry({self.name!r}, steps={list(self._functions)!r})"

    @property
    def steps(self) -> tuple[str, ...]:
        """The step names in declaration order: the ``runner_steps`` every outcome declares.

        Examples
        --------
        >>> steps.steps
        ('prepare', 'relax')
        """
        return tuple(self._functions)

    def register(self, function: F, name: str | None = None) -> F:
        """Add ``function`` as step ``name`` (default: its ``__name__``) and return it unchanged.

        A function with the same module and qualified name as the registered one replaces it (a module
        executed again, as by ``importlib.reload``); any other function under a taken name is an error.

        Parameters
        ----------
        function
            The step function.
        name
            The step name; default the function's name.

        Returns
        -------
        F
            ``function`` itself.

        Raises
        ------
        StepDefinitionError
            When the name is not a valid step name or another function has it.

        Examples
        --------
        >>> def collect(a: Attempt) -> None:
        ...     a.succeed()
        >>> steps.register(collect) is collect
        True
        """
        if not callable(function):
            raise StepDefinitionError(f"must be a function, not {type(function).__name__}", step=name)
        step_name = function.__name__ if name is None else name
        problem = _checks.step_problem(step_name)
        if problem is not None:
            raise StepDefinitionError(f"is not a valid step name: {problem}", step=step_name)
        existing = self._functions.get(step_name)
        if existing is not None and _origin(existing) != _origin(function):
            raise StepDefinitionError(
                f"is already registered by {_origin(existing)}; cannot register {_origin(function)}",
                step=step_name,
            )
        self._functions[step_name] = function
        return function

    if TYPE_CHECKING:

        @overload
        def step(self, function: F, /) -> F: ...

        @overload
        def step(self, /, *, name: str | None = None) -> Callable[[F], F]: ...

    def step(self, function: F | None = None, /, *, name: str | None = None) -> F | Callable[[F], F]:
        """Register a step function, bare (``@steps.step``) or named (``@steps.step(name="relax")``).

        Parameters
        ----------
        function
            The step function, when used bare.
        name
            The step name; default the function's name.

        Returns
        -------
        F or Callable[[F], F]
            The function itself, or a decorator that registers it and returns it.

        Examples
        --------
        >>> @steps.step(name="relax.again")
        ... def relax_again(a: Attempt) -> None:
        ...     a.succeed()
        >>> relax_again.__name__
        'relax_again'
        """
        if function is not None:
            return self.register(function, name)

        def decorate(function: F) -> F:
            return self.register(function, name)

        return decorate

    def run(self, attempt: Attempt) -> None:
        """Run the attempt's step and make sure the attempt ends with an outcome.

        An unknown step publishes ``fail``/``unknown_step``; a step function that returns without an
        outcome gets ``fail``/``no_outcome``; an exception propagates and nothing more is published.

        Parameters
        ----------
        attempt
            The attempt, typically ``Attempt.load(path, runner_steps=registry.steps)``.

        Examples
        --------
        >>> steps.run(Attempt.load(path, runner_steps=steps.steps))
        """
        function = self._functions.get(attempt.step)
        if function is None:
            known = ", ".join(f"'{step}'" for step in self._functions) or "none"
            message = f"this runner does not implement step '{attempt.step}'; its steps are: {known}"
            hint = "" if self._functions else _EMPTY_HINT.format(name=self.name)
            _note(f"{message} (publishing fail/unknown_step){hint}")
            attempt.fail(
                "unknown_step", message, {"step": attempt.step, "runner_steps": list(self._functions)}
            )
            return
        function(attempt)
        if not attempt.published:
            message = f"step '{attempt.step}' returned without publishing an outcome"
            _note(f"{message} (publishing fail/no_outcome)")
            attempt.fail("no_outcome", message, {"step": attempt.step, "function": _origin(function)})

    def dispatch(self, *, context_path: str | os.PathLike[str] | None = None) -> int:
        """Load the attempt the manager started this process for and :meth:`run` its step.

        Parameters
        ----------
        context_path
            The attempt's context.json; default ``HTTK_WORKFLOW_CONTEXT``.

        Returns
        -------
        int
            0, once the attempt has its outcome (use it as the process exit status).

        Examples
        --------
        >>> if __name__ == "__main__":
        ...     raise SystemExit(steps.dispatch())
        """
        self.run(Attempt.load(context_path, runner_steps=self.steps))
        return 0


if TYPE_CHECKING:

    @overload
    def step(function: F, /) -> F: ...

    @overload
    def step(*, name: str | None = None) -> Callable[[F], F]: ...


def step(function: F | None = None, /, *, name: str | None = None) -> F | Callable[[F], F]:
    """Register a step function in its module's registry, bare (``@step``) or named (``@step(name=...)``).

    The function is returned unchanged: call it directly with an ``Attempt`` in a test.

    Parameters
    ----------
    function
        The step function, when used bare.
    name
        The step name; default the function's name.

    Returns
    -------
    F or Callable[[F], F]
        The function itself, or a decorator that registers it and returns it.

    Raises
    ------
    StepDefinitionError
        When the name is invalid or already taken in the module.

    Examples
    --------
    >>> from httk.workflow.sdk import Attempt, dispatch, step
    >>> @step
    ... def prepare(a: Attempt) -> None:
    ...     a.advance("relax")
    >>> @step(name="relax")
    ... def run_vasp(a: Attempt) -> None:
    ...     a.succeed()
    >>> if __name__ == "__main__":
    ...     raise SystemExit(dispatch())
    """
    if function is not None:
        return Registry.for_module(function.__module__).register(function, name)

    def decorate(function: F) -> F:
        return Registry.for_module(function.__module__).register(function, name)

    return decorate


def dispatch(registry: Registry | None = None, *, context_path: str | os.PathLike[str] | None = None) -> int:
    """Run the step the manager started this process for, from ``registry`` or the calling module's steps.

    Parameters
    ----------
    registry
        The steps; default the registry of the module that calls ``dispatch``, which holds the steps
        ``@step`` registered in that module. Steps defined in another module (a library of steps, a
        thin executable) are dispatched with ``dispatch(Registry.for_module(steps_module.__name__))``.
    context_path
        The attempt's context.json; default ``HTTK_WORKFLOW_CONTEXT``.

    Returns
    -------
    int
        0, once the attempt has its outcome (use it as the process exit status).

    Raises
    ------
    ContextError
        When the process has no usable attempt context.

    Examples
    --------
    >>> if __name__ == "__main__":
    ...     raise SystemExit(dispatch())
    """
    if registry is None:
        registry = Registry.for_module(str(sys._getframe(1).f_globals.get("__name__", "__main__")))
    return registry.dispatch(context_path=context_path)


def _origin(function: Callable[..., object]) -> str:
    module = getattr(function, "__module__", None) or "?"
    return f"{module}.{getattr(function, '__qualname__', repr(function))}"


def _note(line: str) -> None:
    """One line on stderr, which the manager keeps as the attempt's stderr.log."""
    print(f"httk.workflow.sdk: {line}", file=sys.stderr, flush=True)
