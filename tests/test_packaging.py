"""The project's files agree: what a free-threaded CPython installs is the test extra."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parent.parent
FREE_THREADED_REQUIREMENTS = ROOT / "tests" / "requirements-free-threaded.txt"


def _test_extra() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {
        canonicalize_name(Requirement(line).name)
        for line in project["optional-dependencies"]["test"]
    }


def _free_threaded() -> tuple[set[str], set[str]]:
    """The packages the file installs, and those it leaves out (``# left out: name``)."""
    installed, left_out = set(), set()
    for line in FREE_THREADED_REQUIREMENTS.read_text().splitlines():
        if match := re.match(r"#\s+left out: ([\w.-]+)", line):
            left_out.add(canonicalize_name(match[1]))
        elif line and not line.startswith("#"):
            installed.add(canonicalize_name(Requirement(line).name))
    return installed, left_out


def test_the_free_threaded_requirements_name_every_package_of_the_test_extra() -> None:
    """A package added to the extra must be installed there too, or left out with a reason."""
    installed, left_out = _free_threaded()
    assert not installed & left_out
    assert _test_extra() - installed - left_out == set()
    # uvicorn[standard] is spelt out package by package there, watchfiles left out.
    assert {"httptools", "uvloop", "websockets"} <= installed
    assert "watchfiles" in left_out
