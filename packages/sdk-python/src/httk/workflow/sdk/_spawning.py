"""Spawning children and waiting for them: the ``spawn`` and ``wait`` of :class:`~._attempt.Attempt`.

A mixin of the attempt, so that the outcome methods stay in one module of a readable size. The child
machinery (:mod:`._children`, whose named tuples make :mod:`typing` compile their annotations) loads on
the first spawn or wait, so a runner that never spawns does not import it. A spawn writes
the child's bundle (its job.json and a copy of a payload runner, :mod:`._children`) into the attempt's
outcome draft at once; the outcome method that publishes the draft adds ``children/spawn.json`` or, for
an action that cannot carry children, discards them. :meth:`Spawning.wait` publishes the ``wait``
outcome naming the children to join.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import _checks, _outcome
from ._context import AttemptContext
from ._errors import OutcomeError
from ._files import compact_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from . import _children
    from ._children import ChildRef

_JOB_FILE = "job.json"


class Spawning(AttemptContext):
    """The children of one attempt (the base of :class:`~httk.workflow.sdk.Attempt`).

    Examples
    --------
    >>> child = a.spawn("relax", label="strain-0")
    >>> a.wait("fit")
    """

    _spawned: list[ChildRef]
    _draft: _outcome.Draft | None

    # Provided by Attempt.
    def _refuse_second(self) -> None:
        raise NotImplementedError

    def _job_document(self) -> dict[str, Any]:
        raise NotImplementedError

    def _publish(
        self,
        action: str,
        members: Mapping[str, Any],
        *,
        priority: int | None = None,
        resources: Mapping[str, int] | None = None,
        message: str | None = None,
    ) -> None:
        raise NotImplementedError

    def spawn(
        self,
        step: str,
        *,
        label: str,
        inputs: Mapping[str, Any] | None = None,
        tag: str | None = None,
        placement: str | None = None,
        name: str | None = None,
        runner: Mapping[str, Any] | None = None,
        workdir: Mapping[str, Any] | None = None,
        data: Mapping[str, Any] | None = None,
        claim: Mapping[str, Any] | None = None,
        priority: int | None = None,
        retry_policy: Mapping[str, Any] | None = None,
        resources: Mapping[str, int] | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> ChildRef:
        """Spawn a child job that starts at ``step``; it is published with this attempt's outcome.

        The child is an ordinary job registered by the manager while it commits the outcome: with
        :meth:`advance` or :meth:`succeed` it runs detached, with :meth:`wait` the parent joins it. Its
        ``job.json`` takes ``runner``, ``workdir``, ``data``, ``claim``, ``priority`` and
        ``retry_policy`` from this job's own unless given; a payload runner is copied into the child's
        payload. Nothing is registered if the step then fails, retries, pauses or publishes nothing.

        Parameters
        ----------
        step
            The child's initial step.
        label
            Its name in this attempt's spawn set: tag syntax (``[a-z0-9][a-z0-9._-]*``, at most 48
            bytes, no ``--``), unique; the gathering step finds the child's results by it.
        inputs
            The child's ``inputs`` object (a mapping JSON can hold).
        tag
            The child's tag (default: ``label``), the prefix of its job key ``<tag>--<uuid>``.
        placement
            Where the child's payload goes; default ``<placement>/<job key>.children/<n // 1000>`` for
            the ``n``-th child (from 0) of this attempt, beside this job's payload.
        name, runner, workdir, data, claim, priority, retry_policy, resources
            The child's job.json members of those names (see the job.json rules).
        files
            Files of the child's payload besides job.json: payload-relative POSIX path to content (the
            inputs of a packaged workflow, say ``{"files/POSCAR": b"..."}``); never ``job.json`` or
            anything below ``.httk-job`` or an ``.httk-attempt.*`` directory.

        Returns
        -------
        ChildRef
            The child's label, job id, job key, placement and spawn id.

        Raises
        ------
        OutcomeError
            When an argument is invalid or makes an invalid child job.json (the argument is named), or
            the bundle cannot be written; nothing of this child is written then.
        OutcomeAlreadyPublishedError
            When the attempt already has an outcome.

        Examples
        --------
        >>> for i, strain in enumerate([-0.01, 0.0, 0.01]):
        ...     a.spawn("relax", label=f"strain-{i}", inputs={"strain": strain})
        >>> a.wait("fit")
        """
        self._refuse_second()
        from . import _children  # loaded by the first spawn: a runner that never spawns never pays for it
        from ._children import ChildRef

        label = _children.check_label(label, [child.label for child in self._spawned])
        problem = _checks.step_problem(step)
        if problem is not None:
            raise OutcomeError(f"is not a valid step name ({step!r}): {problem}", argument="step")
        for argument, value in (("inputs", inputs), ("resources", resources)):
            if value is not None:
                problem = _checks.json_problem(value, depth=1)
                if problem is not None:
                    raise OutcomeError(problem, argument=argument)
        parent = self._parent_view()
        chosen = (
            placement if placement is not None else _children.default_placement(parent, len(self._spawned))
        )
        chosen = _children.check_placement(chosen, parent)
        job_id, spawn_id = _children.new_ids()
        overrides = {
            "name": name,
            "runner": runner,
            "workdir": workdir,
            "data": data,
            "claim": claim,
            "priority": priority,
            "retry_policy": retry_policy,
            "resources": resources,
            "inputs": inputs,
        }
        document = _children.child_document(
            parent,
            job_id=job_id,
            spawn_id=spawn_id,
            tag=label if tag is None else tag,
            step=step,
            overrides=overrides,
        )
        child = ChildRef(
            label, step, parent.workspace_id, job_id, f"{document['tag']}--{job_id}", chosen, spawn_id
        )
        extra = _children.check_files(files, document)
        self._add_bundle(child, document, _children.payload_runner(document, parent), extra)
        self._spawned.append(child)
        return child

    def wait(
        self,
        step: str,
        children: Sequence[ChildRef | Mapping[str, Any]] | None = None,
        condition: str = "all_succeeded",
        count: int | None = None,
        on_impossible: str | None = None,
        *,
        priority: int | None = None,
        message: str | None = None,
    ) -> None:
        """Publish ``wait``: once its children are registered, the job waits until their join decides.

        When ``condition`` holds, the job continues with a new activation of ``step``, whose
        :attr:`children` are the observations of the joined children (label, kind, payload_path,
        workdir_path, failure, ...) and :attr:`join` the whole decision. When success becomes impossible
        the job continues at ``on_impossible`` with the same observations, or fails with
        ``dependency_failure`` without it.

        Parameters
        ----------
        step
            The step that gathers the children's results.
        children
            The children to join: every child spawned by this attempt by default; also
            :class:`ChildRef` objects or mappings naming children that already exist (``workspace_id``,
            ``job_id``, ``job_key`` and ``placement_hint`` or ``placement``, as in :attr:`children`).
        condition
            ``all_succeeded``, ``all_terminal``, ``any_succeeded`` or ``at_least``.
        count
            For ``at_least``: how many children must succeed (1 to their number).
        on_impossible
            The step to continue at when the condition can no longer hold.
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
        >>> a.wait("gather", condition="at_least", count=2, on_impossible="report_failure")
        """
        self._refuse_second()
        from . import _children

        members = _outcome.advance_members(step)
        chosen = self._spawned if children is None else children
        references = [_children.join_reference(child) for child in chosen]
        members.update(_children.join_members(step, references, condition, count, on_impossible))
        self._publish("wait", members, priority=priority, message=message)

    def _parent_view(self) -> _children.ParentView:
        from . import _children

        return _children.ParentView(
            self.workspace_id,
            self.job_id,
            self.job_key,
            self.placement,
            self.activation_id,
            self._job_document(),
            self.job_dir,
        )

    def _add_bundle(
        self,
        child: ChildRef,
        document: Mapping[str, Any],
        runner: tuple[str, bytes, int] | None,
        files: Mapping[str, bytes],
    ) -> None:
        """Write the child's bundle into the outcome draft (made on the first spawn)."""
        from . import _children

        bundle = f"{_children.BUNDLE_PREFIX}{child.job_key}"
        try:
            if self._draft is None:
                self._draft = _outcome.Draft(self._control_dir)
            self._draft.add_file(f"{bundle}/{_JOB_FILE}", compact_json(document))
            if runner is not None:
                relative, content, mode = runner
                self._draft.add_file(f"{bundle}/{relative}", content, mode=mode)
            for relative, data in files.items():
                self._draft.add_file(f"{bundle}/{relative}", data)
        except OSError as exc:
            raise OutcomeError(
                f"cannot write the child's bundle: {exc.strerror or exc}", path=self._control_dir
            ) from exc
