"""What enters the state tree: submission, the runner store, outcomes and their children, joins,
transactions.

Rule of this layer: it imports only :mod:`..core`; it publishes documents and markers and decides no
scheduling.
"""
