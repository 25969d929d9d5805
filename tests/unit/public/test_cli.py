"""The boundlog command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import boundlog
from boundlog import _core
from boundlog._cli import main


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


def test_the_bare_command_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    """`boundlog` with no command says what it can do, and succeeds."""
    assert main([]) == 0
    output = capsys.readouterr().out
    assert "usage: boundlog" in output
    assert "bench" in output


def test_bench_without_wrk_stops_naming_what_to_install(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`boundlog bench` reaches the benchmark, which stops at once without its load generator."""
    missing = tmp_path / "no-wrk-here"
    assert main(["bench", "--wrk", str(missing), "--output", str(tmp_path / "out")]) == 2
    error = capfd.readouterr().err
    assert "wrk, the load generator, is not installed" in error
    assert "--wrk" in error
    assert not (tmp_path / "out").exists()
