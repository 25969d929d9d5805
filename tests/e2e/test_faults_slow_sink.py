"""A slow sink, for real: uvicorn logs to stdout, a pipe whose reader sleeps.

While the reader sleeps the pipe fills, the writer thread blocks in its write and the
queue fills up.  Under ``drop`` the server refuses the excess records at the cost of a
counter, so its memory stays flat however long the sleep lasts; under ``wait`` requests
wait for room, but only the requests: the event loop keeps running.  The ``wait`` test
also runs under granian, which sends a message when ``send`` is called rather than when
its awaitable is awaited: a response must not go out before its record has room.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from _servers import (
    Load,
    PipeReader,
    fault_environment,
    fault_stats,
    final_stats,
    granian_fault_command,
    load_requests,
    loss_reports,
    poll_until,
    running_server_with_stdout,
    uvicorn_fault_command,
    wait_settled,
)

# The smallest pipe buffer, so that a few lines fill it.
PIPE_SIZE = 4096
CLEAN_EXITS = (0, -signal.SIGTERM)


def _user_agent(size: int) -> bytes:
    # A record keeps the header's bytes: big values make a growing queue easy to see.
    return b"User-Agent: " + b"u" * size + b"\r\n"


def _peak_rss(pid: int) -> int:
    """The process's peak resident set size, in bytes (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def test_drop_keeps_memory_bounded_and_accounts_for_every_record(tmp_path: Path) -> None:
    """With the reader asleep, 10,000 more refused 4 KiB records leave peak RSS flat."""
    max_queue, agent_size, refused_while_measured = 500, 4096, 10_000
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    options = {"sink": "stdout", "policy": "drop", "max_queue": max_queue}
    environment = fault_environment(options, stats_dir)

    def dropped() -> int:
        return int(fault_stats(server.port)["stats"]["dropped"])

    with (
        PipeReader(PIPE_SIZE, paused=True) as pipe,
        running_server_with_stdout(
            uvicorn_fault_command, environment, tmp_path / "out", pipe.write_fd
        ) as server,
    ):
        pipe.close_write_end()
        with Load(server.port, headers=lambda client: _user_agent(agent_size)) as load:
            # Once records are refused, the queue is full: memory has reached its bound.
            poll_until(lambda: dropped() >= 1000, 60, "the queue fills and refuses")
            bounded_peak = _peak_rss(server.process.pid)
            target = dropped() + refused_while_measured
            poll_until(lambda: dropped() >= target, 60, f"{target} records refused")
            peak = _peak_rss(server.process.pid)
        assert not load.errors, load.errors[:5]
        assert fault_stats(server.port)["stats"]["queued"] <= max_queue
        pipe.resume()
        wait_settled(server.port)
        assert server.stop() in CLEAN_EXITS, server.output()
        pipe.wait_closed()

    # Kept, those records would hold 40 MB of headers; refused, they hold none.
    growth = peak - bounded_peak
    assert growth < refused_while_measured * agent_size // 4, f"peak RSS grew {growth} bytes"
    (final,) = final_stats(stats_dir).values()
    assert final["submitted"] == load.total, (final, load.total)
    assert final["failed"] == 0, final
    assert final["submitted"] == final["written"] + final["dropped"], final
    logged = load_requests(pipe.lines())
    assert sum(logged.values()) == final["written"], final
    assert set(logged) <= load.completed
    assert max(logged.values()) == 1
    # uvicorn's stderr said so: while dropping (at most every 5 s), and with the totals.
    reports = loss_reports(server.output())
    assert all(failed == 0 for _, failed, _ in reports.periodic), reports
    assert sum(dropped for dropped, _, _ in reports.periodic) <= final["dropped"], reports
    assert reports.final == [(final["dropped"], 0, "")], reports


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(uvicorn_fault_command, id="uvicorn"),
        pytest.param(granian_fault_command, id="granian", marks=pytest.mark.needs("granian")),
    ],
)
def test_wait_delivers_everything_and_the_event_loop_keeps_running(
    tmp_path: Path, command: Callable[[int], list[str]]
) -> None:
    """Requests wait for room while a ticker keeps ticking; once the reader wakes, all are logged."""
    max_queue, clients, requests = 16, 16, 4
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    options = {"sink": "stdout", "policy": "wait", "max_queue": max_queue}
    environment = fault_environment(options, stats_dir)
    with (
        PipeReader(PIPE_SIZE, paused=True) as pipe,
        running_server_with_stdout(command, environment, tmp_path / "out", pipe.write_fd) as server,
    ):
        pipe.close_write_end()
        with Load(server.port, clients, requests, headers=lambda client: _user_agent(1024)) as load:
            poll_until(
                lambda: fault_stats(server.port)["stats"]["queued"] == max_queue,
                30,
                "the queue fills",
            )
            ticks = fault_stats(server.port)["ticks"]
            poll_until(
                lambda: fault_stats(server.port)["ticks"] >= ticks + 20,
                30,
                "the ticker ticks 20 more times",
            )
            # The pipe is still full: those requests are still waiting for room.
            assert load.total < clients * requests
            pipe.resume()
            load.join()
        wait_settled(server.port)
        assert server.stop() in CLEAN_EXITS, server.output()
        pipe.wait_closed()

    assert load.total == clients * requests
    (final,) = final_stats(stats_dir).values()
    assert final["submitted"] == final["written"] == clients * requests, final
    assert (final["dropped"], final["failed"]) == (0, 0), final
    logged = load_requests(pipe.lines())
    assert set(logged) == load.completed
    assert max(logged.values()) == 1


def test_a_stuck_sink_delays_a_graceful_stop_only_until_close_timeout(tmp_path: Path) -> None:
    """SIGTERM with the reader asleep: the server still exits; what it held is counted as failed."""
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    # The writer waits for 8 records and writes them in chunks of at most PIPE_BUF bytes
    # of whole lines: the first chunk (3 lines of 1 KiB) fits in the pipe, the second
    # blocks, so the batch in flight at close is partly written.
    options = {
        "sink": "stdout",
        "policy": "drop",
        "max_queue": 100,
        "batch_size": 8,
        "flush_interval": 3600,
        "close_timeout": 0.5,
    }
    environment = fault_environment(options, stats_dir)
    with (
        PipeReader(PIPE_SIZE, paused=True) as pipe,
        running_server_with_stdout(
            uvicorn_fault_command, environment, tmp_path / "out", pipe.write_fd
        ) as server,
    ):
        pipe.close_write_end()
        with Load(server.port, requests=100, headers=lambda client: _user_agent(1024)) as load:
            load.join()
        # The lifespan shutdown closes the log, which gives up after close_timeout.
        assert server.stop() in CLEAN_EXITS, server.output()
        pipe.wait_closed()

    (final,) = final_stats(stats_dir).values()
    assert final["submitted"] == load.total == 400, final
    assert final["submitted"] == final["written"] + final["dropped"] + final["failed"], final
    assert final["failed"] >= 1, final
    # Lines that reached the pipe are written, not failed, even in the abandoned batch.
    logged = load_requests(pipe.lines())
    assert sum(logged.values()) == final["written"], final


def test_requests_a_graceful_shutdown_cancels_while_waiting_are_counted_as_dropped(
    tmp_path: Path,
) -> None:
    """uvicorn's --timeout-graceful-shutdown cancels the requests still waiting for room
    behind a stuck sink: each one's record is counted as dropped, none vanishes."""
    max_queue, clients = 4, 8
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    options = {"sink": "stdout", "policy": "wait", "max_queue": max_queue, "close_timeout": 0.5}
    environment = fault_environment(options, stats_dir)

    def command(port: int) -> list[str]:
        return [*uvicorn_fault_command(port), "--timeout-graceful-shutdown", "1"]

    with (
        PipeReader(PIPE_SIZE, paused=True) as pipe,
        running_server_with_stdout(command, environment, tmp_path / "out", pipe.write_fd) as server,
    ):
        pipe.close_write_end()
        with Load(server.port, clients, headers=lambda client: _user_agent(1024)) as load:
            # The writer is stuck in a write and the queue is full: from here on every
            # request waits for room, until the shutdown timeout cancels it.
            poll_until(
                lambda: fault_stats(server.port)["stats"]["queued"] == max_queue,
                30,
                "the queue fills",
            )
            assert server.stop() in CLEAN_EXITS, server.output()
        pipe.wait_closed()

    cancelled = re.search(r"Cancel (\d+) running task\(s\)", server.output())
    assert cancelled, server.output()
    (final,) = final_stats(stats_dir).values()
    assert final["dropped"] == int(cancelled[1]) >= 1, (final, server.output())
    assert final["submitted"] == load.total + final["dropped"], (final, load.total)
    assert final["submitted"] == final["written"] + final["dropped"] + final["failed"], final
    assert final["queued"] == 0, final
