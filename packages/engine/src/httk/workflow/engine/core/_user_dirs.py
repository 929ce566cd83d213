"""This user's httk directories: configuration (registry, global launchers) and data (default workspace).

Each has an httk variable that overrides it whole, then the XDG base directory, then the XDG default:

* configuration: ``$HTTK_CONFIG_HOME``, else ``$XDG_CONFIG_HOME/httk``, else ``~/.config/httk``;
* data: ``$HTTK_DATA_HOME``, else ``$XDG_DATA_HOME/httk``, else ``~/.local/share/httk``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def config_home(environ: Mapping[str, str] | None = None) -> Path:
    """The user's httk configuration directory."""
    return _home(environ, "HTTK_CONFIG_HOME", "XDG_CONFIG_HOME", (".config",))


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """The user's httk data directory."""
    return _home(environ, "HTTK_DATA_HOME", "XDG_DATA_HOME", (".local", "share"))


def _home(environ: Mapping[str, str] | None, own: str, xdg: str, fallback: tuple[str, ...]) -> Path:
    env = os.environ if environ is None else environ
    explicit = env.get(own)
    if explicit:
        return Path(os.path.abspath(explicit))
    base = env.get(xdg) or os.path.join(env.get("HOME") or str(Path.home()), *fallback)
    return Path(os.path.abspath(base)) / "httk"
