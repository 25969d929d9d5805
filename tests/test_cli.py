"""The boundlog command line."""

from __future__ import annotations

import subprocess
import sys

import boundlog
from boundlog import _core


def test_version() -> None:
    """`boundlog --version` prints the installed version and the core in use."""
    result = subprocess.run(
        [sys.executable, "-m", "boundlog", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == f"boundlog {boundlog.__version__} ({_core.description})"


def test_help_describes_the_tool() -> None:
    """`boundlog --help` exits 0 and says what boundlog is."""
    result = subprocess.run(
        [sys.executable, "-m", "boundlog", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "usage: boundlog" in result.stdout
    assert "every record written or counted" in result.stdout
