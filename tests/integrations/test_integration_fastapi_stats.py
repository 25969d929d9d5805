"""``stats()`` of the log behind FastAPI's ``add_middleware``: the documented way.

Starlette builds the middleware itself, lazily, inside the server's first lifespan call,
so the application never holds the instance, nor the log it would own.  The supported
way is to make the ``AccessLog`` and pass it as ``log=`` (tests/apps/fastapi_stats_app.py):
a route reads ``log.stats()``; the middleware flushes that borrowed log at the lifespan
shutdown and leaves it open; the application's lifespan closes it after the last request.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    PYTHON,
    REPO_ROOT,
    UVICORN_CLEAN_EXITS,
    read_log_lines,
    running_server,
    stop_gracefully,
)

pytestmark = pytest.mark.needs("fastapi")

REQUESTS = 30


@pytest.mark.parametrize("lifespan", ["auto", "on"])
def test_stats_of_a_log_passed_to_add_middleware_and_its_close_at_shutdown(
    tmp_path: Path, lifespan: str
) -> None:
    def command(port: int) -> list[str]:
        # env -C: the app's sink is relative, and uvicorn has no option to change directory.
        return [
            "env", "-C", str(tmp_path), PYTHON, "-m", "uvicorn",
            "tests.apps.fastapi_stats_app:app", "--no-access-log", "--host", LOOPBACK,
            "--port", str(port), "--lifespan", lifespan,
        ]  # fmt: skip

    environment = {"PYTHONPATH": str(REPO_ROOT)}
    with running_server(command, environment, tmp_path / "uvicorn.out") as server:
        with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
            for _ in range(REQUESTS):
                assert client.get("/").json() == {"hello": "world"}
            # Each record is handed to the log before its response's last message goes
            # out, so the counters already hold every earlier request.
            stats = client.get("/stats").json()
        assert stats["submitted"] == REQUESTS, stats
        assert stats["dropped"] == stats["failed"] == 0, stats
        output = stop_gracefully(server, UVICORN_CLEAN_EXITS)
    lines = [json.loads(line) for line in read_log_lines(tmp_path / "access.log")]
    assert [line["path"] for line in lines] == ["/"] * REQUESTS + ["/stats"], lines
    # The application's lifespan closed the log, after the last request, with final counts.
    closed = re.search(r"access log closed: Stats\(submitted=(\d+), written=(\d+),", output)
    assert closed, output
    assert closed.groups() == (str(REQUESTS + 1), str(REQUESTS + 1)), output
