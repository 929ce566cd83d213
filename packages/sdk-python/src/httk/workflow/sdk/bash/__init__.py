"""The Bash API: ``httk-workflow.sh`` (sourced by Bash runners) and its transaction part, as package data.

A task manager exports the library's absolute path to every attempt as ``HTTK_WORKFLOW_BASH_API``; it
finds it through the entry point group ``httk.workflow.bash_apis``, where this distribution registers
:func:`bash_api_path` under that variable's name, as an add-on registers its own library.
"""

from __future__ import annotations

from pathlib import Path

LIBRARY = "httk-workflow.sh"


def bash_api_path() -> Path:
    """The absolute path of the Bash API library a Bash runner sources.

    Examples
    --------
    >>> from httk.workflow.sdk.bash import bash_api_path
    >>> bash_api_path().name
    'httk-workflow.sh'
    """
    return Path(__file__).resolve().with_name(LIBRARY)
