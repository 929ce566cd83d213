"""Operator requests: the request document, publishing one, and the life of a request file.

Rule of this layer: it imports only :mod:`..core` and :mod:`..publish`. What a request does to its job
is the manager's decision, handed to the request pass as an argument.
"""
