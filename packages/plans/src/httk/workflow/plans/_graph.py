"""The dependency graph of a plan's stages: cycles, readiness and what lies downstream.

Pure functions of ``{stage id: its depends_on}``, standard library only: the coordinator (a runner
process) and the command line share them. Every walk is iterative, so a chain of 100,000 stages does
not reach Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Graph = Mapping[str, Sequence[str]]
"""Stage id to the ids it depends on (every one of which is a stage of the graph)."""


def find_cycle(graph: Graph) -> list[str] | None:
    """A dependency cycle as the path that closes it (``["a", "b", "a"]``), or ``None`` when there is none.

    The cycle reported is the first one a depth-first walk in stage order meets, so the same plan always
    names the same cycle.

    Examples
    --------
    >>> find_cycle({"a": ["b"], "b": ["a"], "c": []})
    ['a', 'b', 'a']
    >>> find_cycle({"a": [], "b": ["a"]}) is None
    True
    """
    done: set[str] = set()
    for root in graph:
        if root in done:
            continue
        path: list[str] = [root]
        on_path = {root}
        pending = [iter(graph[root])]
        while pending:
            step = next(pending[-1], None)
            if step is None:
                pending.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
            elif step in on_path:
                return [*path[path.index(step) :], step]
            elif step not in done:
                path.append(step)
                on_path.add(step)
                pending.append(iter(graph[step]))
    return None


def downstream(graph: Graph, stage: str) -> list[str]:
    """Every stage that depends on ``stage``, directly or transitively, in the graph's order.

    Examples
    --------
    >>> downstream({"a": [], "b": ["a"], "c": ["b"], "d": []}, "a")
    ['b', 'c']
    """
    dependants: dict[str, list[str]] = {name: [] for name in graph}
    for name, needs in graph.items():
        for need in needs:
            dependants[need].append(name)
    seen: set[str] = set()
    pending = list(dependants[stage])
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending.extend(dependants[name])
    return [name for name in graph if name in seen]


def critical_path_length(graph: Graph) -> int:
    """The number of stages on the longest dependency chain (the waves a plan needs at the least).

    Examples
    --------
    >>> critical_path_length({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]})
    3
    """
    depth: dict[str, int] = {}
    for root in graph:
        pending = [root]
        while pending:
            name = pending[-1]
            if name in depth:
                pending.pop()
                continue
            missing = [need for need in graph[name] if need not in depth]
            if missing:
                pending.extend(missing)
                continue
            depth[name] = 1 + max((depth[need] for need in graph[name]), default=0)
            pending.pop()
    return max(depth.values(), default=0)
