"""The Python half of the v1 VASP helpers (``vasptools.sh``), written on the VASP package's library.

``python -m httk.workflow.v1.vasptools`` (:mod:`.__main__`) is what the Bash helpers call for POTCAR
assembly, the watched VASP run and the remedies; the VASP package (httk-workflow-vasp) is imported
only then (:mod:`._library`).
"""
