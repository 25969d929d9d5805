"""What ships: the sdist and wheel hold what they must, and the files agree with each other."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[2]

# Both builds run on one worker, one after the other (pytest -n with --dist loadgroup),
# each from a copy of the source tree: a build in the tree itself writes into it
# (src/boundlog.egg-info, build/, the sdist's staging folder) and walks it while other
# tests' processes write bytecode there, which failed builds on parallel runs.
pytestmark = pytest.mark.xdist_group("source-tree")
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv*", "build", "dist", "site", "htmlcov", "*.egg-info", "__pycache__",
    ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", ".coverage*", "*.so",
)  # fmt: skip


def _source_copy(tmp_path: Path) -> Path:
    """The source tree as a fresh clone has it, copied under ``tmp_path``."""
    copy = tmp_path / "source"
    shutil.copytree(ROOT, copy, ignore=_NOT_SOURCES, symlinks=True)
    return copy


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


def test_the_sdist_builds_a_wheel_that_installs_with_the_c_core(tmp_path: Path) -> None:
    """``python -m build``: the sdist, the wheel built from it, and that wheel in a new venv.

    The wheel is built from the unpacked sdist, so a C source or header missing from
    the sdist fails here, as it would for anyone installing from it.
    """
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(_source_copy(tmp_path))],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    with tarfile.open(sdist) as archive:
        sdist_names = {Path(*Path(name).parts[1:]).as_posix() for name in archive.getnames()}
    assert {"LICENSE", "setup.py", "csrc/module.c", "csrc/formats/clf.h"} <= sdist_names
    with zipfile.ZipFile(wheel) as archive:
        wheel_names = archive.namelist()
    assert any(re.fullmatch(r"boundlog/_speedups\..*\.so", name) for name in wheel_names)
    assert "boundlog/py.typed" in wheel_names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in wheel_names)
    # A platform wheel, tagged for this interpreter (cp313t on a free-threaded 3.13).
    assert "-none-any" not in wheel.name

    # Free to use the C core (the suite also runs with BOUNDLOG_NO_EXTENSIONS=1).
    environment = {k: v for k, v in os.environ.items() if k != "BOUNDLOG_NO_EXTENSIONS"}
    version = _installed_version(wheel, tmp_path, environment)
    assert version.endswith("(C core)"), version


def _installed_version(wheel: Path, tmp_path: Path, environment: dict[str, str]) -> str:
    """``boundlog --version`` of ``wheel`` installed in a new venv, run from an empty
    directory so that nothing of the clone can be imported instead."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [venv / "bin" / "pip", "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    version = subprocess.run(
        [venv / "bin" / "boundlog", "--version"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return version.stdout.strip()


def test_without_a_compiler_the_wheel_installs_the_pure_python_core(tmp_path: Path) -> None:
    """No working C compiler (``CC=false``): the build says so in one line and the
    wheel (built from the sdist, as pip builds one) still installs, with the
    pure-Python core."""
    dist = tmp_path / "dist"
    environment = {**os.environ, "CC": "false"}
    environment.pop("BOUNDLOG_NO_EXTENSIONS", None)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(_source_copy(tmp_path))],
        capture_output=True,
        text=True,
        env=environment,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    said = [line for line in built.stderr.splitlines() if "C extension not built" in line]
    assert len(said) == 1, built.stderr[-3000:]
    assert said[0].startswith("boundlog: C extension not built (")
    assert said[0].endswith("installing the pure-Python core")
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert not any(name.endswith(".so") for name in archive.namelist())
    version = _installed_version(wheel, tmp_path, environment)
    assert version.endswith("(pure-Python core: extension not built)"), version
