"""``python -m httk.workflow.cli``: the ``httk`` command line."""

from ._app import main

main()
