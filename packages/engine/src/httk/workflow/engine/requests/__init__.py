"""Operator requests: the request document, publishing one, and the life of a request file.

Rule of this layer: it imports only :mod:`..core` and :mod:`..publish`.
"""
