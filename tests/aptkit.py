"""Installing a Debian package the tests need, the way CI can: as root, with apt-get.

``./dev test`` runs each kit's ``install`` up front (``python -m tests.slurmkit install``, ``python -m
tests.tmuxkit install``); a kit calls :func:`apt_install` only when one of its programs is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence


def apt_install(packages: Sequence[str], error: type[Exception]) -> None:
    """``apt-get install`` ``packages`` (after one ``apt-get update`` if the first try fails).

    Raises ``error`` naming what to install when this is not root or has no apt-get, and with apt-get's
    last words when the install fails.
    """
    names = " ".join(packages)
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise error(f"install {names} (needs root and apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if subprocess.run(command, env=env, capture_output=True, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise error(f"apt-get install {names} failed:\n{result.stderr[-2000:]}")
