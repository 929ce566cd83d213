"""Packaged VASP runners for httk-workflow (not yet implemented: see the VASP issue)."""

__all__: list[str] = []
