"""On a free-threaded CPython, boundlog and each server it runs under keep the GIL off.

A C extension that does not declare itself safe without the GIL turns the GIL back on
for the whole process when it is imported (with a RuntimeWarning on stderr), and then
nothing runs in parallel.  These tests run only on a free-threaded build (CI builds one:
.ci/free-threaded-python); they name the server whose process has the GIL back.
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

import boundlog
import boundlog.aiohttp
import boundlog.asgi
import boundlog.gunicorn
import boundlog.http_server
import boundlog.wsgi
from _records import make_record
from _servers import (
    LOOPBACK,
    PYTHON,
    fault_environment,
    fault_stats,
    gunicorn_fault_command,
    running_server,
    uvicorn_fault_command,
)

pytestmark = pytest.mark.skipif(
    not sysconfig.get_config_var("Py_GIL_DISABLED"), reason="not a free-threaded CPython"
)

GIL_ENABLED_WARNING = "The global interpreter lock (GIL) has been enabled"


def _hypercorn(port: int) -> list[str]:
    return [
        PYTHON, "-m", "hypercorn", "--bind", f"{LOOPBACK}:{port}", "--workers", "1",
        "tests.apps.fault_asgi:app",
    ]  # fmt: skip


def _waitress(port: int) -> list[str]:
    return [PYTHON, "-m", "waitress", f"--listen={LOOPBACK}:{port}", "tests.apps.fault_wsgi:app"]


def test_boundlog_runs_without_the_gil(tmp_path: Path) -> None:
    """boundlog and all its integrations imported, its writer thread at work: no GIL."""
    log = boundlog.AccessLog(str(tmp_path / "access.log"))
    assert log.submit(make_record())
    assert log.close().written == 1
    assert not sys._is_gil_enabled()


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(uvicorn_fault_command, id="uvicorn-httptools-uvloop"),
        pytest.param(gunicorn_fault_command("-k", "gthread", "--threads", "4"), id="gunicorn"),
        pytest.param(_hypercorn, id="hypercorn"),
        pytest.param(_waitress, id="waitress"),
    ],
)
def test_a_server_process_serves_with_the_gil_off(
    tmp_path: Path, command: Callable[[int], list[str]]
) -> None:
    """After serving a logged request, the server process still runs without the GIL."""
    environment = fault_environment({"sink": str(tmp_path / "access.log")}, tmp_path)
    with running_server(command, environment, tmp_path / "out") as server:
        document = fault_stats(server.port)
        server.stop()
    assert GIL_ENABLED_WARNING not in server.output(), server.output()
    assert document["gil"] is False, f"the GIL is enabled in {command(0)[2]}'s process"
