"""What the numbers were measured on, recorded next to them."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from ._wrk import wrk_version

PACKAGES = ("boundlog", "uvicorn", "httptools", "uvloop", "gunicorn", "granian", "matplotlib")


def cpu_model() -> str:
    """The CPU's model name, from /proc/cpuinfo."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages under test (None when not installed)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit() -> dict[str, Any] | None:
    """The commit boundlog's source was at, when it runs from a git checkout."""
    source = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        status = subprocess.run(
            ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": commit, "modified": bool(status.strip())}


def command_line() -> str:
    """The command as the user typed it, near enough to paste again."""
    program = Path(sys.argv[0]).name
    if program == "__main__.py":
        program = "python -m boundlog.bench"
    return " ".join([program, *map(shlex.quote, sys.argv[1:])])


def environment(wrk: str, server_cpu: int | None, load_cpu: int | None) -> dict[str, Any]:
    """Everything about the machine and the software that the numbers depend on."""
    return {
        "command": command_line(),
        "cpu_model": cpu_model(),
        "cpus_online": os.cpu_count(),
        "server_cpu": server_cpu,
        "load_cpu": load_cpu,
        "load_average": os.getloadavg(),
        "kernel": platform.release(),
        "python": sys.version,
        "python_executable": sys.executable,
        "packages": package_versions(),
        "wrk": wrk_version(wrk),
        "git": git_commit(),
    }
