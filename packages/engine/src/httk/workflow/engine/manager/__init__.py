"""The task manager: its loop of passes, launch, commit, recovery, waiting, cancellation and rules.

Rule of this layer: it imports every layer above it (core, publish, requests, maintenance) and nothing
of :mod:`..ops`. The read-side tools use only its pure rules (:mod:`._rules`).
"""
