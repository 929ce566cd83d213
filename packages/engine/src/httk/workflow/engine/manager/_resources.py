"""Resource scheduling arithmetic: what a job asks of a manager's capacities, and whether it fits now.

A manager advertises integer capacities by label (``procs``, ``mem`` in MB, ``matlab_license_slots``).
A job's *requirement* is its current state frame's ``resources``: job.json's for the first activation, an
``advance`` or ``wait`` outcome's from the activation it starts on, carried across retries. Labels are
opaque here except ``procs`` and ``mem``, which a job that omits them receives as the manager's *fair
share* (``capacity // workers``, the whole capacity when that quotient is 0), so an undeclared job still
occupies one worker's share.

Two questions, kept apart because one is permanent and one is not:

- :func:`unmet`: a declared amount above the capacity (an absent label has capacity 0) can never be
  served by this manager; the job is *not claimable here*, as for a pool it does not serve.
- :func:`fits`: the *allocation* (declared amounts plus the fair shares) fits next to what the attempts
  this manager runs already reserve. If not, the job waits for a later pass; it needs no more than the
  whole capacity, so it fits once the running attempts are gone.

A zero amount needs nothing and fits everywhere. Everything here is pure and O(labels).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

FAIR_SHARE_LABELS = ("procs", "mem")
UNSATISFIABLE = 1 << 63
"""The amount a malformed requirement entry stands for: larger than any capacity, so never served."""


def requirement_of(value: object) -> dict[str, int]:
    """A frame's ``resources`` as a requirement: nothing for an absent or non-object value.

    Our writers validate every requirement; a frame another writer left with a non-integer or negative
    amount asks for :data:`UNSATISFIABLE` of that label rather than being guessed at.
    """
    if not isinstance(value, Mapping):
        return {}
    return {
        str(label): amount if type(amount) is int and amount >= 0 else UNSATISFIABLE
        for label, amount in value.items()
    }


def unmet(requirement: Mapping[str, int], capacities: Mapping[str, int]) -> tuple[str, ...]:
    """The labels whose declared amount exceeds this manager's capacity, sorted (absent counts as 0)."""
    return tuple(sorted(label for label, amount in requirement.items() if amount > capacities.get(label, 0)))


def fair_share(capacity: int, workers: int) -> int:
    """One worker's share of a capacity: ``capacity // workers``, or all of it when that is 0."""
    return capacity // workers or capacity


def allocation(requirement: Mapping[str, int], capacities: Mapping[str, int], workers: int) -> dict[str, int]:
    """The declared amounts plus the fair share of each of ``procs``/``mem`` the requirement omits."""
    allocated = dict(requirement)
    for label in FAIR_SHARE_LABELS:
        if label not in allocated and label in capacities:
            allocated[label] = fair_share(capacities[label], workers)
    return allocated


def reserved(allocations: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """What the given allocations hold together, by label."""
    total: dict[str, int] = {}
    for allocated in allocations:
        for label, amount in allocated.items():
            total[label] = total.get(label, 0) + amount
    return total


def fits(allocated: Mapping[str, int], capacities: Mapping[str, int], held: Mapping[str, int]) -> bool:
    """Whether ``allocated`` fits in what ``capacities`` leave after the reservations ``held``."""
    return all(
        amount <= capacities.get(label, 0) - held.get(label, 0)
        for label, amount in allocated.items()
        if amount
    )


def describe(amounts: Mapping[str, int]) -> str:
    """``procs=4,mem=16000`` in label order, or ``-`` for none (banner, diagnosis)."""
    return ",".join(f"{label}={amount}" for label, amount in sorted(amounts.items())) or "-"
