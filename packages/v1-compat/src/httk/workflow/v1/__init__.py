"""Compatibility runner for legacy httk v1 ``ht.task.*`` trees (not yet implemented)."""

__all__: list[str] = []
