"""A configured ssh remote for the tests: ``kappa``, reaching this test's real sshd (``tests/sshkit.py``).

The far side is this machine under the same account, so what makes it another machine is its own httk
configuration and data directories (``Far.config``, ``Far.data``): the remote's ``httk_command`` sets
them, exactly as an operator's ``httk_command`` or ``prelude`` would select an environment there.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from typer.testing import Result

from tests.sshkit import SshServer

Invoke = Callable[..., Result]

HTTK = str(Path(sys.executable).with_name("httk"))


@dataclass(frozen=True)
class Far:
    """The remote machine as the tests see it: its sshd and its user's httk directories."""

    name: str
    server: SshServer
    config: Path
    data: Path

    @property
    def httk_command(self) -> str:
        variables = (
            f"HTTK_CONFIG_HOME={shlex.quote(str(self.config))} HTTK_DATA_HOME={shlex.quote(str(self.data))}"
        )
        return f"env {variables} {shlex.quote(HTTK)}"


def configure_remote(invoke: Invoke, server: SshServer, far_home: Path, name: str = "kappa") -> Far:
    """``remote add --template ssh NAME`` and ``remote configure`` for ``server``; the far side."""
    far = Far(name, server, far_home / "config", far_home / "data")
    added = invoke("workflow", "remote", "add", "--template", "ssh", name)
    assert added.exit_code == 0, added.output
    settings = {**server.settings(), "httk_command": far.httk_command, "ssh_config": "none"}
    pairs = [word for key, value in settings.items() for word in ("--set", f"{key}={value}")]
    configured = invoke("workflow", "remote", "configure", *pairs, name)
    assert configured.exit_code == 0, configured.output
    return far


def ok(result: Result) -> Result:
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
    return result
