"""The committed models are exactly what ``scripts/generate_models.py`` produces from the schemas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_models_are_up_to_date() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_models.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
