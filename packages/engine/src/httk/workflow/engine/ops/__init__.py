"""Operator tools: inspection, job selectors, ``job why``, ``precheck``, ``job debug``, ``job delete``.

Rule of this layer: the read-side tools open nothing for writing and use of the manager only its pure
rules; ``job debug`` runs a private manager.
"""
