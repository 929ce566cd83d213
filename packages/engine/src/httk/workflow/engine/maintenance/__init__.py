"""Maintenance: ``workspace fsck`` (and its repair) and garbage collection.

Rule of this layer: it imports only :mod:`..core`, :mod:`..publish` and :mod:`..requests`; a manager
runs collection through it, never the other way round.
"""
