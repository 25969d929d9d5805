"""Broken pipe, for real: the server logs to stdout, a pipe whose reader exits mid-run.

Python ignores SIGPIPE, so every write after the reader is gone fails with EPIPE.  The
server must not notice: no crash, no traceback, every request answered; the logger
counts the failed records and warns at most once per reporting period.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from _servers import (
    Load,
    PipeReader,
    fault_environment,
    final_stats,
    gunicorn_fault_command,
    load_requests,
    loss_reports,
    running_server_with_stdout,
    uvicorn_fault_command,
    wait_settled,
)

REPORT_EVERY = 5.0
SERVERS: dict[str, Callable[[int], list[str]]] = {
    "uvicorn": uvicorn_fault_command,
    "gunicorn": gunicorn_fault_command("-k", "gthread", "--threads", "4", "-w", "1"),
}
# uvicorn ends a graceful shutdown by re-raising SIGTERM on itself.
CLEAN_EXITS = {"uvicorn": (0, -signal.SIGTERM), "gunicorn": (0,)}


@pytest.mark.parametrize("server_name", SERVERS)
def test_reader_gone_costs_no_request_and_no_traceback(tmp_path: Path, server_name: str) -> None:
    """After the reader exits, requests are all answered and the lost records all counted."""
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    environment = fault_environment({"sink": "stdout"}, stats_dir)
    started = time.monotonic()
    with (
        PipeReader() as pipe,
        running_server_with_stdout(
            SERVERS[server_name], environment, tmp_path / "out", pipe.write_fd
        ) as server,
    ):
        pipe.close_write_end()
        with Load(server.port, clients=2, requests=50) as before:
            before.join()
        wait_settled(server.port, submitted=100)
        pipe.hang_up()
        with Load(server.port, clients=4, requests=100, first_client=10) as after:
            after.join()
        when_broken = wait_settled(server.port, submitted=500)
        assert when_broken["write_errors"] >= 1, when_broken
        assert server.stop() in CLEAN_EXITS[server_name], server.output()
    elapsed = time.monotonic() - started

    assert (before.total, after.total) == (100, 400), "every request must be answered"
    logged = load_requests(pipe.lines())
    assert set(logged) == before.completed
    assert max(logged.values()) == 1, "a record was written twice"
    (final,) = final_stats(stats_dir).values()
    assert final["submitted"] == 500, final
    assert (final["written"], final["failed"]) == (100, 400), final

    output = server.output()
    assert "Traceback" not in output, output
    reports = loss_reports(output)
    cause = "cannot write to stdout: Broken pipe"
    assert len(reports.periodic) <= 1 + int(elapsed // REPORT_EVERY), reports
    assert all(report == (0, report[1], cause) for report in reports.periodic), reports
    assert reports.final == [(0, 400, cause)], reports
    assert not reports.others, reports
