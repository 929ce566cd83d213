"""The ``Attempt`` a step function receives: its context, inputs, settings, job state and one outcome.

Exactly one outcome per attempt. Each outcome method checks every argument before it writes anything
(an :class:`OutcomeError` names the argument at fault), then publishes through :mod:`._outcome`. Whether
an outcome exists is read from the control directory too, so an outcome that another process published
for this attempt -- a Bash helper the step ran, say -- counts, and a second one is refused rather than
silently lost.

Job state is read on first use and cached; :meth:`Attempt.save_state` replaces it on disk and in the cache.
Save state *before* publishing the outcome: once it is published the manager may commit it and start the
next step, which reads the state.

Children (:meth:`Attempt.spawn`) are written into the outcome draft as they are spawned and published
with the outcome: ``advance`` and ``succeed`` detach them, :meth:`Attempt.wait` joins them. ``fail``,
``retry`` and ``pause`` discard them (the protocol publishes children only with a finished step), and so
does a step that publishes nothing: an unpublished draft is never read. A transactional job's step
contributes to ``data/`` the same way (:meth:`Attempt.transaction`): the bundle is staged into the draft
when ``advance``, ``succeed`` or ``wait`` publishes, and discarded otherwise.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence

from . import _checks, _outcome, _settings
from ._context import context_path_from, read_context
from ._errors import ContextError, OutcomeAlreadyPublishedError, OutcomeError, StepDefinitionError
from ._files import compact_json
from ._job_records import JobRecords
from ._spawning import Spawning
from ._transaction import Transaction, TransactionError, stage_transaction

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._children import ChildRef
    from ._files import StrPath

_JOB_FILE = "job.json"
_SPAWNING_ACTIONS = frozenset({"advance", "succeed", "wait"})


class Attempt(Spawning, JobRecords):
    """One attempt of one step of one job, as the step function sees it.

    A runner normally gets it from :func:`~httk.workflow.sdk.dispatch`; :meth:`load` builds one from an
    attempt's context.json, which is how a step is run by hand or tested. In the examples, ``a`` is the
    attempt a step receives.

    Parameters
    ----------
    context
        The decoded context.json.
    context_path
        Where it was read from, if from a file (named in error messages; locates the control directory
        of an older context that does not record it).
    environ
        The process environment (default ``os.environ``): durability, settings, fallbacks.
    runner_steps
        The steps the runner implements, in declaration order; every outcome declares them. ``None``
        leaves ``runner_steps`` out of the outcome.

    Examples
    --------
    >>> from httk.workflow.sdk import Attempt
    >>> a = Attempt.load("/ws/p/job/.httk-attempt.a6c2.../context.json", runner_steps=["relax"])
    >>> a.step, a.is_restart
    ('relax', False)
    >>> a.succeed(message="converged")
    """

    def __init__(
        self,
        context: Mapping[str, Any],
        *,
        context_path: StrPath | None = None,
        environ: Mapping[str, str] | None = None,
        runner_steps: Sequence[str] | None = None,
    ) -> None:
        super().__init__(context, context_path=context_path, environ=environ)
        self._runner_steps = None if runner_steps is None else tuple(runner_steps)
        for name in self._runner_steps or ():
            problem = _checks.step_problem(name)
            if problem is not None:
                raise StepDefinitionError(f"cannot be declared in runner_steps: {problem}", step=name)
        self._job: object = None
        self._state: dict[str, Any] | None = None
        self._published = False
        self._spawned: list[ChildRef] = []
        self._draft: _outcome.Draft | None = None
        self._transaction: Transaction | None = None

    @classmethod
    def load(
        cls,
        context_path: str | os.PathLike[str] | None = None,
        *,
        runner_steps: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Attempt:
        """Read an attempt's context.json and build its ``Attempt``.

        Parameters
        ----------
        context_path
            The context.json; default ``HTTK_WORKFLOW_CONTEXT`` from ``environ``.
        runner_steps
            The steps the runner implements (see the class).
        environ
            The process environment (default ``os.environ``).

        Returns
        -------
        Attempt
            The attempt, with nothing published yet.

        Raises
        ------
        ContextError
            When no context is named, or it cannot be read or is not an attempt context.

        Examples
        --------
        >>> a = Attempt.load()  # inside a runner the manager started
        >>> a.attempt_ordinal
        1
        """
        environ = os.environ if environ is None else environ
        path = context_path_from(environ) if context_path is None else os.fspath(context_path)
        return cls(read_context(path), context_path=path, environ=environ, runner_steps=runner_steps)

    def __repr__(self) -> str:
        return (
            f"<Attempt step={self.step!r} job_key={self.job_key!r} attempt_ordinal={self.attempt_ordinal} "
            f"attempt_reason={self.attempt_reason!r} published={self.published}>"
        )

    # -- inputs and settings -----------------------------------------------------------------------
    @property
    def inputs(self) -> dict[str, Any]:
        """The job's ``inputs`` object from ``<job_dir>/job.json`` (``{}`` when it has none), read once.

        Raises
        ------
        ContextError
            When job.json cannot be read or its ``inputs`` is not an object.

        Examples
        --------
        >>> a.inputs.get("structure", "Si.cif")
        'Si.cif'
        """
        job = self._read_job()
        inputs = job.get("inputs", {}) if isinstance(job, dict) else None
        if not isinstance(inputs, dict):
            raise ContextError("must be a JSON object", path=self._job_file, member="inputs")
        return inputs

    def _read_job(self) -> object:
        """The job's own decoded ``job.json``, read once (it is immutable after submission)."""
        if self._job is None:
            path = self._job_file
            try:
                with open(path, "rb") as stream:
                    self._job = json.loads(stream.read())
            except OSError as exc:
                raise ContextError(f"cannot be read: {exc.strerror or exc}", path=path) from exc
            except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to decode
                raise ContextError(f"is not UTF-8 JSON: {exc}", path=path) from exc
        return self._job

    def _job_document(self) -> dict[str, Any]:
        job = self._read_job()
        if not isinstance(job, dict):
            raise ContextError("is not a JSON object", path=self._job_file)
        return job

    @property
    def _job_file(self) -> str:
        return os.path.join(self._job_dir, _JOB_FILE)

    @property
    def _ready_path(self) -> str:
        return os.path.join(self._control_dir, _outcome.READY_NAME)

    def setting(self, name: str, default: Any = _settings.MISSING) -> Any:
        """An application setting, resolved in layers; the first layer that holds it wins.

        The layers are: the job's ``inputs`` member named exactly ``name``; the environment variable
        ``HTTK_<NAME>`` (dots become underscores, upper case), where the manager exports each scalar
        workspace setting unless a deployment override is already set; the workspace settings snapshot
        in context.json (the only layer holding arrays and objects); then ``default``. An environment
        value that is just the manager's export of the snapshot value comes back typed (``4``, not
        ``"4"``); a deployment override comes back as the string it is.

        Parameters
        ----------
        name
            A dotted lowercase setting name such as ``vasp.command``.
        default
            What to return when no layer holds the setting; without it that is an error.

        Returns
        -------
        Any
            The JSON value found.

        Raises
        ------
        SettingNameError
            When ``name`` is not a setting name.
        SettingNotFoundError
            When no layer holds it and no default was given; the message names the layers consulted.

        Examples
        --------
        >>> a.setting("vasp.command")
        'srun -n 32 vasp_std'
        >>> a.setting("vasp.max_restarts", 3)
        3
        """
        return _settings.resolve(
            name,
            inputs=self.inputs,
            environ=self._environ,
            snapshot=self._context.get("settings") or {},
            default=default,
            context_path=self._context_path,
        )

    # -- the one outcome ---------------------------------------------------------------------------
    @property
    def runner_steps(self) -> tuple[str, ...] | None:
        """The steps the runner implements, declared in every outcome; ``None`` when not known.

        Examples
        --------
        >>> a.runner_steps
        ('prepare', 'relax', 'collect')
        """
        return self._runner_steps

    @property
    def published(self) -> bool:
        """Whether this attempt has its outcome: published here, or found in ``outcome.ready``.

        Examples
        --------
        >>> a.published
        False
        >>> a.succeed()
        >>> a.published
        True
        """
        return self._published or os.path.lexists(self._ready_path)

    def advance(
        self,
        step: str,
        *,
        resources: Mapping[str, int] | None = None,
        priority: int | None = None,
        message: str | None = None,
    ) -> None:
        """Publish ``advance``: once committed, the job continues with a new activation of ``step``.

        Parameters
        ----------
        step
            The next step's name.
        resources
            Resource quantities the next activation needs, such as ``{"procs": 64}``.
        priority
            The job's priority from now on, 0 (highest) through 999; default unchanged.
        message
            A note for the job's history.

        Raises
        ------
        OutcomeError
            When an argument is invalid (it is named), or the outcome cannot be written.
        OutcomeAlreadyPublishedError
            When the attempt already has an outcome.

        Examples
        --------
        >>> a.advance("relax", resources={"procs": 64}, message="prepared 4 k-point sets")
        """
        self._refuse_second()
        members = _outcome.advance_members(step)
        if resources is not None:
            problem = _checks.resources_problem(resources)
            if problem is not None:
                raise OutcomeError(problem, argument="resources")
        self._publish("advance", members, priority=priority, resources=resources, message=message)

    def succeed(self, *, message: str | None = None, priority: int | None = None) -> None:
        """Publish ``succeed``: once committed, the job has succeeded.

        Parameters
        ----------
        message
            A note for the job's history.
        priority
            The priority of the job's terminal marker, 0 through 999; default unchanged.

        Raises
        ------
        OutcomeError
            When an argument is invalid, or the outcome cannot be written.
        OutcomeAlreadyPublishedError
            When the attempt already has an outcome.

        Examples
        --------
        >>> a.succeed(message="total energy -10.84 eV")
        """
        self._refuse_second()
        self._publish("succeed", {}, priority=priority, message=message)

    def fail(
        self,
        code: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        retryable: bool | None = None,
    ) -> None:
        """Publish ``fail``: the job fails, unless the job's ``retry_on`` lists ``code``.

        Parameters
        ----------
        code
            A stable machine identity: one token, no whitespace, at most 128 bytes. Namespace your own
            (``vasp.nonconvergent``); ``no_outcome`` and ``unknown_step`` are the SDK's.
        message
            One human sentence.
        details
            Structured evidence (a mapping JSON can hold), such as counters or a log path.
        retryable
            Advisory evidence for an operator; it never overrides ``retry_on``.

        Raises
        ------
        OutcomeError
            When an argument is invalid (it is named), or the outcome cannot be written.
        OutcomeAlreadyPublishedError
            When the attempt already has an outcome.

        Examples
        --------
        >>> a.fail("vasp.nonconvergent", "electronic minimization did not converge",
        ...        {"iterations": 61, "log": "vasp/convergence.log"}, retryable=False)
        """
        self._refuse_second()
        self._publish("fail", _outcome.failure_members(code, message, details, retryable))

    def retry(self, reason: str, *, priority: int | None = None, message: str | None = None) -> None:
        """Publish ``retry``: run this activation again, in a new attempt, within the job's budgets.

        Parameters
        ----------
        reason
            Why, for the job's history; the next attempt sees ``attempt_reason`` ``requested_retry``.
        priority
            The job's priority from now on, 0 through 999; default unchanged.
        message
            A note for the job's history.

        Raises
        ------
        OutcomeError
            When an argument is invalid (it is named), or the outcome cannot be written.
        OutcomeAlreadyPublishedError
            When the attempt already has an outcome.

        Examples
        --------
        >>> a.retry("ZBRENT error; restarting from CONTCAR")
        """
        self._refuse_second()
        members = _outcome.reason_members("retry", reason)
        self._publish("retry", members, priority=priority, message=message)

    def pause(self, reason: str, *, priority: int | None = None, message: str | None = None) -> None:
        """Publish ``pause``: the job waits for an operator to continue it.

        Parameters
        ----------
        reason
            What the operator should look at.
        priority
            The job's priority from now on, 0 through 999; default unchanged.
        message
            A note for the job's history.

        Raises
        ------
        OutcomeError
            When an argument is invalid (it is named), or the outcome cannot be written.
        OutcomeAlreadyPublishedError
            When the attempt already has an outcome.

        Examples
        --------
        >>> a.pause("the relaxed cell grew by 30 %; check the structure before continuing")
        """
        self._refuse_second()
        members = _outcome.reason_members("pause", reason)
        self._publish("pause", members, priority=priority, message=message)

    def transaction(self) -> Transaction:
        """This attempt's transaction into the job's committed ``data/`` (one per attempt, cached).

        Add operations to it (``put_file``, ``make_dir``, ``replace_tree``, ...); :meth:`advance`,
        :meth:`succeed` and :meth:`wait` publish a nonempty one with the outcome, which then carries
        ``expected_data_generation``, and the manager applies it to ``data/`` before the next attempt
        starts. ``fail``, ``retry`` and ``pause`` discard it, like spawned children: a step that did not
        finish contributes nothing. Once the outcome is published, this call and every operation of
        the transaction are refused: they would be lost without a word.

        Raises
        ------
        TransactionError
            When the job is not transactional (the context has no data generation or ``data/``).
        OutcomeAlreadyPublishedError
            When the attempt already has an outcome (naming ``transaction``, or the operation refused).

        Examples
        --------
        >>> tx = a.transaction()
        >>> _ = tx.put_file("results/energy.json", b"-10.8\\n")
        >>> a.succeed()
        """
        self._refuse_late("transaction")
        if self._transaction is None:
            if self.data_generation is None or self._context.get("data_dir") is None:
                raise TransactionError(
                    "this job is not transactional: only a job with data.mode 'transactional' in a "
                    "workspace with the transactional-data-v1 extension can contribute to data/"
                )
            self._transaction = Transaction()
            self._transaction._guard = self._refuse_late
        return self._transaction

    def _refuse_second(self) -> None:
        if self.published:
            raise OutcomeAlreadyPublishedError(self._ready_path)

    def _refuse_late(self, operation: str) -> None:
        """Refuse a transaction call after the outcome: the transaction went out (or was dropped) with it."""
        if self.published:
            raise OutcomeAlreadyPublishedError(self._ready_path, operation=operation)

    def _publish(
        self,
        action: str,
        members: Mapping[str, Any],
        *,
        priority: int | None = None,
        resources: Mapping[str, int] | None = None,
        message: str | None = None,
    ) -> None:
        """Check the members every action shares, compose the document and publish it."""
        if priority is not None:
            problem = _checks.priority_problem(priority)
            if problem is not None:
                raise OutcomeError(problem, argument="priority")
        if message is not None:
            _outcome.checked_text("message", message)
        transaction = self._transaction if action in _SPAWNING_ACTIONS else None
        generation = self.data_generation if transaction else None
        document = _outcome.compose(
            (self.job_id, self.activation_id, self.attempt_id),
            action,
            members,
            priority=priority,
            resources=resources,
            expected_data_generation=generation,
            message=message,
            runner_steps=self._runner_steps,
        )
        draft = self._draft
        if draft is not None and action not in _SPAWNING_ACTIONS:
            draft.discard()  # a step that did not finish registers no children
            draft, self._spawned = None, []
        if draft is not None:
            from . import _children  # only an attempt that spawned has a draft: the rest never load it

            spawn = _children.spawn_document(self._spawned)
            try:
                draft.add_file(_children.SPAWN_PATH, compact_json(spawn))
            except OSError as exc:
                raise OutcomeError(
                    f"cannot write spawn.json: {exc.strerror or exc}", path=draft.path
                ) from exc
        if transaction and generation is not None:
            draft = self._stage(transaction, generation, draft)
        self._draft = None
        _outcome.publish(self._control_dir, document, durable=self.durable, draft=draft)
        self._published = True

    def _stage(
        self, transaction: Transaction, generation: int, draft: _outcome.Draft | None
    ) -> _outcome.Draft:
        """Write the transaction bundle into the outcome draft (made here when no child made one)."""
        self._refuse_second()
        if draft is None:
            try:
                draft = _outcome.Draft(self._control_dir)
            except OSError as exc:
                raise OutcomeError(
                    f"cannot create an outcome draft: {exc.strerror or exc}", path=self._control_dir
                ) from exc
        try:
            stage_transaction(
                draft.path, transaction, expected_data_generation=generation, durable=self.durable
            )
        except BaseException:
            draft.discard()
            self._draft = None
            raise
        return draft
