"""The kernel: the mutation seam, the state machine, frames, the journal, workspaces and markers.

Rule of this layer: it imports nothing else of the engine. Every marker move is
:func:`._transition.move_marker`; every filesystem mutation of protocol state is :mod:`._fsops`.
"""
